'use strict'
// Drives an ID service with autocannon and forwards every 2xx response
// body to the snowchaos verification sink (snowchaos verify --listen), one
// sequential stream per connection: a connection sends its next request
// only after the previous answer, so its IDs must increase.
//
//   node autocannon-forward.js --target http://127.0.0.1:8080/v1/id \
//     --sink http://127.0.0.1:7070 [--connections 8] [--amount 20000 | --duration 10] \
//     [--tee ids.tsv] [--prefix c]
//
// Forwarding: each connection's bodies queue up and go to the sink as
// POST /v1/ids?stream=<prefix><n>, one request in flight per stream, so
// the sink sees each stream in the order received. --tee also writes every
// ID line as "<stream>\t<line>", for a reference check. On exit it prints
// one JSON line: autocannon's counts and the forwarder's. Exit 1 when the
// sink refused a batch or autocannon saw errors.

const autocannon = require('autocannon')
const http = require('http')
const fs = require('fs')

function parseArgs (argv) {
  const a = { connections: 8, amount: 0, duration: 0, prefix: 'c', tee: '' }
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i].replace(/^--/, '')
    const v = argv[++i]
    if (v === undefined) throw new Error(`--${k} needs a value`)
    if (!(k in a) && k !== 'target' && k !== 'sink') throw new Error(`unknown flag --${k}`)
    a[k] = ['connections', 'amount', 'duration'].includes(k) ? Number(v) : v
  }
  if (!a.target || !a.sink) throw new Error('--target and --sink are required')
  if (!(a.connections >= 1 && a.connections <= 1000)) throw new Error('--connections: want 1..1000')
  if ((a.amount > 0) === (a.duration > 0)) throw new Error('give one of --amount and --duration')
  return a
}

const args = parseArgs(process.argv.slice(2))
const sink = new URL(args.sink)
const agent = new http.Agent({ keepAlive: true, maxSockets: args.connections })
const tee = args.tee ? fs.openSync(args.tee, 'w') : null

const streams = new Map() // label -> { queue: [bodies], busy }
let nextStream = 0
const totals = { forwarded: 0, posts: 0, sinkRefused: 0, sinkErrors: [] }
let finishing = null // resolves when every queue is empty

function lines (body) {
  return body.split('\n').filter(l => l.trim() !== '')
}

function forward (label) {
  const st = streams.get(label)
  if (st.busy || st.queue.length === 0) {
    if (finishing && [...streams.values()].every(s => !s.busy && s.queue.length === 0)) finishing()
    return
  }
  const bodies = st.queue.splice(0)
  const payload = bodies.map(b => b.endsWith('\n') ? b : b + '\n').join('')
  st.busy = true
  const req = http.request({
    agent,
    method: 'POST',
    hostname: sink.hostname,
    port: sink.port,
    path: '/v1/ids?stream=' + encodeURIComponent(label),
    headers: { 'Content-Type': 'text/plain', 'Content-Length': Buffer.byteLength(payload) }
  }, res => {
    let answer = ''
    res.setEncoding('utf8')
    res.on('data', d => { answer += d })
    res.on('end', () => {
      totals.posts++
      if (res.statusCode !== 200) {
        totals.sinkRefused++
        if (totals.sinkErrors.length < 5) totals.sinkErrors.push(`${res.statusCode} ${answer.trim()}`)
      }
      st.busy = false
      forward(label)
    })
  })
  req.on('error', err => {
    totals.sinkRefused++
    if (totals.sinkErrors.length < 5) totals.sinkErrors.push(String(err))
    st.busy = false
    forward(label)
  })
  req.end(payload)
}

// setupClient runs once per connection: label its stream. autocannon
// resets a client's context to its initial one after each pass over the
// request list, so the label goes into that initial context (autocannon
// 9's RequestIterator, pinned by package-lock.json; the tests check that
// there are as many streams as connections).
function setupClient (client) {
  const label = args.prefix + (nextStream++)
  client.requestIterator.initialContext = { stream: label }
  client.requestIterator.resetContext()
}

function onResponse (status, body, context) {
  if (status < 200 || status > 299) return
  const label = context.stream
  if (!streams.has(label)) streams.set(label, { queue: [], busy: false })
  streams.get(label).queue.push(body)
  const ls = lines(body)
  totals.forwarded += ls.length
  if (tee) fs.writeSync(tee, ls.map(l => label + '\t' + l + '\n').join(''))
  forward(label)
}

const target = new URL(args.target)
const opts = {
  url: target.origin,
  connections: args.connections,
  setupClient,
  requests: [{ method: 'GET', path: target.pathname + target.search, onResponse }]
}
if (args.amount > 0) opts.amount = args.amount
else opts.duration = args.duration

autocannon(opts, async (err, result) => {
  if (err) {
    console.error('autocannon:', err)
    process.exit(2)
  }
  await new Promise(resolve => { finishing = resolve; for (const label of streams.keys()) forward(label) })
  if (tee) fs.closeSync(tee)
  agent.destroy()
  const out = {
    requests: result.requests.total,
    ok2xx: result['2xx'],
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    streams: streams.size,
    ...totals
  }
  console.log(JSON.stringify(out))
  process.exit(totals.sinkRefused > 0 || result.errors > 0 ? 1 : 0)
})
