// The client of a ScratchRun server's HTTP API. It leans only on what Node
// 20+ and browsers share (fetch, ReadableStream, TextDecoder, AbortSignal),
// so that one build serves both.

import { ConnectionError, ScratchRunError, RefusedError, SessionLimitError, errorFromAnswer, errorFromDocument, parseRetryAfter } from "./errors.js";
import {
  filePath,
  fromWireSessionEnd,
  fromWireSessionInfo,
  fromWireSessionResult,
  sessionPath,
  wireSessionCall,
  wireSessionRequest,
} from "./sessions.js";
import type { SessionEnd, SessionInfo, SessionRequest, SessionResult, SessionRunRequest } from "./sessions.js";
import { readSSE } from "./sse.js";
import { fromWireInfo, fromWireResult, wireRequest } from "./types.js";
import type { Result, RunRequest, ServerInfo } from "./types.js";
import type {
  WireError,
  WireInfo,
  WireOutput,
  WireSessionEnd,
  WireSessionFileWritten,
  WireSessionInfo,
  WireSessionList,
  WireStarted,
} from "./wire.js";

/** The server a client talks to when neither the options nor SCRATCHRUN_API_URL say. */
export const DEFAULT_URL = "http://127.0.0.1:8722";

/** How a client is made; every field is optional. */
export interface ClientOptions {
  /** The server, e.g. "http://127.0.0.1:8722" (default: SCRATCHRUN_API_URL, else DEFAULT_URL). */
  url?: string | undefined;
  /** The API key, sent as a bearer token (default: SCRATCHRUN_API_KEY, else none). */
  apiKey?: string | undefined;
  /** The fetch to use (default: the global one). */
  fetch?: typeof globalThis.fetch | undefined;
  /** How many times one call is retried at most (default 3; 0: never). */
  maxRetries?: number | undefined;
  /**
   * The longest wait before a retry (default 30000 ms): a refusal whose
   * Retry-After is longer is not retried but thrown, with its retryAfter.
   */
  maxRetryDelayMs?: number | undefined;
  /** Told of each retry before its wait, e.g. to log it. */
  onRetry?: ((retry: RetryInfo) => void) | undefined;
}

/** One retry the client is about to make. */
export interface RetryInfo {
  /** 1 for the first retry of a call. */
  attempt: number;
  /** How long the client waits first. */
  delayMs: number;
  /** Why: the refusal (with its retryAfter) or the connection's failure. */
  error: ScratchRunError;
}

/** Per-call options. */
export interface CallOptions {
  /**
   * Sent as the Idempotency-Key header (1 to 255 visible ASCII characters):
   * a repeat with the same key and body gets the first run's answer
   * instead of running the code again. Only with one does the client retry
   * after a lost connection, and a lost connection does not kill the run.
   */
  idempotencyKey?: string | undefined;
  /** Aborts the call; without an idempotency key the server then kills the run. */
  signal?: AbortSignal | undefined;
}

/** One event of a streamed run, in the order the server sent them; R is a session's SessionResult. */
export type StreamEvent<R extends Result = Result> =
  | { type: "started"; elapsedMs: number }
  | { type: "stdout"; text: string }
  | { type: "stderr"; text: string }
  | { type: "result"; result: R }
  | { type: "error"; error: ScratchRunError };

/** Reads a run's result document W as the client's R. */
type Convert<W, R extends Result> = (doc: W, replayed: boolean) => R;

/** Statuses a stream's error event would have had as a plain answer. */
const statusOfCode: Record<string, number> = { worker_lost: 502, session_lost: 502, session_ended: 410, draining: 503, no_workers: 503, internal: 500 };

/** The retries of one call, shared by its attempts. */
interface Attempts {
  /** Retries made so far. */
  n: number;
  /** Whether the call may be sent again after a lost connection (nothing runs twice). */
  repeatable: boolean;
}

function execAttempts(options: CallOptions): Attempts {
  return { n: 0, repeatable: options.idempotencyKey !== undefined };
}

/** A read of an answer that failed: the connection dropped mid-body. */
class BodyLost extends Error {}

