-- wrk script: forwards every 200 response body to the snowchaos
-- verification sink's standard input, and tees it for a reference check.
--
--   mkfifo ids.fifo
--   snowchaos verify --expect-ids 1 < ids.fifo &
--   SINK_PATH=ids.fifo TEE_PREFIX=/tmp/tee- wrk -t2 -c8 -d5s -s wrk-forward.lua http://127.0.0.1:8080/v1/id
--
-- SINK_PATH is a file or FIFO each thread appends to; every write is one
-- whole body, unbuffered, so bodies under PIPE_BUF (4 KiB) from different
-- threads never interleave in a FIFO. TEE_PREFIX, when set, gets a file
-- per thread with the same bodies. wrk's connections share a thread, so the
-- lines carry no stream: the sink checks duplicates, not per-connection
-- order. done() prints one JSON line with wrk's counts and the bodies
-- written.

local threads = {}

function setup(thread)
   table.insert(threads, thread)
   thread:set("id", #threads)
end

function init(args)
   written = 0
   out = assert(io.open(assert(os.getenv("SINK_PATH"), "SINK_PATH is not set"), "a"))
   out:setvbuf("no")
   local prefix = os.getenv("TEE_PREFIX")
   if prefix and prefix ~= "" then
      tee = assert(io.open(prefix .. id, "w"))
   end
end

function response(status, headers, body)
   if status == 200 then
      out:write(body)
      if tee then
         tee:write(body)
         tee:flush()
      end
      written = written + 1
   end
end

function done(summary, latency, requests)
   local total = 0
   for _, t in ipairs(threads) do
      total = total + t:get("written")
   end
   local e = summary.errors
   io.write(string.format('{"requests":%d,"non2xx":%d,"written":%d,"connect_errors":%d,"read_errors":%d,"write_errors":%d,"timeouts":%d}\n',
      summary.requests, e.status, total, e.connect, e.read, e.write, e.timeout))
end
