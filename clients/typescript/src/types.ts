// The client's own shapes (camelCase, files as bytes) of the API's
// documents (src/wire.ts), and their conversions.

import { decodeBase64, encodeBase64 } from "./base64.js";
import { fromWireSessionsInfo } from "./sessions.js";
import type { SessionsInfo } from "./sessions.js";
import type { Outcome, WireAdmission, WireFacts, WireInfo, WireRequest, WireResult } from "./wire.js";

/** What to run: the body of POST /v1/exec, in the client's words. */
export interface RunRequest {
  /** The program's source. */
  code: string;
  /** The runtime to run it with, e.g. "python3.13" (GET /v1/runtimes lists them). */
  runtime: string;
  /** Files written into the sandbox before the run: text as given, bytes exactly. */
  files?: Record<string, string | Uint8Array> | undefined;
  /** Absolute paths to bring back after the run (Result.files). */
  returnFiles?: string[] | undefined;
  /** Environment variables of the program. */
  env?: Record<string, string> | undefined;
  /** Wall-clock limit; the server's default when absent. */
  timeoutMs?: number | undefined;
  /** Memory limit; the server's default when absent. */
  memoryMb?: number | undefined;
  /** "none" (loopback only, the default) or "egress" (if the server allows it). */
  network?: "none" | "egress" | undefined;
}

/** What one run produced. */
export interface Result {
  /** The program's exit status: 124 when the timeout killed it, 137 when killed (the memory limit). */
  exitCode: number;
  stdout: string;
  stderr: string;
  /** How long the program ran in the sandbox. */
  executionMs: number;
  /** True only when the sandbox's teardown was verified. */
  statePurged: boolean;
  /** The returned files, by path, as bytes. */
  files: Record<string, Uint8Array>;
  /** Sentences for people and models: what was cut, missing or hit. */
  note: string;
  /** How the run ended: success, nonzero_exit, timeout, memory_limit or machine_memory. */
  outcome: Outcome;
  /** What the note says, as data, exactly as the API sends it (snake_case). */
  facts: WireFacts;
  /** True when the server answered from the Idempotency-Key's stored answer. */
  replayed: boolean;
}

/** A limit's range, from GET /v1/runtimes. */
export interface LimitRange {
  min: number;
  default: number;
  max: number;
}

/** One installed runtime. */
export interface RuntimeInfo {
  name: string;
  version: string;
  image: string;
  libraries: string[];
}

/** GET /v1/runtimes: what the server offers. */
export interface ServerInfo {
  /** The server's scratchrun version. */
  version: string | undefined;
  /** From a cluster's front end: the versions its live workers run. */
  workerVersions: string[];
  runtimes: RuntimeInfo[];
  isolation: string;
  networkDefault: string;
  egressAllowed: boolean;
  timeoutMs: LimitRange;
  memoryMb: LimitRange;
  outputLimitBytes: number;
  maxReturnBytes: number;
  /** The limits this host cannot enforce ("memory", "processes", "cpu"). */
  unenforcedLimits: string[];
  softwareEmulation: boolean;
  /** The server's admission at the moment it answered, as the API sends it. */
  admission: WireAdmission | undefined;
  /** The server's bounds of sessions; undefined when it offers none. */
  sessions: SessionsInfo | undefined;
}

/** The body of POST /v1/exec for req. */
export function wireRequest(req: RunRequest): WireRequest {
  const out: WireRequest = { runtime: req.runtime, code: req.code };
  if (req.timeoutMs !== undefined || req.memoryMb !== undefined) {
    out.limits = {};
    if (req.timeoutMs !== undefined) out.limits.timeout_ms = req.timeoutMs;
    if (req.memoryMb !== undefined) out.limits.memory_mb = req.memoryMb;
  }
  if (req.env !== undefined) out.env = req.env;
  if (req.files !== undefined) {
    for (const [path, content] of Object.entries(req.files)) {
      if (typeof content === "string") (out.files ??= {})[path] = content;
      else (out.files_base64 ??= {})[path] = encodeBase64(content);
    }
  }
  if (req.returnFiles !== undefined) out.return_files = req.returnFiles;
  if (req.network !== undefined) out.network = req.network;
  return out;
}

/** The client's Result of the API's result document. */
export function fromWireResult(w: WireResult, replayed: boolean): Result {
  const files: Record<string, Uint8Array> = {};
  // A server older than the document may send null for an empty map.
  for (const [path, b64] of Object.entries(w.files ?? {})) files[path] = decodeBase64(b64);
  return {
    exitCode: w.exit_code,
    stdout: w.stdout,
    stderr: w.stderr,
    executionMs: w.execution_ms,
    statePurged: w.state_purged,
    files,
    note: w.note,
    outcome: w.outcome,
    facts: w.facts,
    replayed,
  };
}

/** The client's ServerInfo of GET /v1/runtimes's answer. */
export function fromWireInfo(w: WireInfo): ServerInfo {
  return {
    version: w.version,
    workerVersions: w.worker_versions ?? [],
    runtimes: (w.runtimes ?? []).map((r) => ({ name: r.name, version: r.version, image: r.image, libraries: r.libraries ?? [] })),
    isolation: w.isolation,
    networkDefault: w.network_default,
    egressAllowed: w.egress_allowed,
    timeoutMs: { min: w.min_timeout_ms, default: w.default_timeout_ms, max: w.max_timeout_ms },
    memoryMb: { min: w.min_memory_mb, default: w.default_memory_mb, max: w.max_memory_mb },
    outputLimitBytes: w.output_limit_bytes,
    maxReturnBytes: w.max_return_bytes,
    unenforcedLimits: w.unenforced_limits ?? [],
    softwareEmulation: w.software_emulation ?? false,
    admission: w.admission,
    sessions: w.sessions === undefined ? undefined : fromWireSessionsInfo(w.sessions),
  };
}
