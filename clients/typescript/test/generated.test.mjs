// The committed types are what the OpenAPI document of a server with
// sessions on generates (the base merged with the sessions fragment, by
// the Go package's merge): a change to either file, or to the merge, makes
// src/openapi.ts stale here, so the client and the documents cannot drift
// apart unnoticed. A server with sessions off serves the base, a subset of
// the merged document: the same types describe it.

import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { generate } from "./gen.mjs";

const here = resolve(dirname(fileURLToPath(import.meta.url)), "..");

test("src/openapi.ts is what npm run gen makes of the merged OpenAPI document", { timeout: 300_000 }, async () => {
  const dir = await mkdtemp(join(tmpdir(), "scratchrun-ts-gen-"));
  try {
    const out = join(dir, "openapi.ts");
    await generate(out);
    const want = await readFile(out, "utf8");
    const have = await readFile(join(here, "src", "openapi.ts"), "utf8");
    assert.ok(have === want, "src/openapi.ts is stale: run `npm run gen` in clients/typescript and commit it");
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