/** A client of one ScratchRun server. Safe to share between concurrent calls. */
export class ScratchRun {
  /** The server's base URL, without a trailing slash. */
  readonly url: string;
  readonly #apiKey: string | undefined;
  readonly #fetch: typeof globalThis.fetch;
  readonly #maxRetries: number;
  readonly #maxRetryDelayMs: number;
  readonly #onRetry: ((retry: RetryInfo) => void) | undefined;

  constructor(options: ClientOptions = {}) {
    this.url = (options.url ?? envVar("SCRATCHRUN_API_URL") ?? DEFAULT_URL).replace(/\/+$/, "");
    this.#apiKey = options.apiKey ?? envVar("SCRATCHRUN_API_KEY");
    const f = options.fetch ?? globalThis.fetch;
    if (typeof f !== "function") throw new TypeError("scratchrun: no fetch here (Node 20+ and browsers have one): pass options.fetch");
    // Bound so that a browser's fetch is not called with another `this`.
    this.#fetch = options.fetch ?? ((input, init) => f(input, init));
    this.#maxRetries = Math.max(0, options.maxRetries ?? 3);
    this.#maxRetryDelayMs = Math.max(0, options.maxRetryDelayMs ?? 30_000);
    this.#onRetry = options.onRetry;
  }

  /** Runs req and returns its result once the run has ended. */
  run(req: RunRequest, options: CallOptions = {}): Promise<Result> {
    return this.#result("/v1/exec", JSON.stringify(wireRequest(req)), options, fromWireResult);
  }

