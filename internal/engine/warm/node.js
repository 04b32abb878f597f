// ScratchRun warm start for Node.js. Started in a fresh sandbox before any
// job exists; it waits on fd 3 for one JSON line naming the program, its
// environment and working directory, and runs it as `node FILE` would. It
// never runs anything before that line.
'use strict';
const fs = require('fs');
let line = '';
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
  line += buf.toString('utf8', 0, n);
  if (line.includes('\n')) break;
}
fs.closeSync(3);
const job = JSON.parse(line);
for (const k of Object.keys(process.env)) delete process.env[k];
for (const kv of job.env) {
  const i = kv.indexOf('=');
  if (i > 0) process.env[kv.slice(0, i)] = kv.slice(i + 1);
}
process.chdir(job.dir);
const file = job.argv[job.argv.length - 1];
process.argv = [process.argv[0], file];
require('module').runMain();
