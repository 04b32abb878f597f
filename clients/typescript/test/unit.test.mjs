// Logic of the client that needs no server: base64, the SSE reader,
// Retry-After, the error classes and the routes of sessions.

import assert from "node:assert/strict";
import { test } from "node:test";

import { decodeBase64, encodeBase64 } from "../dist/base64.js";
import {
  errorFromAnswer,
  FileTooLargeError,
  ForkUnsupportedError,
  parseRetryAfter,
  RefusedError,
  ScratchRunError,
  SessionEndedError,
  SessionFileNotFoundError,
  SessionLimitError,
  SessionLostError,
  SessionNotFoundError,
  WorkerLostError,
} from "../dist/errors.js";
import { filePath, sessionPath, wireSessionCall } from "../dist/sessions.js";
import { readSSE } from "../dist/sse.js";
import { ScratchRun } from "../dist/index.js";

test("base64 round-trips every length and byte", () => {
  for (let n = 0; n < 70; n++) {
    const bytes = new Uint8Array(n);
    for (let i = 0; i < n; i++) bytes[i] = (i * 37 + n) % 256;
    const text = encodeBase64(bytes);
    assert.equal(text, Buffer.from(bytes).toString("base64"));
    assert.deepEqual(decodeBase64(text), bytes);
  }
  assert.throws(() => decodeBase64("ab$d"));
});

/**
 * A body that delivers text in the given chunks, split anywhere (inside a
 * multi-byte character and between "\r" and "\n" too).
 * @param {Uint8Array[]} chunks
 */
function body(chunks) {
  return new ReadableStream({
    start(c) {
      for (const chunk of chunks) c.enqueue(chunk);
      c.close();
    },
  });
}

test("the SSE reader parses events whatever the chunking", async () => {
  const text = ': keep-alive\r\n\r\nid: 1\r\nevent: started\r\ndata: {"elapsed_ms": 5}\r\n\r\nid: 2\nevent: stdout\ndata: {"text": "é\\n"}\n\nid: 3\ndata: a\ndata: b\n\nid: 4\nevent: cut';
  const bytes = new TextEncoder().encode(text);
  const want = [
    { id: "1", event: "started", data: '{"elapsed_ms": 5}' },
    { id: "2", event: "stdout", data: '{"text": "é\\n"}' },
    { id: "3", event: "message", data: "a\nb" },
  ];
  for (let size = 1; size <= bytes.length; size++) {
    const chunks = [];
    for (let i = 0; i < bytes.length; i += size) chunks.push(bytes.subarray(i, i + size));
    const got = [];
    for await (const m of readSSE(body(chunks))) got.push(m);
    assert.deepEqual(got, want, `chunks of ${size}`);
  }
});

test("Retry-After in seconds or as a date", () => {
  assert.equal(parseRetryAfter("7"), 7);
  assert.equal(parseRetryAfter(null), undefined);
  assert.equal(parseRetryAfter("soon"), undefined);
  const now = Date.parse("2026-01-01T00:00:00Z");
  assert.equal(parseRetryAfter("Thu, 01 Jan 2026 00:00:30 GMT", now), 30);
});

test("errors by code and status", () => {
  const refused = errorFromAnswer(429, '{"error":{"code":"rate_limited","message":"m","reason":"key_rate","limit":2}}', 30);
  assert.ok(refused instanceof RefusedError);
  assert.equal(refused.retryAfter, 30);
  assert.equal(refused.limit, 2);
  // A 503 that names no reason ended a run that had begun: no refusal, no retry.
  const draining = errorFromAnswer(503, '{"error":{"code":"draining","message":"m"}}', undefined);
  assert.ok(!(draining instanceof RefusedError) && draining instanceof ScratchRunError);
  assert.ok(errorFromAnswer(503, '{"error":{"code":"draining","message":"m","reason":"draining"}}', 1) instanceof RefusedError);
  assert.ok(errorFromAnswer(502, '{"error":{"code":"worker_lost","message":"m"}}', undefined) instanceof WorkerLostError);
  const proxy = errorFromAnswer(429, "<html>slow down</html>", undefined);
  assert.ok(proxy instanceof RefusedError);
  assert.equal(proxy.code, "at_capacity");
});

/**
 * A fetch that answers each call with the next of answers and counts them.
 * @param {Array<() => Response>} answers
 */
