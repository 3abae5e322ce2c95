// HTTP wrapper: node http.js <generator>, worker ID in $WORKER_ID, port in
// $PORT. GET /ids?count=N answers a JSON array of N IDs as strings, or
// 503 with the message where the generator throws; GET /time answers the
// process's clock reading (Date.now()).
'use strict';
const http = require('http');
const generators = require('./generators');

const make = generators[process.argv[2]];
const worker = Number.parseInt(process.env.WORKER_ID || '', 10);
const port = Number.parseInt(process.env.PORT || '', 10);
if (!make || !(worker >= 0 && worker <= 1023) || !(port > 0 && port < 65536)) {
  process.stderr.write('usage: WORKER_ID=0..1023 PORT=n node http.js <generator>\n');
  process.exit(2);
}
const next = make(worker);
http.createServer((req, res) => {
  const u = new URL(req.url, 'http://localhost');
  if (u.pathname === '/time') {
    res.writeHead(200, { 'content-type': 'text/plain' }).end(`${Date.now()}\n`);
    return;
  }
  const n = Number.parseInt(u.searchParams.get('count') || '1', 10);
  if (u.pathname !== '/ids' || !(n >= 1 && n <= 100000)) {
    res.writeHead(400).end('want GET /ids?count=1..100000\n');
    return;
  }
  const ids = [];
  try {
    for (let k = 0; k < n; k++) ids.push(next());
  } catch (e) {
    res.writeHead(503, { 'content-type': 'text/plain' }).end(String(e && e.message || e));
    return;
  }
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(ids));
}).listen(port, '127.0.0.1');
