// Node's part of the client: writing a result's returned files to disk,
// kept out of the main entry point so that browsers never load node:fs.

import { mkdir, writeFile } from "node:fs/promises";
import { basename, join } from "node:path";
import type { Result } from "./types.js";

export * from "./index.js";

/**
 * Writes each of result's returned files into dir (created if missing) by
 * its base name, as `scratchrun exec` does, and returns the paths written.
 * Two returned paths with one base name are refused rather than one
 * overwriting the other.
 */
export async function saveFiles(result: Pick<Result, "files">, dir: string): Promise<string[]> {
  const targets = new Map<string, Uint8Array>();
  for (const [path, bytes] of Object.entries(result.files)) {
    const name = basename(path);
    if (name === "" || name === "." || name === "..") throw new Error(`saveFiles: ${JSON.stringify(path)} has no file name`);
    if (targets.has(name)) throw new Error(`saveFiles: two returned files are named ${JSON.stringify(name)}`);
    targets.set(name, bytes);
  }
  await mkdir(dir, { recursive: true });
  const written: string[] = [];
  for (const [name, bytes] of targets) {
    const target = join(dir, name);
    await writeFile(target, bytes);
    written.push(target);
  }
  return written;
}
