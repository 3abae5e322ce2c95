#!/bin/bash
# A Snowflake generator in bash for the exec target's tests: stdio
# protocol, the time from $EPOCHREALTIME (which libfaketime does not
# reach), no regression check. "time" is answered with $EPOCHREALTIME too.
worker=${WORKER_ID:?}
epoch=1704067200000
last=-1
seq=0
echo ready
while read -r req; do
	if [ "$req" = time ]; then
		echo "$EPOCHREALTIME"
		continue
	fi
	out=""
	for ((i = 0; i < req; i++)); do
		t=${EPOCHREALTIME/./}
		ms=$((t / 1000 - epoch))
		if ((ms == last)); then seq=$((seq + 1)); else seq=0; last=$ms; fi
		out+="$(((ms << 22) | (worker << 12) | seq))"$'\n'
	done
	printf '%s' "$out"
done
