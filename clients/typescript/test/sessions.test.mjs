// Sessions against a real `scratchrun serve --sessions` on loopback, with
// real sandboxes: a session's life, its files, fork, idempotency keys and
// the server's errors as the client's classes.

import assert from "node:assert/strict";
import { createHash, randomUUID } from "node:crypto";
import { after, before, test } from "node:test";

import {
  FileTooLargeError,
  RefusedError,
  ScratchRun,
  SessionEndedError,
  SessionFileNotFoundError,
  SessionLimitError,
  SessionNotFoundError,
} from "scratchrun";
import { startServer } from "./server.mjs";

/** The most sessions a key may have open: the limit's test opens that many. */
const perKey = 2;

/** @type {import("./server.mjs").Server} */
let server;

/**
 * A client with key name's secret.
 * @param {string} name
 * @param {import("scratchrun").ClientOptions} [options]
 */
function client(name, options = {}) {
  return new ScratchRun({ url: server.url, apiKey: server.keys[name], ...options });
}

before(async () => {
  // Each test its own key, so that the key's maximum of open sessions is its own.
  const keys = Object.fromEntries(["life", "get", "other", "files", "fork", "idem", "limit", "stream"].map((k) => [k, []]));
  server = await startServer(keys, { flags: ["--sessions"], env: { SCRATCHRUN_SESSIONS_PER_KEY: String(perKey) } });
});

after(async () => {
  await server?.stop();
});

const slow = { timeout: 180_000 };

test("a session keeps its variables, and a call after close says how it ended", slow, async () => {
  const c = client("life");
  const info = await c.runtimes();
  assert.equal(info.sessions?.perKey, perKey);
  const s = await c.openSession({ runtime: "python3.13", idleTtlMs: 60_000 });
  assert.match(s.id, /^ses_[a-z2-7]{26}$/);
  assert.equal(s.idleTtlMs, 60_000);
  assert.equal(s.interpreter, "python");
  assert.deepEqual((await c.sessions()).map((i) => i.id), [s.id]);

  const first = await c.runInSession(s.id, { code: "x = 41" });
  assert.equal(first.exitCode, 0, first.stderr);
  assert.equal(first.statePurged, false);
  assert.equal(first.session.id, s.id);
  const r = await c.runInSession(s.id, { code: "print(x + 1)" });
  assert.equal(r.stdout, "42\n");
  assert.equal(r.session.interpreter, "kept");
  // Another runtime in the same sandbox sees the Python call's file.
  await c.runInSession(s.id, { code: "open('/tmp/from-python', 'w').write('py')" });
  assert.equal((await c.runInSession(s.id, { runtime: "bash", code: "cat /tmp/from-python" })).stdout, "py");

  // Another key gets what an unknown id gets, on every route.
  const other = client("other");
  for (const call of [
    () => other.runInSession(s.id, { code: "print(x)" }),
    () => other.readSessionFile(s.id, "/tmp/from-python"),
    () => other.forkSession(s.id),
    () => other.closeSession(s.id),
  ]) {
    await assert.rejects(call(), (err) => {
      assert.ok(err instanceof SessionNotFoundError, String(err));
      assert.equal(err.status, 404);
      assert.equal(err.code, "session_not_found");
      return true;
    });
  }

  const end = await c.closeSession(s.id);
  assert.equal(end.reason, "deleted");
  assert.equal(end.statePurged, true);
  assert.deepEqual(await c.sessions(), []);
  await assert.rejects(c.runInSession(s.id, { code: "print(x)" }), (err) => {
    assert.ok(err instanceof SessionEndedError, String(err));
    assert.equal(err.status, 410);
    assert.equal(err.ended?.reason, "deleted");
    return true;
  });
});

test("a session looked up by id: as it is now, another key's 404, 410 once ended", slow, async () => {
  const c = client("get");
  const s = await c.openSession({ runtime: "python3.13", idleTtlMs: 60_000 });
  let closed = false;
  try {
    const found = await c.session(s.id);
    assert.deepEqual(
      [found.id, found.runtime, found.idleTtlMs, found.interpreter, found.state],
      [s.id, "python3.13", 60_000, "python", "idle"],
    );
    assert.ok(found.expiresAt !== "" && found.memoryBytes > 0, JSON.stringify(found));

    await assert.rejects(client("other").session(s.id), (err) => {
      assert.ok(err instanceof SessionNotFoundError, String(err));
      assert.deepEqual([err.status, err.code], [404, "session_not_found"]);
      return true;
    });

    await c.closeSession(s.id);
    closed = true;
    await assert.rejects(c.session(s.id), (err) => {
      assert.ok(err instanceof SessionEndedError, String(err));
      assert.deepEqual([err.status, err.code, err.ended?.reason], [410, "session_ended", "deleted"]);
      return true;
    });
  } finally {
    if (!closed) await c.closeSession(s.id);
  }
});

