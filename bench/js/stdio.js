// stdio wrapper: node stdio.js <generator>, worker ID in $WORKER_ID.
// Prints "ready", then answers each request line "N" with N lines: an ID
// each, or "refused: <message>" where the generator throws (which ends
// that answer); and the request "time" with its clock reading (Date.now()),
// the evidence that a clock fault reached it.
'use strict';
const generators = require('./generators');

const name = process.argv[2];
const make = generators[name];
if (!make) {
  process.stderr.write(`unknown generator ${name} (known: ${Object.keys(generators).join(', ')})\n`);
  process.exit(2);
}
const worker = Number.parseInt(process.env.WORKER_ID || '', 10);
if (!(worker >= 0 && worker <= 1023)) {
  process.stderr.write(`WORKER_ID must be 0..1023, found ${process.env.WORKER_ID}\n`);
  process.exit(2);
}
const next = make(worker);
const MAX = 1000000;

let buf = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  buf += chunk;
  let i;
  while ((i = buf.indexOf('\n')) >= 0) {
    const line = buf.slice(0, i).trim();
    buf = buf.slice(i + 1);
    if (line === 'time') {
      process.stdout.write(`${Date.now()}\n`);
      continue;
    }
    const n = Number.parseInt(line, 10);
    if (!(n >= 1 && n <= MAX)) {
      process.stdout.write(`error: request ${JSON.stringify(line)}: want a count 1..${MAX}\n`);
      continue;
    }
    const out = [];
    try {
      for (let k = 0; k < n; k++) out.push(next());
    } catch (e) {
      out.push(`refused: ${String(e && e.message || e).replace(/\n/g, ' ')}`);
    }
    process.stdout.write(out.join('\n') + '\n');
  }
});
process.stdin.on('end', () => process.exit(0));
process.stdout.write('ready\n');
