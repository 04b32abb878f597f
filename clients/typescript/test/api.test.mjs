// The client against a real `scratchrun serve` on loopback, with real
// sandboxes: every case of issue 27's list for the TypeScript client.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

// By the package's own name: its exports map is what a user imports.
import { BadRequestError, IdempotencyConflictError, RefusedError, ScratchRun, ScratchRunError, UnauthorizedError } from "scratchrun";
import { saveFiles } from "scratchrun/node";
import { startServer, usageRuns } from "./server.mjs";

/** @type {import("./server.mjs").Server} */
let server;
/** @type {ScratchRun} */
let client;

before(async () => {
  server = await startServer({ ts: [], one: ["--concurrency", "1"], idem: [], stream: [] });
  client = new ScratchRun({ url: server.url, apiKey: server.keys.ts });
});

after(async () => {
  await server?.stop();
});

/** Options of a test that runs sandboxes: bounded, never forever. */
const slow = { timeout: 180_000 };

test("print", slow, async () => {
  const res = await client.run({ runtime: "python3.13", code: 'print("hello from typescript")' });
  assert.equal(res.exitCode, 0, res.stderr);
  assert.equal(res.stdout, "hello from typescript\n");
  assert.equal(res.outcome, "success");
  assert.equal(res.statePurged, true);
  assert.equal(res.replayed, false);
});

test("runtimes lists python3.13", slow, async () => {
  const info = await client.runtimes();
  assert.ok(info.runtimes.some((r) => r.name === "python3.13"), JSON.stringify(info.runtimes));
  assert.ok(info.timeoutMs.min <= info.timeoutMs.default && info.timeoutMs.default <= info.timeoutMs.max);
});

