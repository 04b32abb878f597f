// Generates src/openapi.ts from the OpenAPI document a server with
// sessions on serves: the base (internal/httpapi/openapi/openapi.json)
// merged with its sessions fragment (sessions.json) by the Go package's own
// merge (openapigen/main.go). A server with sessions off serves the base, a
// subset of it: the client's types describe both.
//
//   node test/gen.mjs [OUT]     (npm run gen: OUT is src/openapi.ts)

import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);
const here = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const repo = resolve(here, "../..");

/**
 * Writes the merged document's types to out.
 * @param {string} out
 */
export async function generate(out) {
  const dir = await mkdtemp(join(tmpdir(), "scratchrun-ts-openapi-"));
  try {
    const merged = join(dir, "openapi.json");
    // go on PATH, as test/server.mjs builds the server (scripts/test.sh puts it there).
    await run("go", ["run", "./clients/typescript/openapigen", merged], { cwd: repo });
    await run(join(here, "node_modules", ".bin", "openapi-typescript"), [merged, "-o", out], { cwd: here });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await generate(resolve(process.argv[2] ?? join(here, "src", "openapi.ts")));
}
