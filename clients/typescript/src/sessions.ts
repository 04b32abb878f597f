// Sessions (a server run with --sessions): a sandbox kept across calls,
// whose files, processes and Python or Node variables persist from one
// call in it to the next until it is closed, idle past its idle TTL or past
// its lifetime (docs/api.md, "Sessions"). The client's shapes of their
// documents and the conversions; the calls are ScratchRun's methods.

import { fromWireResult, wireRequest } from "./types.js";
import type { Result, RunRequest } from "./types.js";
import type {
  SessionEndReason,
  WireSessionCall,
  WireSessionCallInfo,
  WireSessionEnd,
  WireSessionInfo,
  WireSessionRequest,
  WireSessionResult,
  WireSessionsInfo,
} from "./wire.js";

/** How to open a session: the body of POST /v1/sessions, in the client's words. */
export interface SessionRequest {
  /** The runtime of every call in the session unless the call names another. */
  runtime: string;
  /** Each call's default wall-clock limit. */
  timeoutMs?: number | undefined;
  /** Memory for all the session's processes over its whole life. */
  memoryMb?: number | undefined;
  /** The session's network for its life. */
  network?: "none" | "egress" | undefined;
  /** The session ends this long after its last call ended (the server's default when absent). */
  idleTtlMs?: number | undefined;
  /** The session ends this long after it opened (the server's maximum when absent). */
  maxLifetimeMs?: number | undefined;
  /** The base environment of every call in it. */
  env?: Record<string, string> | undefined;
}

/**
 * A call in a session: RunRequest's fields, its runtime the session's
 * when absent. Its network and memory are the session's for its life
 * (another value is a 400), so they are not asked here.
 */
export type SessionRunRequest = Omit<RunRequest, "runtime" | "network" | "memoryMb"> & { runtime?: string | undefined };

/** An open session. Times are RFC 3339 strings, as the server sends them. */
export interface SessionInfo {
  /** Its id, "ses_" and 26 letters. */
  id: string;
  runtime: string;
  network: string;
  /** Each call's default timeout and the session's memory. */
  limits: { timeoutMs: number | undefined; memoryMb: number | undefined };
  idleTtlMs: number;
  maxLifetimeMs: number;
  createdAt: string;
  lastUsedAt: string;
  /** When it ends if no call comes before. */
  expiresAt: string;
  /** When it ends however busy. */
  lifetimeEndsAt: string;
  state: WireSessionInfo["state"];
  /** What its sandbox used when described. */
  memoryBytes: number;
  /** What of the interpreter persists between calls. */
  interpreter: WireSessionInfo["interpreter"];
  /** What a fork of it copies. */
  fork: WireSessionInfo["fork"];
  /** The parent's id, for a session a fork made. */
  forkedFrom: string | undefined;
}

/** How and when a session ended. */
export interface SessionEnd {
  reason: SessionEndReason;
  at: string;
  /** The teardown of its sandbox was verified. */
  statePurged: boolean;
}

/** What a call in a session says of the session. */
export interface SessionCallInfo {
  id: string;
  /** When it now ends if no call comes before. */
  expiresAt: string;
  /** "kept": the variables of earlier calls are there; "started" or "restarted": they are not. */
  interpreter: WireSessionCallInfo["interpreter"];
  /** Set when this call ended the session (its memory limit, say). */
  ended: SessionEnd | undefined;
  /** Output its processes wrote between calls (dropped), in bytes. */
  betweenCallsOutputBytes: number;
}

/** A call in a session's result: a Result (statePurged false while the session goes on) and the session's account. */
export interface SessionResult extends Result {
  session: SessionCallInfo;
}

/** GET /v1/runtimes's sessions: the server's bounds of them. */
export interface SessionsInfo {
  idleTtlMs: number;
  maxIdleTtlMs: number;
  maxLifetimeMs: number;
  /** Sessions one API key may have open at once (0: no bound). */
  perKey: number;
  maxMemoryMb: number;
}

