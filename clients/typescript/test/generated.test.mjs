// The committed types are what the OpenAPI document generates: the client
// and the server's document cannot drift apart unnoticed.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const here = resolve(dirname(fileURLToPath(import.meta.url)), "..");

test("src/openapi.ts is what npm run gen makes of the OpenAPI document", { timeout: 120_000 }, async () => {
  const dir = await mkdtemp(join(tmpdir(), "scratchrun-ts-gen-"));
  try {
    const out = join(dir, "openapi.ts");
    const cli = join(here, "node_modules", ".bin", "openapi-typescript");
    await promisify(execFile)(cli, [join(here, "../../internal/httpapi/openapi/openapi.json"), "-o", out], { cwd: here });
    const want = await readFile(out, "utf8");
    const have = await readFile(join(here, "src", "openapi.ts"), "utf8");
    assert.ok(have === want, "src/openapi.ts is stale: run `npm run gen` in clients/typescript and commit it");
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
