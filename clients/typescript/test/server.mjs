// The real server the tests talk to: `scratchrun serve` on a free loopback
// port with a throwaway key store, as cmd/scratchrun/serve_test.go starts it.

import { execFile, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);
const repo = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");

/** @type {Promise<string> | undefined} */
let built;

/** The scratchrun binary: $SCRATCHRUN_BIN, else one built from this tree (once). */
export function binary() {
  if (process.env.SCRATCHRUN_BIN) return Promise.resolve(process.env.SCRATCHRUN_BIN);
  built ??= (async () => {
    const dir = await mkdtemp(join(tmpdir(), "scratchrun-ts-bin-"));
    const out = join(dir, "scratchrun");
    await run("go", ["build", "-o", out, "./cmd/scratchrun"], { cwd: repo });
    return out;
  })();
  return built;
}

/**
 * Makes a key in db and returns its secret (the last line keys create prints).
 * @param {string} db
 * @param {string} name
 * @param {string[]} extra flags such as --concurrency 1
 */
export async function createKey(db, name, ...extra) {
  const { stdout } = await run(await binary(), ["keys", "create", "--name", name, "--db", db, ...extra]);
  const key = stdout.trimEnd().split("\n").at(-1) ?? "";
  if (!/^\S+$/.test(key)) throw new Error(`keys create printed ${JSON.stringify(stdout)}, not a key on its last line`);
  return key;
}

/**
 * The runs `scratchrun keys usage --runs` lists for the key named name.
 * @param {string} db
 * @param {string} name
 */
export async function usageRuns(db, name) {
  const { stdout } = await run(await binary(), ["keys", "usage", "--runs", "--key", name, "--db", db]);
  const lines = stdout.trimEnd().split("\n");
  if (!lines[0]?.startsWith("STARTED")) throw new Error(`keys usage --runs printed ${JSON.stringify(stdout)}`);
  return lines.slice(1);
}

/**
 * A running server.
 * @typedef {{url: string, db: string, keys: Record<string, string>, stop: () => Promise<void>}} Server
 */

/**
 * Starts `scratchrun serve --addr 127.0.0.1:0` with a fresh --db holding a
 * key for each entry of keys (name -> extra flags of keys create), and
 * waits until it says where it listens. flags are more of serve's (such
 * as --sessions), env more of its environment.
 * @param {Record<string, string[]>} keys
 * @param {{flags?: string[], env?: Record<string, string>}} [more]
 * @returns {Promise<Server>}
 */
export async function startServer(keys, more = {}) {
  const dir = await mkdtemp(join(tmpdir(), "scratchrun-ts-"));
  const db = join(dir, "keys.db");
  /** @type {Record<string, string>} */
  const secrets = {};
  for (const [name, extra] of Object.entries(keys)) secrets[name] = await createKey(db, name, ...extra);
  const proc = spawn(await binary(), ["serve", "--addr", "127.0.0.1:0", "--db", db, ...(more.flags ?? [])], {
    stdio: ["ignore", "ignore", "pipe"],
    env: { ...process.env, ...more.env },
  });
  const exited = new Promise((done) => proc.once("exit", (code, signal) => done({ code, signal })));
  let said = "";
  const url = await new Promise((found, fail) => {
    const limit = setTimeout(() => fail(new Error(`serve did not say where it listens within 120 s: ${said}`)), 120_000);
    proc.stderr.setEncoding("utf8");
    proc.stderr.on("data", (chunk) => {
      said += chunk;
      // Only the start is kept for messages; the rest is drained so that the pipe never fills.
      if (said.length > 64 << 10) said = said.slice(0, 64 << 10);
      const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(said);
      if (m) {
        clearTimeout(limit);
        found(m[1]);
      }
    });
    exited.then((how) => {
      clearTimeout(limit);
      fail(new Error(`serve exited before listening (${JSON.stringify(how)}): ${said}`));
    });
  });
  return {
    url,
    db,
    keys: secrets,
    async stop() {
      proc.kill("SIGTERM");
      const how = /** @type {{code: number | null}} */ (await exited);
      await rm(dir, { recursive: true, force: true });
      if (how.code !== 0) throw new Error(`serve exited ${JSON.stringify(how)}: ${said}`);
    },
  };
}