function scripted(answers) {
  const calls = { n: 0 };
  /** @type {typeof fetch} */
  const f = async () => {
    const answer = answers[calls.n++];
    if (answer === undefined) throw new Error("more calls than answers");
    return answer();
  };
  return { f, calls };
}

const refusal = (/** @type {number} */ status, /** @type {string} */ retryAfter, reason = "at_capacity") => () =>
  new Response(JSON.stringify({ error: { code: status === 429 ? "at_capacity" : "draining", message: "m", reason } }), {
    status,
    headers: { "Content-Type": "application/json", "Retry-After": retryAfter },
  });

test("a Retry-After beyond maxRetryDelayMs is thrown, not waited for", { timeout: 10_000 }, async () => {
  const { f, calls } = scripted([refusal(429, "60")]);
  const c = new ScratchRun({ url: "http://127.0.0.1:9", fetch: f, maxRetryDelayMs: 5000 });
  await assert.rejects(c.run({ runtime: "bash", code: "true" }), (err) => err instanceof RefusedError && err.retryAfter === 60);
  assert.equal(calls.n, 1);
});

test("refusals are retried at most maxRetries times", async () => {
  const { f, calls } = scripted([refusal(503, "0", "draining"), refusal(503, "0", "draining"), refusal(503, "0", "draining")]);
  const c = new ScratchRun({ url: "http://127.0.0.1:9", fetch: f, maxRetries: 2 });
  await assert.rejects(c.run({ runtime: "bash", code: "true" }), (err) => err instanceof RefusedError && err.status === 503);
  assert.equal(calls.n, 3);
});

test("a 503 without a reason (a run cut short) is not retried", async () => {
  const cut = () => new Response(JSON.stringify({ error: { code: "draining", message: "the server shut down" } }), { status: 503 });
  const { f, calls } = scripted([cut]);
  const c = new ScratchRun({ url: "http://127.0.0.1:9", fetch: f });
  await assert.rejects(c.run({ runtime: "bash", code: "true" }), (err) => err instanceof ScratchRunError && !(err instanceof RefusedError));
  assert.equal(calls.n, 1);
});

test("session error codes are their classes", () => {
  /** @type {[number, string, Function][]} */
  const cases = [
    [404, "session_not_found", SessionNotFoundError],
    [410, "session_ended", SessionEndedError],
    [502, "session_lost", SessionLostError],
    [429, "session_limit", SessionLimitError],
    [404, "file_not_found", SessionFileNotFoundError],
    [413, "file_too_large", FileTooLargeError],
    [409, "fork_unsupported", ForkUnsupportedError],
  ];
  for (const [status, code, Class] of cases) {
    const err = errorFromAnswer(status, JSON.stringify({ error: { code, message: "m" } }), undefined);
    assert.equal(err.constructor, Class, code);
    assert.deepEqual([err.status, err.code], [status, code]);
  }
  assert.ok(errorFromAnswer(429, '{"error":{"code":"session_limit","message":"m","reason":"key_sessions"}}', undefined) instanceof RefusedError);
  const ended = errorFromAnswer(
    410,
    '{"error":{"code":"session_ended","message":"m","ended":{"reason":"idle_ttl","at":"2026-01-02T03:04:05Z","state_purged":true}}}',
    undefined,
  );
  assert.ok(ended instanceof SessionEndedError);
  assert.deepEqual(ended.ended, { reason: "idle_ttl", at: "2026-01-02T03:04:05Z", statePurged: true });
});

test("session routes escape each segment", () => {
  assert.equal(filePath("ses_a", "/tmp/dir with space/é#?.bin"), "/v1/sessions/ses_a/files/tmp/dir%20with%20space/%C3%A9%23%3F.bin");
  assert.equal(sessionPath("a/b?", "/exec"), "/v1/sessions/a%2Fb%3F/exec");
  assert.throws(() => filePath("ses_a", "tmp/x"), TypeError);
});

test("a call in a session leaves the runtime out unless it names one", () => {
  assert.deepEqual(wireSessionCall({ code: "c", timeoutMs: 500 }), { code: "c", limits: { timeout_ms: 500 } });
  assert.deepEqual(wireSessionCall({ code: "c", runtime: "bash" }), { runtime: "bash", code: "c" });
});