test("session files are bytes, at paths whose segments need escaping", slow, async () => {
  const c = client("files");
  const s = await c.openSession({ runtime: "python3.13" });
  try {
    const blob = new Uint8Array(256 * 64);
    for (let i = 0; i < blob.length; i++) blob[i] = i % 256;
    const path = "/tmp/dir with space/é#?.bin";
    assert.equal(await c.writeSessionFile(s.id, path, blob), blob.length);
    assert.deepEqual(await c.readSessionFile(s.id, path), blob);
    const r = await c.runInSession(s.id, { code: `import hashlib\nprint(hashlib.sha256(open(${JSON.stringify(path)}, 'rb').read()).hexdigest())` });
    assert.equal(r.stdout, createHash("sha256").update(blob).digest("hex") + "\n", r.stderr);
    await c.writeSessionFile(s.id, "/tmp/text.txt", "grüße");
    assert.equal(new TextDecoder().decode(await c.readSessionFile(s.id, "/tmp/text.txt")), "grüße");

    await assert.rejects(c.readSessionFile(s.id, "/tmp/none"), (err) => {
      assert.ok(err instanceof SessionFileNotFoundError, String(err));
      assert.equal(err.status, 404);
      return true;
    });
    // Over the server's largest file (8 MiB by default): nothing written.
    await assert.rejects(c.writeSessionFile(s.id, "/tmp/big.bin", new Uint8Array(9 << 20)), (err) => {
      assert.ok(err instanceof FileTooLargeError, String(err));
      assert.equal(err.status, 413);
      return true;
    });
    await assert.rejects(c.readSessionFile(s.id, "/tmp/big.bin"), SessionFileNotFoundError);
    await assert.rejects(c.readSessionFile(s.id, "tmp/relative"), TypeError);
  } finally {
    await c.closeSession(s.id);
  }
});

test("a fork copies the session's files, and goes its own way", slow, async () => {
  const c = client("fork");
  const parent = await c.openSession({ runtime: "bash" });
  try {
    await c.writeSessionFile(parent.id, "/tmp/state", "parent");
    const child = await c.forkSession(parent.id);
    try {
      assert.notEqual(child.id, parent.id);
      assert.equal(child.forkedFrom, parent.id);
      assert.equal(new TextDecoder().decode(await c.readSessionFile(child.id, "/tmp/state")), "parent");
      await c.writeSessionFile(child.id, "/tmp/state", "child");
      assert.equal(new TextDecoder().decode(await c.readSessionFile(parent.id, "/tmp/state")), "parent");
    } finally {
      await c.closeSession(child.id);
    }
  } finally {
    await c.closeSession(parent.id);
  }
});

test("idempotency keys on the POSTs: the same open, the same call run once", slow, async () => {
  const c = client("idem");
  const key = randomUUID();
  const s = await c.openSession({ runtime: "python3.13" }, { idempotencyKey: key });
  try {
    assert.equal((await c.openSession({ runtime: "python3.13" }, { idempotencyKey: key })).id, s.id);
    assert.equal((await c.sessions()).length, 1);
    await c.runInSession(s.id, { code: "n = 0" });
    const call = randomUUID();
    const first = await c.runInSession(s.id, { code: "n += 1\nprint(n)" }, { idempotencyKey: call });
    const second = await c.runInSession(s.id, { code: "n += 1\nprint(n)" }, { idempotencyKey: call });
    assert.deepEqual([first.stdout, first.replayed], ["1\n", false]);
    assert.deepEqual([second.stdout, second.replayed], ["1\n", true]);
    assert.equal(second.session.id, s.id);
    assert.equal((await c.runInSession(s.id, { code: "print(n)" })).stdout, "1\n");
  } finally {
    await c.closeSession(s.id);
  }
});

test("the key's maximum of sessions is a SessionLimitError, not retried", slow, async () => {
  /** @type {import("scratchrun").RetryInfo[]} */
  const retries = [];
  const c = client("limit", { maxRetries: 5, onRetry: (r) => retries.push(r) });
  const open = [];
  for (let i = 0; i < perKey; i++) open.push(await c.openSession({ runtime: "bash" }));
  try {
    await assert.rejects(c.openSession({ runtime: "bash" }), (err) => {
      assert.ok(err instanceof SessionLimitError && err instanceof RefusedError, String(err));
      assert.deepEqual([err.status, err.code, err.reason], [429, "session_limit", "key_sessions"]);
      return true;
    });
    assert.deepEqual(retries, []);
  } finally {
    for (const s of open) await c.closeSession(s.id);
  }
  await c.closeSession((await c.openSession({ runtime: "bash" })).id);
});

test("a call in a session streams, its result a SessionResult", slow, async () => {
  const c = client("stream");
  const s = await c.openSession({ runtime: "python3.13" });
  try {
    await c.runInSession(s.id, { code: "greeting = 'hi'" });
    const events = [];
    for await (const ev of c.streamInSession(s.id, { code: "import time\nprint(greeting, flush=True)\ntime.sleep(0.5)\nprint('end')" })) events.push(ev);
    assert.equal(events[0]?.type, "started");
    const last = events.at(-1);
    assert.ok(last?.type === "result", JSON.stringify(last));
    assert.equal(last.result.stdout, "hi\nend\n");
    assert.equal(last.result.session.id, s.id);
    assert.equal(events.map((e) => (e.type === "stdout" ? e.text : "")).join(""), "hi\nend\n");
  } finally {
    await c.closeSession(s.id);
  }
});
