// ScratchRun warm start for Node.js. Started in a fresh sandbox before any
// job exists; it reads the job from fd 3 to end of file (working directory,
// program file, environment; each ended by NUL: see initproto.PrestartJob) and
// runs the program as `node FILE` would. It never runs anything of a
// caller's before that.
'use strict';
const fs = require('fs');
const chunks = [];
const buf = Buffer.alloc(65536);
for (;;) {
  let n;
  try {
    n = fs.readSync(3, buf, 0, buf.length, null);
  } catch (e) {
    if (e.code === 'EAGAIN') continue;
    throw e;
  }
  if (n === 0) break;
  chunks.push(Buffer.from(buf.subarray(0, n)));
}
fs.closeSync(3);
const [dir, file, ...env] = Buffer.concat(chunks).toString('utf8').split('\0').slice(0, -1);
for (const k of Object.keys(process.env)) delete process.env[k];
for (const kv of env) {
  const i = kv.indexOf('=');
  if (i > 0) process.env[kv.slice(0, i)] = kv.slice(i + 1);
}
process.chdir(dir);
process.argv = [process.argv[0], file];
require('module').runMain();
