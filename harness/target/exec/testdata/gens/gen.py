"""A Snowflake generator in Python for the exec target's tests: stdio
protocol, "time" answered with time.time_ns(). With NOCHECK=1 in the
environment it has no regression check (the negative twin)."""
import os
import sys
import time

EPOCH_MS = 1704067200000
worker = int(os.environ["WORKER_ID"])
check = os.environ.get("NOCHECK") != "1"
last, seq = -1, 0
out = sys.stdout
out.write("ready\n")
out.flush()
for req in sys.stdin:
    req = req.strip()
    if req == "time":
        out.write(f"{time.time_ns()}\n")
        out.flush()
        continue
    lines = []
    for _ in range(int(req)):
        ms = time.time_ns() // 1_000_000 - EPOCH_MS
        if check and ms < last:
            lines.append(f"refused: clock moved backwards by {last - ms} ms")
            break
        if ms == last:
            seq = (seq + 1) & 4095
        else:
            seq = 0
        last = ms
        lines.append(str(ms << 22 | worker << 12 | seq))
    out.write("\n".join(lines) + "\n")
    out.flush()
