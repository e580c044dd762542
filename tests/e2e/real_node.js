// SPDX-License-Identifier: LGPL-2.1-or-later
// real_node: a Node.js HTTP server (node PORT) on 127.0.0.1 with keep-alive,
// a worker thread (worker_threads) counting in a SharedArrayBuffer, and a
// timer counting in the main thread. GET /count answers
// "worker W timer T served S pid P"; the runner checks that W and T keep
// growing across checkpoint --kill and restart, on the same keep-alive
// connection and on new ones.
'use strict';
const http = require('http');
const { Worker } = require('worker_threads');

const shared = new SharedArrayBuffer(8);
const counts = new Int32Array(shared);
const worker = new Worker(`
  const { workerData } = require('worker_threads');
  const c = new Int32Array(workerData);
  setInterval(() => Atomics.add(c, 0, 1), 10);
`, { eval: true, workerData: shared });
worker.on('error', (e) => { console.error('worker: ' + e); process.exit(1); });
let timer = 0, served = 0;
setInterval(() => { timer++; }, 10);

const server = http.createServer({ keepAliveTimeout: 600000 }, (req, res) => {
  served++;
  const body = `worker ${Atomics.load(counts, 0)} timer ${timer} served ${served} ` +
               `pid ${process.pid}\n`;
  res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': body.length });
  res.end(body);
});
server.keepAliveTimeout = 600000;
server.headersTimeout = 0;
server.requestTimeout = 0;
server.listen(Number(process.argv[2]), '127.0.0.1');
process.on('SIGINT', () => process.exit(0));