/** The body of POST /v1/sessions for req. */
export function wireSessionRequest(req: SessionRequest): WireSessionRequest {
  const out: WireSessionRequest = { runtime: req.runtime };
  if (req.timeoutMs !== undefined || req.memoryMb !== undefined) {
    out.limits = {};
    if (req.timeoutMs !== undefined) out.limits.timeout_ms = req.timeoutMs;
    if (req.memoryMb !== undefined) out.limits.memory_mb = req.memoryMb;
  }
  if (req.network !== undefined) out.network = req.network;
  if (req.idleTtlMs !== undefined) out.idle_ttl_ms = req.idleTtlMs;
  if (req.maxLifetimeMs !== undefined) out.max_lifetime_ms = req.maxLifetimeMs;
  if (req.env !== undefined) out.env = req.env;
  return out;
}

/** The body of POST /v1/sessions/{id}/exec for req: RunRequest's, without a runtime when it has none. */
export function wireSessionCall(req: SessionRunRequest): WireSessionCall {
  const { runtime, ...rest } = wireRequest({ ...req, runtime: req.runtime ?? "" });
  return runtime === "" ? rest : { runtime, ...rest };
}

/** The client's SessionInfo of the API's. */
export function fromWireSessionInfo(w: WireSessionInfo): SessionInfo {
  return {
    id: w.id,
    runtime: w.runtime,
    network: w.network,
    limits: { timeoutMs: w.limits?.timeout_ms, memoryMb: w.limits?.memory_mb },
    idleTtlMs: w.idle_ttl_ms,
    maxLifetimeMs: w.max_lifetime_ms,
    createdAt: w.created_at,
    lastUsedAt: w.last_used_at,
    expiresAt: w.expires_at,
    lifetimeEndsAt: w.lifetime_ends_at,
    state: w.state,
    memoryBytes: w.memory_bytes,
    interpreter: w.interpreter,
    fork: w.fork,
    forkedFrom: w.forked_from,
  };
}

/** The client's SessionEnd of the API's. */
export function fromWireSessionEnd(w: WireSessionEnd): SessionEnd {
  return { reason: w.reason, at: w.at, statePurged: w.state_purged };
}

/** The client's SessionResult of a call in a session's result document. */
export function fromWireSessionResult(w: WireSessionResult, replayed: boolean): SessionResult {
  const s = w.session;
  return {
    ...fromWireResult(w, replayed),
    session: {
      id: s.id,
      expiresAt: s.expires_at,
      interpreter: s.interpreter,
      ended: s.ended === undefined ? undefined : fromWireSessionEnd(s.ended),
      betweenCallsOutputBytes: s.between_calls_output_bytes ?? 0,
    },
  };
}

/** The client's SessionsInfo of GET /v1/runtimes's sessions. */
export function fromWireSessionsInfo(w: WireSessionsInfo): SessionsInfo {
  return {
    idleTtlMs: w.idle_ttl_ms,
    maxIdleTtlMs: w.max_idle_ttl_ms,
    maxLifetimeMs: w.max_lifetime_ms,
    perKey: w.per_key,
    maxMemoryMb: w.max_memory_mb,
  };
}

/** The route of a session: its id escaped as one path segment. */
export function sessionPath(id: string, rest = ""): string {
  return `/v1/sessions/${encodeURIComponent(id)}${rest}`;
}

/**
 * The route of a session's file at path (absolute in the sandbox), each of
 * its segments escaped: a space, "#" or "?" in a name stays in the name,
 * and a "/" only ever separates directories.
 */
export function filePath(id: string, path: string): string {
  if (!path.startsWith("/")) throw new TypeError(`scratchrun: session file ${JSON.stringify(path)}: the path must be absolute`);
  return sessionPath(id, "/files/" + path.slice(1).split("/").map(encodeURIComponent).join("/"));
}