test("a returned PNG comes back as its bytes", slow, async () => {
  const code = [
    "import matplotlib",
    'matplotlib.use("Agg")',
    "import matplotlib.pyplot as plt",
    "plt.plot([1, 2, 3], [1, 4, 9])",
    'plt.savefig("/tmp/plot.png")',
  ].join("\n");
  const res = await client.run({ runtime: "python3.13", code, returnFiles: ["/tmp/plot.png"], timeoutMs: 30_000 });
  assert.equal(res.exitCode, 0, res.stderr);
  const png = res.files["/tmp/plot.png"];
  assert.ok(png instanceof Uint8Array, `files: ${Object.keys(res.files)}`);
  assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

  const dir = await mkdtemp(join(tmpdir(), "scratchrun-ts-save-"));
  try {
    const written = await saveFiles(res, dir);
    assert.deepEqual(written, [join(dir, "plot.png")]);
    assert.deepEqual(new Uint8Array(await readFile(join(dir, "plot.png"))), png);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("binary input files arrive exactly", slow, async () => {
  const bytes = new Uint8Array(1000);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7 + 3) % 256;
  const code = 'import hashlib\nd = open("/tmp/in.bin", "rb").read()\nprint(len(d), hashlib.sha256(d).hexdigest())\nprint(open("/tmp/in.txt").read())';
  const res = await client.run({
    runtime: "python3.13",
    code,
    files: { "/tmp/in.bin": bytes, "/tmp/in.txt": "text é" },
    returnFiles: ["/tmp/in.bin"],
  });
  assert.equal(res.exitCode, 0, res.stderr);
  assert.equal(res.stdout, `1000 ${createHash("sha256").update(bytes).digest("hex")}\ntext é\n`);
  assert.deepEqual(res.files["/tmp/in.bin"], bytes);
});

test("the timeout kills with 124", slow, async () => {
  const res = await client.run({ runtime: "bash", code: "sleep 30", timeoutMs: 1000 });
  assert.equal(res.exitCode, 124);
  assert.equal(res.outcome, "timeout");
  assert.equal(res.facts.timed_out, true);
});

test("the memory limit kills with 137", slow, async () => {
  const code = "chunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))\n";
  const res = await client.run({ runtime: "python3.13", code, memoryMb: 64 });
  assert.equal(res.exitCode, 137, res.stderr);
  assert.equal(res.outcome, "memory_limit");
  assert.equal(res.facts.memory_limit_hit, true);
});

test("an invalid field is a BadRequestError naming it", slow, async () => {
  await assert.rejects(client.run({ runtime: "bash", code: "true", timeoutMs: 0 }), (err) => {
    assert.ok(err instanceof BadRequestError, String(err));
    assert.equal(err.status, 400);
    assert.equal(err.code, "invalid_request");
    assert.equal(err.field, "limits.timeout_ms");
    assert.match(err.message, /limits\.timeout_ms/);
    return true;
  });
});

test("a wrong key is an UnauthorizedError", slow, async () => {
  const stranger = new ScratchRun({ url: server.url, apiKey: "sr_not_a_key" });
  await assert.rejects(stranger.run({ runtime: "bash", code: "echo never" }), (err) => {
    assert.ok(err instanceof UnauthorizedError, String(err));
    assert.equal(err.status, 401);
    assert.equal(err.code, "unauthorized");
    return true;
  });
});

test("a 429 is retried after its Retry-After", slow, async () => {
  // The long call holds the key's one slot from its started event on.
  const holder = new ScratchRun({ url: server.url, apiKey: server.keys.one, maxRetries: 0 });
  const long = holder.stream({ runtime: "bash", code: "sleep 3; echo long", timeoutMs: 10_000 });
  const first = await long.next();
  assert.equal(first.value?.type, "started", JSON.stringify(first.value));

  /** @type {import("scratchrun").RetryInfo[]} */
  const retries = [];
  const patient = new ScratchRun({ url: server.url, apiKey: server.keys.one, maxRetries: 10, onRetry: (r) => retries.push(r) });
  const res = await patient.run({ runtime: "bash", code: "echo after" });
  assert.equal(res.stdout, "after\n");
  assert.ok(retries.length >= 1, "the call was never refused");
  // Every retry waited for the server's Retry-After; at least one was the
  // key's limit (on a loaded machine its admission may refuse a call too,
  // with 429 at_capacity, as the Python client's test allows).
  for (const r of retries) {
    const refused = r.error;
    assert.ok(refused instanceof RefusedError, String(refused));
    assert.equal(refused.status, 429);
    if (refused.code === "concurrency_limited") {
      assert.equal(refused.reason, "key_concurrency");
      assert.equal(refused.limit, 1);
    } else {
      assert.equal(refused.code, "at_capacity", String(refused));
    }
    assert.ok(refused.retryAfter !== undefined && refused.retryAfter >= 1, `retryAfter ${refused.retryAfter}`);
    assert.equal(r.delayMs, refused.retryAfter * 1000, "the wait is the server's Retry-After");
  }
  assert.ok(retries.some((r) => r.error.code === "concurrency_limited"), JSON.stringify(retries.map((r) => r.error.code)));

  let last;
  for await (const ev of long) last = ev;
  assert.ok(last?.type === "result", JSON.stringify(last));
  assert.equal(last.result.stdout, "long\n");
});

test("a stream yields started, the output in order, then the result", slow, async () => {
  const code = "for i in 1 2 3; do echo out$i; echo err$i >&2; done; sleep 3; echo last";
  /** @type {import("scratchrun").StreamEvent[]} */
  const events = [];
  let runningAtFirstOutput = -1;
  for await (const ev of client.stream({ runtime: "bash", code, timeoutMs: 20_000 })) {
    if (ev.type === "stdout" && runningAtFirstOutput < 0) {
      // The output came while the run was still in flight (it sleeps 3 s before its end).
      const admission = (await client.runtimes()).admission;
      runningAtFirstOutput = admission?.running ?? 0;
    }
    events.push(ev);
  }
  assert.equal(events[0]?.type, "started");
  const last = events.at(-1);
  assert.ok(last?.type === "result", JSON.stringify(last));
  assert.equal(last.result.exitCode, 0);
  const text = (/** @type {"stdout" | "stderr"} */ type) => events.map((e) => (e.type === type ? e.text : "")).join("");
  assert.equal(text("stdout"), "out1\nout2\nout3\nlast\n");
  assert.equal(text("stdout"), last.result.stdout);
  assert.equal(text("stderr"), "err1\nerr2\nerr3\n");
  assert.equal(text("stderr"), last.result.stderr);
  assert.ok(runningAtFirstOutput >= 1, "the first output came only after the run had ended");
  assert.equal(events.filter((e) => e.type === "result" || e.type === "started").length, 2);
});

test("a stream's refusal is the same error as a run's", slow, async () => {
  await assert.rejects(
    (async () => {
      for await (const ev of client.stream({ runtime: "bash", code: "true", memoryMb: 1 })) assert.fail(`event ${ev.type}`);
    })(),
    (err) => err instanceof BadRequestError && err.field === "limits.memory_mb",
  );
});

test("an idempotent retry after a dropped connection returns the first run's result; the code ran once", slow, async () => {
  const key = `ts-${Date.now()}-${Math.random()}`;
  const admin = new ScratchRun({ url: server.url, apiKey: server.keys.idem });
  let calls = 0;
  let dropped = false;
  /** @type {typeof fetch} */
  const dropFirst = async (input, init) => {
    calls++;
    if (calls > 1) return fetch(input, init);
    // The first request's connection is cut once its run is admitted, as a
    // network would cut it: not the caller's abort.
    const cut = new AbortController();
    const answer = fetch(input, { ...init, signal: cut.signal });
    answer.catch(() => {});
    for (let i = 0; i < 600; i++) {
      const admission = (await admin.runtimes()).admission;
      if ((admission?.running ?? 0) >= 1) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    cut.abort(new TypeError("connection dropped by the test"));
    dropped = true;
    return answer;
  };
  /** @type {import("scratchrun").RetryInfo[]} */
  const retries = [];
  const flaky = new ScratchRun({ url: server.url, apiKey: server.keys.idem, fetch: dropFirst, onRetry: (r) => retries.push(r) });
  const req = { runtime: "python3.13", code: "import time, uuid\nprint(uuid.uuid4())\ntime.sleep(2)", timeoutMs: 20_000 };

  const first = await flaky.run(req, { idempotencyKey: key });
  assert.ok(dropped);
  assert.equal(retries.length, 1, JSON.stringify(retries.map((r) => String(r.error))));
  assert.equal(retries[0]?.error.code, "connection");
  assert.match(first.stdout, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\n$/);

  const again = await admin.run(req, { idempotencyKey: key });
  assert.equal(again.stdout, first.stdout, "a repeat ran the code again");
  assert.equal(again.replayed, true);

  assert.equal((await usageRuns(server.db, "idem")).length, 1, "usage shows more than one run");

  await assert.rejects(admin.run({ ...req, code: "print(2)" }, { idempotencyKey: key }), (err) => {
    assert.ok(err instanceof IdempotencyConflictError, String(err));
    assert.equal(err.status, 409);
    assert.equal(err.code, "idempotency_key_reused");
    assert.match(err.message, /Idempotency-Key/);
    return true;
  });
});

test("a lost connection without an idempotency key is not retried", slow, async () => {
  let calls = 0;
  /** @type {typeof fetch} */
  const failing = async () => {
    calls++;
    throw new TypeError("fetch failed");
  };
  const c = new ScratchRun({ url: server.url, apiKey: server.keys.ts, fetch: failing });
  await assert.rejects(c.run({ runtime: "bash", code: "true" }), (err) => /** @type {any} */ (err).code === "connection");
  assert.equal(calls, 1);
});

test("a stream cut mid-run resumes with its Idempotency-Key: each event once, the code ran once", slow, async () => {
  const key = `ts-stream-${Date.now()}-${Math.random()}`;
  let calls = 0;
  /** @type {typeof fetch} */
  const cutAfterOutput = async (input, init) => {
    calls++;
    const resp = await fetch(input, init);
    if (calls > 1 || resp.body === null) return resp;
    // The first answer's body breaks once the first stdout event has come
    // through, as a network would break it; its connection is closed.
    const reader = resp.body.getReader();
    let seen = "";
    const body = new ReadableStream({
      async pull(c) {
        const { done, value } = await reader.read();
        if (done) return c.close();
        c.enqueue(value);
        seen += new TextDecoder().decode(value);
        if (/event: stdout\n.*\n\n/.test(seen)) {
          await reader.cancel();
          c.error(new TypeError("connection dropped by the test"));
        }
      },
    });
    return new Response(body, { status: resp.status, headers: resp.headers });
  };
  /** @type {import("scratchrun").RetryInfo[]} */
  const retries = [];
  const c = new ScratchRun({ url: server.url, apiKey: server.keys.stream, fetch: cutAfterOutput, onRetry: (r) => retries.push(r) });
  const code = "import time, uuid\nprint(uuid.uuid4(), flush=True)\ntime.sleep(2)\nprint('done')";
  /** @type {import("scratchrun").StreamEvent[]} */
  const events = [];
  for await (const ev of c.stream({ runtime: "python3.13", code, timeoutMs: 20_000 }, { idempotencyKey: key })) events.push(ev);

  assert.equal(retries.length, 1, JSON.stringify(retries.map((r) => String(r.error))));
  assert.equal(retries[0]?.error.code, "connection");
  assert.deepEqual(events.map((e) => e.type).filter((t) => t !== "stdout"), ["started", "result"]);
  const last = events.at(-1);
  assert.ok(last?.type === "result");
  const stdout = events.map((e) => (e.type === "stdout" ? e.text : "")).join("");
  assert.equal(stdout, last.result.stdout, "an event came twice or was lost");
  assert.match(stdout, /^[0-9a-f-]{36}\ndone\n$/);
  assert.equal((await usageRuns(server.db, "stream")).length, 1, "usage shows more than one run");
});

test("breaking out of a stream closes the connection, which kills the run", slow, async () => {
  const watcher = new ScratchRun({ url: server.url, apiKey: server.keys.ts });
  for await (const ev of client.stream({ runtime: "bash", code: "echo first; sleep 25; echo never", timeoutMs: 30_000 })) {
    if (ev.type === "stdout") break;
  }
  // The server kills the sandbox once it sees the connection close: the
  // run leaves admission long before its 25 s sleep would end.
  let running = -1;
  for (let i = 0; i < 200 && running !== 0; i++) {
    running = (await watcher.runtimes()).admission?.running ?? -1;
    if (running !== 0) await new Promise((r) => setTimeout(r, 50));
  }
  assert.equal(running, 0, "the run went on after the stream was left");
});

test("a body over --max-body is its 413, not a lost connection", slow, async () => {
  const c = new ScratchRun({ url: server.url, apiKey: server.keys.ts, maxRetries: 0 });
  await assert.rejects(c.run({ runtime: "bash", code: "true", files: { "/tmp/big": new Uint8Array(12 << 20) } }), (err) => {
    assert.ok(err instanceof ScratchRunError, String(err));
    assert.deepEqual([err.status, err.code], [413, "body_too_large"], String(err));
    return true;
  });
});
