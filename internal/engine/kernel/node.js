// ScratchRun session kernel for Node.js. One process serves every call of a
// session: it reads a cell from fd 3 (a u32 little-endian length, then the
// working directory, the program file and the environment, each ended by
// NUL: initproto.PrestartJob's form), runs the file as a vm.Script in this
// process's one context, and answers on fd 4 with a u32 length and
// "exit=N\0". End of file on fd 3 ends the kernel. See kernel.go.
//
// The cell's completion value (its last expression statement) is shown
// with util.inspect, as the REPL shows it, unless it is undefined; a Promise
// is awaited first. Top-level let/const/class persist across cells, but a
// later cell that declares the same name again is a SyntaxError, as with
// separate <script>s of one page (use var, or assign). process.exit ends the
// kernel. SIGINT interrupts the running cell (status 130): synchronous code
// through breakOnSigint, a pending promise through the listener below,
// which also keeps a SIGINT between cells from ending the kernel. Errors a
// cell leaves behind (a timer's throw, an unhandled rejection) are printed
// and fail the cell that is running, if any; the kernel lives on.
//
// Everything is inside one function so that the kernel's names do not
// become global lexical bindings a cell could collide with.
(() => {
  'use strict';
  const fs = require('fs');
  const net = require('net');
  const path = require('path');
  const util = require('util');
  const vm = require('vm');
  const { createRequire } = require('module');

  // Children of a cell do not get the kernel's pipes: child_process (libuv)
  // passes a child only its stdio (the test checks it), so a child cannot
  // hold fd 4 open past the kernel's death or read the next cell from fd 3.
  const replies = 4;
  const requests = 3;

  let first = true;
  let running = null; // the cell now running: {failed, interrupt}
  const queue = [];
  let busy = false;

  // Waits about a millisecond (a pipe's reader is behind).
  const pause = new Int32Array(new SharedArrayBuffer(4));
  function writeAll(fd, buf) {
    for (let off = 0; off < buf.length;) {
      try {
        off += fs.writeSync(fd, buf, off);
      } catch (e) {
        if (e.code !== 'EAGAIN') throw e;
        Atomics.wait(pause, 0, 0, 1);
      }
    }
  }

  // Cells' output goes straight to fds 1 and 2: SIGINT ends a running
  // script wherever it is (breakOnSigint), and one that lands inside a
  // stream's write bookkeeping (a cell printing in a loop, interrupted by
  // its timeout) leaves the stream waiting for a callback that never comes,
  // with every later write, the kernel's wait for the cell's output to be
  // flushed included, queued behind it: the kernel stopped answering
  // (TestNodeInterrupt, about once in 40 runs). A synchronous write can at
  // worst be cut short.
  for (const [stream, fd] of [[process.stdout, 1], [process.stderr, 2]]) {
    stream.write = function write(chunk, encoding, cb) {
      if (typeof encoding === 'function') {
        cb = encoding;
        encoding = undefined;
      }
      const buf = typeof chunk === 'string' ? Buffer.from(chunk, encoding || 'utf8') : Buffer.from(chunk);
      try {
        writeAll(fd, buf);
      } catch (e) {
        if (cb) process.nextTick(cb, e);
        return false;
      }
      if (cb) process.nextTick(cb);
      return true;
    };
  }

  function reply(status) {
    const body = Buffer.from('exit=' + status + '\0');
    const frame = Buffer.alloc(4 + body.length);
    frame.writeUInt32LE(body.length, 0);
    body.copy(frame, 4);
    writeAll(replies, frame);
  }

  // As `node FILE` shows an uncaught error: the stack from the cell's
  // frames on (the vm's and the kernel's are cut), a thrown non-error by
  // its inspection.
  function describe(e) {
    if (e !== null && typeof e === 'object' && typeof e.stack === 'string') {
      const lines = e.stack.split('\n');
      const cut = lines.findIndex((l) => /^\s+at .*(node:vm:|\[eval\])/.test(l));
      return (cut < 0 ? lines : lines.slice(0, cut)).join('\n');
    }
    return 'Uncaught ' + util.inspect(e);
  }

  function report(e) {
    try {
      process.stderr.write(describe(e) + '\n');
    } catch {}
  }

  function leftBehind(e) {
    report(e);
    if (running) running.failed = true;
  }
  process.on('uncaughtException', leftBehind);
  process.on('unhandledRejection', leftBehind);
  process.on('SIGINT', () => {
    if (running && running.interrupt) running.interrupt();
  });

  function interrupted() {
    const e = new Error('Script execution was interrupted by `SIGINT`');
    e.code = 'ERR_SCRIPT_EXECUTION_INTERRUPTED';
    e.stack = 'Error [ERR_SCRIPT_EXECUTION_INTERRUPTED]: ' + e.message;
    return e;
  }

  function flushed(stream) {
    return new Promise((resolve) => {
      try {
        stream.write('', () => resolve());
      } catch {
        resolve();
      }
    });
  }

  async function runCell(dir, file, env) {
    if (first) {
      // Only once: the environment and the working directory are the
      // kernel's state, and what a cell sets must outlive it. Later cells'
      // variables (the request's own) are applied over it.
      for (const k of Object.keys(process.env)) delete process.env[k];
      process.chdir(dir);
      first = false;
    }
    for (const kv of env) {
      const i = kv.indexOf('=');
      if (i > 0) process.env[kv.slice(0, i)] = kv.slice(i + 1);
    }
    process.argv = [process.argv[0], file];
    globalThis.require = createRequire(file);
    globalThis.__filename = file;
    globalThis.__dirname = path.dirname(file);
    const cell = { failed: false, interrupt: null };
    running = cell;
    let status = 0;
    try {
      const source = fs.readFileSync(file, 'utf8');
      let value = new vm.Script(source, { filename: file }).runInThisContext({
        breakOnSigint: true,
        displayErrors: true,
      });
      if (value !== null && (typeof value === 'object' || typeof value === 'function') && typeof value.then === 'function') {
        value = await new Promise((resolve, reject) => {
          cell.interrupt = () => reject(interrupted());
          value.then(resolve, reject);
        });
      }
      if (value !== undefined) process.stdout.write(util.inspect(value) + '\n');
    } catch (e) {
      report(e);
      status = e && e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED' ? 130 : 1;
    }
    cell.interrupt = null;
    await flushed(process.stdout);
    await flushed(process.stderr);
    running = null;
    if (status === 0 && cell.failed) status = 1;
    reply(status);
  }

  async function drain() {
    if (busy) return;
    busy = true;
    while (queue.length > 0) await runCell(...queue.shift());
    busy = false;
  }

  let pending = Buffer.alloc(0);
  const input = new net.Socket({ fd: requests, readable: true, writable: false });
  input.on('data', (chunk) => {
    pending = Buffer.concat([pending, chunk]);
    while (pending.length >= 4) {
      const n = pending.readUInt32LE(0);
      if (pending.length < 4 + n) break;
      const [dir, file, ...env] = pending.subarray(4, 4 + n).toString('utf8').split('\0').slice(0, -1);
      pending = pending.subarray(4 + n);
      queue.push([dir, file, env]);
    }
    drain();
  });
  input.on('end', () => process.exit(0));
  input.on('error', () => process.exit(0));
})();
