// The API's errors as classes, chosen by the error document's code, so that
// callers catch what they can act on (a field to fix, a key to replace, a
// refusal to wait out, a run that may have happened) without parsing text.


import { fromWireSessionEnd } from "./sessions.js";
import type { SessionEnd } from "./sessions.js";
import type { WireSessionEnd } from "./wire.js";

/** What the server said of a failed call, and how it was said. */
export interface ErrorDetails {
  /** The error document's code, e.g. "invalid_request"; "connection" when no answer came. */
  code: string;
  /** The HTTP status; 0 when no answer came. */
  status: number;
  /** The request field a 400 names (e.g. "limits.timeout_ms"). */
  field?: string;
  /** Why a call was refused before it ran (e.g. "key_concurrency"). */
  reason?: string;
  /** The key's limit that was hit, for its refusals. */
  limit?: number;
  /** The server's Retry-After in seconds, when it sent one. */
  retryAfter?: number;
  /** How and when the session ended, for session_ended. */
  ended?: SessionEnd;
}

/** Any error of a ScratchRun call: the server's error document, or no answer. */
export class ScratchRunError extends Error {
  /** The error document's code ("connection" when no answer came). */
  readonly code: string;
  /** The HTTP status (0 when no answer came). */
  readonly status: number;
  /** The request field the server named, for a bad request. */
  readonly field: string | undefined;
  /** The refusal's reason, for a call refused before it ran. */
  readonly reason: string | undefined;
  /** The key's limit that was hit. */
  readonly limit: number | undefined;
  /** The server's Retry-After in seconds. */
  readonly retryAfter: number | undefined;

  constructor(message: string, details: ErrorDetails, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = details.code;
    this.status = details.status;
    this.field = details.field;
    this.reason = details.reason;
    this.limit = details.limit;
    this.retryAfter = details.retryAfter;
  }
}

/** 400: the request is wrong; field names what to fix. */
export class BadRequestError extends ScratchRunError {}

/** 401: the API key is missing, unknown or revoked. */
export class UnauthorizedError extends ScratchRunError {}

/**
 * 429 or 503 with a reason: the call was refused before it ran (capacity,
 * the key's rate or concurrency, draining); retryAfter says when to try again.
 */
export class RefusedError extends ScratchRunError {}

/** 502 worker_lost: a cluster's worker was lost with the call; the code may have run. */
export class WorkerLostError extends ScratchRunError {}

/**
 * 409: the Idempotency-Key was used with another body
 * (idempotency_key_reused), or its first request ended without an answer
 * (idempotency_unknown: the code may have run).
 */
export class IdempotencyConflictError extends ScratchRunError {}

/** 404 session_not_found: no open session has this id for this API key (another key's gets the same answer, on purpose). */
export class SessionNotFoundError extends ScratchRunError {}

/** 410 session_ended: the session ended; ended says why and when. Its files and state are gone. */
export class SessionEndedError extends ScratchRunError {
  /** The error document's ended, when the server sent it. */
  readonly ended: SessionEnd | undefined;

  constructor(message: string, details: ErrorDetails, options?: { cause?: unknown }) {
    super(message, details, options);
    this.ended = details.ended;
  }
}

/** 502 session_lost: the cluster worker holding the session was lost, and the session with it. */
export class SessionLostError extends ScratchRunError {}

/**
 * 429 session_limit (reason key_sessions): the key has its maximum of open
 * sessions. It has no Retry-After and is not retried: close one first.
 */
export class SessionLimitError extends RefusedError {}

/** 404 file_not_found: the session holds no regular file at the path. */
export class SessionFileNotFoundError extends ScratchRunError {}

/** 413 file_too_large: a write over the server's largest file (nothing written), or a read of one larger than a run may return. */
export class FileTooLargeError extends ScratchRunError {}

/** 409 fork_unsupported: the server's isolation level cannot fork a session. */
export class ForkUnsupportedError extends ScratchRunError {}

/** No answer: the connection failed or dropped before the answer was read. */
export class ConnectionError extends ScratchRunError {}

/** The error class of an error document's code and status. */
function classOf(code: string, status: number, reason: string | undefined): typeof ScratchRunError {
  switch (code) {
    case "invalid_request":
      return BadRequestError;
    case "unauthorized":
      return UnauthorizedError;
    case "worker_lost":
      return WorkerLostError;
    case "idempotency_key_reused":
    case "idempotency_unknown":
      return IdempotencyConflictError;
    case "session_not_found":
      return SessionNotFoundError;
    case "session_ended":
      return SessionEndedError;
    case "session_lost":
      return SessionLostError;
    case "session_limit":
      return SessionLimitError;
    case "file_not_found":
      return SessionFileNotFoundError;
    case "file_too_large":
      return FileTooLargeError;
    case "fork_unsupported":
      return ForkUnsupportedError;
  }
  if (status === 429 || (status === 503 && reason !== undefined)) return RefusedError;
  if (status === 400) return BadRequestError;
  if (status === 401) return UnauthorizedError;
  if (status === 409) return IdempotencyConflictError;
  return ScratchRunError;
}

/** Parses Retry-After (delay-seconds or an HTTP date) into seconds. */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | undefined {
  if (value === null) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v);
  const at = Date.parse(v);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, Math.round((at - now) / 1000));
}

/** An error document's error, as far as the client relies on it (codes beyond the documented ones are kept). */
export interface ErrorDetail {
  code: string;
  message: string;
  reason?: string | undefined;
  field?: string | undefined;
  limit?: number | undefined;
  ended?: WireSessionEnd | undefined;
}

/** The error of an error document (from a non-2xx answer or a stream's error event). */
export function errorFromDocument(status: number, doc: ErrorDetail, retryAfter?: number): ScratchRunError {
  const details: ErrorDetails = { code: doc.code, status };
  if (doc.field !== undefined && doc.field !== "") details.field = doc.field;
  if (doc.reason !== undefined && doc.reason !== "") details.reason = doc.reason;
  if (doc.limit !== undefined && doc.limit !== 0) details.limit = doc.limit;
  if (retryAfter !== undefined) details.retryAfter = retryAfter;
  if (doc.ended !== undefined) details.ended = fromWireSessionEnd(doc.ended);
  const Class = classOf(doc.code, status, details.reason);
  return new Class(`scratchrun: ${status} ${doc.code}: ${doc.message}`, details);
}

/** Guesses a code for an answer that carried no error document (a proxy's page). */
function codeForStatus(status: number): string {
  switch (status) {
    case 400:
      return "invalid_request";
    case 401:
      return "unauthorized";
    case 413:
      return "body_too_large";

    case 429:
      return "at_capacity";
    case 503:
      return "draining";
    case 404:
      return "not_found";
  }
  return "internal";
}

/** The error of a non-2xx answer whose body (at most a bounded prefix) is text. */
export function errorFromAnswer(status: number, body: string, retryAfter: number | undefined): ScratchRunError {
  try {
    const doc = JSON.parse(body) as { error?: ErrorDetail };
    if (doc.error && typeof doc.error.code === "string" && doc.error.code !== "") {
      return errorFromDocument(status, doc.error, retryAfter);
    }
  } catch {
    // Not the API's document: said below by status.
  }
  const shown = body.trim().slice(0, 200);
  return errorFromDocument(status, { code: codeForStatus(status), message: `HTTP ${status}${shown ? ": " + shown : ""}` }, retryAfter);
}