  /** POSTs a run's body to path and returns its result once the run has ended. */
  async #result<W, R extends Result>(path: string, body: string, options: CallOptions, convert: Convert<W, R>): Promise<R> {
    const attempts = execAttempts(options);
    for (;;) {
      const resp = await this.#send("POST", path, body, "application/json", options, attempts);
      const replayed = resp.headers.get("Idempotency-Replayed") === "true";
      try {
        if (isEventStream(resp)) {
          // A replay of a first request that streamed is its stream.
          return await resultOfStream(resp, replayed, convert);
        }
        return convert(await readJSON<W>(resp), replayed);
      } catch (err) {
        if (!(err instanceof BodyLost)) throw err;
        await this.#retryConnection(err, options, attempts);
      }
    }
  }

  /** What the server offers: its runtimes, limits and isolation. */
  async runtimes(options: { signal?: AbortSignal | undefined } = {}): Promise<ServerInfo> {
    // A GET runs nothing: safe to repeat after a lost connection.
    const attempts: Attempts = { n: 0, repeatable: true };
    for (;;) {
      const resp = await this.#send("GET", "/v1/runtimes", undefined, "application/json", options, attempts);
      try {
        return fromWireInfo(await readJSON<WireInfo>(resp));
      } catch (err) {
        if (!(err instanceof BodyLost)) throw err;
        await this.#retryConnection(err, options, attempts);
      }
    }
  }

  /**
   * Runs req and yields its events as they happen: started, the output's
   * chunks, then result (or error, when the run failed after it began).
   * Breaking out of the loop closes the connection. With an
   * idempotencyKey, a lost connection is retried and the replayed events
   * already yielded are skipped, so each event comes once.
   */
  stream(req: RunRequest, options: CallOptions = {}): AsyncGenerator<StreamEvent, void, undefined> {
    return this.#events("/v1/exec", JSON.stringify(wireRequest(req)), options, fromWireResult);
  }

  /** POSTs a run's body to path asking for its events, and yields them as stream does. */
  async *#events<W, R extends Result>(path: string, body: string, options: CallOptions, convert: Convert<W, R>): AsyncGenerator<StreamEvent<R>, void, undefined> {
    const attempts = execAttempts(options);
    let seen = 0;
    for (;;) {
      const resp = await this.#send("POST", path, body, "text/event-stream", options, attempts);
      const replayed = resp.headers.get("Idempotency-Replayed") === "true";
      if (!isEventStream(resp)) {
        // A server that does not stream (or a replay of a request that did
        // not) answers with the result alone.
        let wire: W;
        try {
          wire = await readJSON<W>(resp);
        } catch (err) {
          if (!(err instanceof BodyLost)) throw err;
          await this.#retryConnection(err, options, attempts);
          continue;
        }
        yield { type: "result", result: convert(wire, replayed) };
        return;
      }
      try {
        for await (const msg of readSSEOrLost(resp)) {
          const id = Number(msg.id);
          if (Number.isInteger(id) && id > 0) {
            if (id <= seen) continue;
            seen = id;
          }
          const event = toEvent(msg.event, msg.data, replayed, convert);
          if (event === undefined) continue;
          yield event;
          if (event.type === "result" || event.type === "error") return;
        }
        // The body ended without the run's last event: the connection
        // was cut (a proxy's timeout, the server's end).
        throw new BodyLost("the stream ended before the run's result");
      } catch (err) {
        if (!(err instanceof BodyLost)) throw err;
        await this.#retryConnection(err, options, attempts);
      }
    }
  }

  // Sessions (a server run with --sessions; docs/api.md, "Sessions").

  /**
   * Opens a session (POST /v1/sessions). Without an idempotencyKey a lost
   * connection is not retried: the session may have opened, and a retry
   * would open another.
   */
  openSession(req: SessionRequest, options: CallOptions = {}): Promise<SessionInfo> {
    return this.#sessionInfo("/v1/sessions", JSON.stringify(wireSessionRequest(req)), options);
  }

  /** Opens a new session holding a copy of session id (POST /v1/sessions/{id}/fork); retried as openSession is. */
  forkSession(id: string, options: CallOptions = {}): Promise<SessionInfo> {
    return this.#sessionInfo(sessionPath(id, "/fork"), "{}", options);
  }

  async #sessionInfo(path: string, body: string, options: CallOptions): Promise<SessionInfo> {
    return fromWireSessionInfo(await this.#json<WireSessionInfo>("POST", path, body, options, options.idempotencyKey !== undefined));
  }

  /** The caller's open sessions (GET /v1/sessions). */
  async sessions(options: { signal?: AbortSignal | undefined } = {}): Promise<SessionInfo[]> {
    const list = await this.#json<WireSessionList>("GET", "/v1/sessions", undefined, options, true);
    return (list.sessions ?? []).map(fromWireSessionInfo);
  }

  /**
   * The key's open session id as it is now (GET /v1/sessions/{id}): its
   * settings, state, memory in use and expiry. A SessionNotFoundError when
   * no open session of this key has the id, a SessionEndedError (its
   * ended) once it ended; retried as any read.
   */
  async session(id: string, options: { signal?: AbortSignal | undefined } = {}): Promise<SessionInfo> {
    return fromWireSessionInfo(await this.#json<WireSessionInfo>("GET", sessionPath(id), undefined, options, true));
  }

  /**
   * Runs req in session id (POST /v1/sessions/{id}/exec), with the
   * session's runtime unless req names one; retried as run is.
   */
  runInSession(id: string, req: SessionRunRequest, options: CallOptions = {}): Promise<SessionResult> {
    return this.#result(sessionPath(id, "/exec"), JSON.stringify(wireSessionCall(req)), options, fromWireSessionResult);
  }

  /** Runs req in session id as runInSession does, and yields its events as stream does. */
  streamInSession(id: string, req: SessionRunRequest, options: CallOptions = {}): AsyncGenerator<StreamEvent<SessionResult>, void, undefined> {
    return this.#events(sessionPath(id, "/exec"), JSON.stringify(wireSessionCall(req)), options, fromWireSessionResult);
  }

  /** The bytes of the file at path (absolute) in session id (GET /v1/sessions/{id}/files/{path}). */
  async readSessionFile(id: string, path: string, options: { signal?: AbortSignal | undefined } = {}): Promise<Uint8Array> {
    const attempts: Attempts = { n: 0, repeatable: true };
    for (;;) {
      const resp = await this.#send("GET", filePath(id, path), undefined, "application/octet-stream", options, attempts);
      try {
        return new Uint8Array(await resp.arrayBuffer());
      } catch (err) {
        if (options.signal?.aborted) throw options.signal.reason ?? err;
        await this.#retryConnection(new BodyLost(`answer lost: ${describe(err)}`, { cause: err }), options, attempts);
      }
    }
  }

  /**
   * Writes data (a string as UTF-8) as the file at path (absolute) in
   * session id, its missing parents made (PUT /v1/sessions/{id}/files/{path}),
   * and returns the size written. Retried as a read is: the same bytes
   * written again leave the same file.
   */
  async writeSessionFile(id: string, path: string, data: Uint8Array | string, options: { signal?: AbortSignal | undefined } = {}): Promise<number> {
    // A copy: fetch takes no view of a SharedArrayBuffer, and the caller may change data meanwhile.
    const bytes = typeof data === "string" ? new TextEncoder().encode(data) : new Uint8Array(data);
    const written = await this.#json<WireSessionFileWritten>("PUT", filePath(id, path), bytes, options, true, "application/octet-stream");
    return written.size;
  }

  /**
   * Ends session id and purges it (DELETE /v1/sessions/{id}): the answer
   * says whether its teardown was verified. A lost connection is not
   * retried: the retry would find the session ended.
   */
  async closeSession(id: string, options: { signal?: AbortSignal | undefined } = {}): Promise<SessionEnd> {
    return fromWireSessionEnd(await this.#json<WireSessionEnd>("DELETE", sessionPath(id), undefined, options, false));
  }

  /** One call answered with JSON, retried after a lost connection when repeatable. */
  async #json<T>(
    method: string,
    path: string,
    body: string | Uint8Array<ArrayBuffer> | undefined,
    options: CallOptions,
    repeatable: boolean,
    contentType = "application/json",
  ): Promise<T> {
    const attempts: Attempts = { n: 0, repeatable };
    for (;;) {
      const resp = await this.#send(method, path, body, "application/json", options, attempts, contentType);
      try {
        return await readJSON<T>(resp);
      } catch (err) {
        if (!(err instanceof BodyLost)) throw err;
        await this.#retryConnection(err, options, attempts);
      }
    }
  }

  /**
   * Sends one request, retrying refusals (429, and 503 with a reason:
   * nothing ran) after their Retry-After, and a failed connection when
   * options has an idempotency key; returns a 2xx answer, else throws
   * the server's error.
   */
  async #send(
    method: string,
    path: string,
    body: string | Uint8Array<ArrayBuffer> | undefined,
    accept: string,
    options: CallOptions,
    attempts: Attempts,
    contentType = "application/json",
  ): Promise<Response> {
    const headers: Record<string, string> = { Accept: accept };
    if (body !== undefined) headers["Content-Type"] = contentType;
    if (this.#apiKey) headers["Authorization"] = `Bearer ${this.#apiKey}`;
    if (options.idempotencyKey !== undefined) headers["Idempotency-Key"] = options.idempotencyKey;
    for (;;) {
      let resp: Response;
      try {
        const init: RequestInit = { method, headers };
        if (body !== undefined) init.body = body;
        if (options.signal !== undefined) init.signal = options.signal;
        resp = await this.#fetch(this.url + path, init);
      } catch (err) {
        if (options.signal?.aborted) throw options.signal.reason ?? err;
        await this.#retryConnection(new BodyLost(`${method} ${path}: no answer: ${describe(err)}`, { cause: err }), options, attempts);
        continue;
      }
      if (resp.ok) return resp;
      let text: string;
      try {
        text = await resp.text();
      } catch (err) {
        if (options.signal?.aborted) throw options.signal.reason ?? err;
        await this.#retryConnection(new BodyLost(`${method} ${path}: answer ${resp.status} lost: ${describe(err)}`, { cause: err }), options, attempts);
        continue;
      }
      const error = errorFromAnswer(resp.status, text, parseRetryAfter(resp.headers.get("Retry-After")));
      // Waiting frees none of the key's sessions: only closing one does.
      if (!(error instanceof RefusedError) || error instanceof SessionLimitError || attempts.n >= this.#maxRetries) throw error;
      const delayMs = error.retryAfter !== undefined ? error.retryAfter * 1000 : backoffMs(attempts.n);
      if (delayMs > this.#maxRetryDelayMs) throw error;
      await this.#wait(error, delayMs, options, attempts);
    }
  }

  /**
   * Waits before retrying after a lost connection, or throws it as a
   * ConnectionError: without an idempotency key the code may have run,
   * and a retry could run it twice.
   */
  async #retryConnection(lost: Error, options: CallOptions, attempts: Attempts): Promise<void> {
    if (options.signal?.aborted) throw options.signal.reason ?? lost;
    const error = new ConnectionError(`scratchrun: ${lost.message}`, { code: "connection", status: 0 }, { cause: lost.cause ?? lost });
    if (!attempts.repeatable || attempts.n >= this.#maxRetries) throw error;
    await this.#wait(error, Math.min(backoffMs(attempts.n), this.#maxRetryDelayMs), options, attempts);
  }

  /** Counts a retry, tells onRetry and waits delayMs (or until aborted). */
  async #wait(error: ScratchRunError, delayMs: number, options: CallOptions, attempts: Attempts): Promise<void> {
    attempts.n++;
    this.#onRetry?.({ attempt: attempts.n, delayMs, error });
    await sleep(delayMs, options.signal);
  }
}

/** The wait before retry n (0-based) when the server said none: 0.5 s, 1 s, 2 s, ... */
function backoffMs(n: number): number {
  return Math.min(500 * 2 ** n, 8000);
}

/** Resolves after ms, or rejects with signal's reason once it aborts. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** An environment variable where there is one (Node), undefined in a browser. */
function envVar(name: string): string | undefined {
  const proc = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  const value = proc?.env?.[name];
  return value === "" ? undefined : value;
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    const cause = err.cause instanceof Error ? `: ${err.cause.message}` : "";
    return err.message + cause;
  }
  return String(err);
}

