// A Snowflake generator in Node.js for the exec target's tests that breaks
// the protocol on purpose: node twist.js <mode>, worker ID in $WORKER_ID.
//   garbage  every fifth answer has one line that is not an ID
//   extra    every answer has one line more than asked for (N+1)
//   http     the HTTP protocol on $PORT (GET /ids?count=N, JSON array),
//            every fifth answer with one element that is not an ID
// It answers "time" (stdio) or /time (http) with Date.now(); its IDs are
// otherwise correct (41/10/12 from 2024-01-01, refused on a rewind).
'use strict';
const http = require('http');
const mode = process.argv[2];
const worker = Number.parseInt(process.env.WORKER_ID, 10);
const EPOCH = 1704067200000;
let last = -1;
let seq = 0;
let answers = 0;
function next() {
  let ms = Date.now() - EPOCH;
  if (ms < last) throw new Error(`clock moved backwards by ${last - ms} ms`);
  if (ms === last) {
    seq = (seq + 1) & 4095;
    if (seq === 0) while ((ms = Date.now() - EPOCH) <= last);
  } else seq = 0;
  last = ms;
  return ((BigInt(ms) << 22n) | (BigInt(worker) << 12n) | BigInt(seq)).toString();
}
function answer(n) {
  const ids = [];
  try {
    for (let k = 0; k < n; k++) ids.push(next());
  } catch (e) {
    return { ids, refused: String(e.message) };
  }
  answers++;
  if (mode !== 'extra' && answers % 5 === 0) ids[Math.floor(ids.length / 2)] = 'oops';
  if (mode === 'extra') ids.push(next());
  return { ids };
}
if (mode === 'http') {
  http.createServer((req, res) => {
    const u = new URL(req.url, 'http://localhost');
    if (u.pathname === '/time') return res.end(`${Date.now()}`);
    const a = answer(Number.parseInt(u.searchParams.get('count'), 10));
    if (a.refused) return res.writeHead(503).end(a.refused);
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(a.ids));
  }).listen(Number.parseInt(process.env.PORT, 10), '127.0.0.1');
} else {
  let buf = '';
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (chunk) => {
    buf += chunk;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 1);
      if (line === 'time') { process.stdout.write(`${Date.now()}\n`); continue; }
      const a = answer(Number.parseInt(line, 10));
      const out = a.ids.slice();
      if (a.refused) out.push(`refused: ${a.refused}`);
      process.stdout.write(out.join('\n') + '\n');
    }
  });
  process.stdout.write('ready\n');
}
