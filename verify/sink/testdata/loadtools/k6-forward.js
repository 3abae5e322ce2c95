// k6 script: load an ID service and post every ID it returns to the
// snowchaos verification sink. Documentation only: k6 is AGPL-3.0, so
// snowchaos neither links its Go module nor runs it in CI; run it with
// your own k6 binary:
//
//   snowchaos verify --listen 127.0.0.1:7070 --expect-ids 1 &
//   k6 run -e TARGET_URL=http://127.0.0.1:8080 -e SINK_URL=http://127.0.0.1:7070 k6-forward.js
//
// Each virtual user makes its calls one after another, so its IDs form a
// sequential stream (stream=vu-N): the sink checks that they increase.
// By default a VU posts each ID as it arrives (BATCH=1). With BATCH=N it
// posts every N IDs; k6 has no per-VU end hook, so IDs still buffered when
// the test ends would never reach the sink: use BATCH > 1 only with a
// per-VU iteration count that is a multiple of it (-e ITERATIONS=...).
// teardown() asks the sink to stop; it then prints its verdict and exits
// 0 (clean), 1 (duplicate or order violation) or 2 (bad input, or fewer
// IDs than --expect-ids).

import http from 'k6/http'
import { check } from 'k6'

const TARGET = __ENV.TARGET_URL || 'http://127.0.0.1:8080'
const SINK = __ENV.SINK_URL || 'http://127.0.0.1:7070'
const BATCH = Number(__ENV.BATCH || 1)

export const options = __ENV.ITERATIONS
  ? { scenarios: { ids: { executor: 'per-vu-iterations', vus: Number(__ENV.VUS || 8), iterations: Number(__ENV.ITERATIONS) } } }
  : { vus: Number(__ENV.VUS || 8), duration: __ENV.DURATION || '10s' }

// One buffer per VU: k6 gives each VU its own copy of module state.
let buffered = []

function flush () {
  if (buffered.length === 0) return
  const res = http.post(`${SINK}/v1/ids?stream=vu-${__VU}`, buffered.join('\n') + '\n',
    { headers: { 'Content-Type': 'text/plain' }, tags: { name: 'sink' } })
  check(res, { 'sink accepted the batch': r => r.status === 200 })
  buffered = []
}

export default function () {
  const res = http.get(`${TARGET}/v1/id`, { tags: { name: 'id' } })
  if (res.status === 200) {
    buffered.push(res.body.trim())
  }
  if (buffered.length >= BATCH) flush()
}

// teardown runs once, after every VU is done.
export function teardown () {
  http.post(`${SINK}/v1/stop`)
}