function isEventStream(resp: Response): boolean {
  return (resp.headers.get("Content-Type") ?? "").toLowerCase().startsWith("text/event-stream");
}

/** Reads a 2xx JSON answer; a body cut off is BodyLost, a body that is not JSON an error. */
async function readJSON<T>(resp: Response): Promise<T> {
  let text: string;
  try {
    text = await resp.text();
  } catch (err) {
    throw new BodyLost(`answer lost: ${describe(err)}`, { cause: err });
  }
  try {
    return JSON.parse(text) as T;
  } catch (err) {
    throw new ScratchRunError(`scratchrun: the answer is not JSON: ${text.slice(0, 200)}`, { code: "bad_answer", status: resp.status }, { cause: err });
  }
}

/** readSSE of the answer's body, a failed read being BodyLost. */
async function* readSSEOrLost(resp: Response): AsyncGenerator<{ id: string; event: string; data: string }> {
  if (resp.body === null) throw new BodyLost("the stream has no body");
  const messages = readSSE(resp.body);
  try {
    for (;;) {
      let next: IteratorResult<{ id: string; event: string; data: string }>;
      try {
        next = await messages.next();
      } catch (err) {
        throw new BodyLost(`stream lost: ${describe(err)}`, { cause: err });
      }
      if (next.done) return;
      yield next.value;
    }
  } finally {
    // A consumer that stops early must close the connection (readSSE's
    // own finally cancels the body), or the run would go on unwatched.
    await messages.return(undefined);
  }
}

/** The event of one SSE message; undefined for a name this client does not know. */
function toEvent<W, R extends Result>(name: string, data: string, replayed: boolean, convert: Convert<W, R>): StreamEvent<R> | undefined {
  switch (name) {
    case "started":
      return { type: "started", elapsedMs: (JSON.parse(data) as WireStarted).elapsed_ms };
    case "stdout":
    case "stderr":
      return { type: name, text: (JSON.parse(data) as WireOutput).text };
    case "result":
      return { type: "result", result: convert(JSON.parse(data) as W, replayed) };
    case "error": {
      const doc = (JSON.parse(data) as WireError).error;
      return { type: "error", error: errorFromDocument(statusOfCode[doc.code] ?? 500, doc) };
    }
  }
  return undefined;
}

/** The result of a streamed answer, read to its end (the run's error thrown). */
async function resultOfStream<W, R extends Result>(resp: Response, replayed: boolean, convert: Convert<W, R>): Promise<R> {
  for await (const msg of readSSEOrLost(resp)) {
    const event = toEvent(msg.event, msg.data, replayed, convert);
    if (event?.type === "result") return event.result;
    if (event?.type === "error") throw event.error;
  }
  throw new BodyLost("the stream ended before the run's result");
}
