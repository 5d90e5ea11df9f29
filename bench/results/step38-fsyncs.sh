#!/bin/bash
# The thirty-eighth step's harness (docs/performance.md), kept as it was run: fdatasync count and time of a server under 64-connection load, with the commands of the same 3 s (the fsync table; RTWRITER=1 puts the writer at real-time priority).
# Expects a built tree at /work/main (its build/bench/ichido-loadgen); BIN may be a wrapper script.
# /tmp/fsc2.sh redis|BIN WORKLOAD: commands per fdatasync and fdatasync time over 3 s of 64-connection load
S=$1; W=$2; D=$(mktemp -d); PORT=$((7900 + RANDOM % 90))
if [ $S = redis ]; then
  redis-server --bind 127.0.0.1 --port $PORT --dir $D --appendonly yes --appendfsync always --save '' > $D/out 2>&1 &
  SP=$!; sleep 1; ARGS="--target redis --url redis://127.0.0.1:$PORT --name hot"
  cnt() { redis-cli -p $PORT info commandstats | grep -E '^cmdstat_(evalsha|eval|fcall|set):' | sed 's/^[^:]*:calls=\([0-9]*\).*/\1/' | awk '{s+=$1} END {print s}'; }
else
  $S serve --listen 127.0.0.1:$PORT --data $D/data --no-auth > $D/out 2>&1 &
  SP=$!; sleep 1; ARGS="--url http://127.0.0.1:$PORT"
  if [ -n "$RTWRITER" ]; then for t in /proc/$SP/task/*; do [ "$(cat $t/comm)" = ichido-writer ] && chrt -f -p 1 $(basename $t); done; fi
  cnt() { curl -s http://127.0.0.1:$PORT/metrics | grep '^ichido_store_committed_commands_total' | awk '{print $2}'; }
fi
/work/main/build/bench/ichido-loadgen $ARGS --workload $W --connections 64 --duration 7s --warmup 1s > $D/lg.txt 2>&1 &
LP=$!; sleep 2
c0=$(cnt); perf trace -s -p $SP -e fdatasync -- sleep 3 > $D/tr.txt 2>&1; c1=$(cnt)
wait $LP; kill $SP; wait $SP 2>/dev/null
n=$(grep -E '^ +fdatasync' $D/tr.txt | awk '{s+=$2} END {print s}')
echo "system=$(basename $S) workload=$W $(grep -o 'ops_s=[0-9.]*' $D/lg.txt) commands=$((c1-c0)) fdatasyncs=$n per_sync=$(( (c1-c0)/n ))"
grep -E '^ +fdatasync|\(' $D/tr.txt | grep -v '^$'
rm -rf $D
