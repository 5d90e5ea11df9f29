#!/bin/bash
# The thirty-eighth step's harness (docs/performance.md), kept as it was run: builds alone and alternating, with the batch size from /metrics (the cohort, page-size and command-log rows).
# Expects a built tree at /work/main (its build/bench/ichido-loadgen); BIN may be a wrapper script.
# /tmp/alone3.sh WORKLOAD CONC DUR ROUNDS BIN...: each alone, alternating; adds batch size from /metrics
W=$1; C=$2; DUR=$3; R=$4; shift 4
for r in $(seq $R); do for BIN in "$@"; do
D=$(mktemp -d); PORT=$((7900 + RANDOM % 90))
$BIN serve --listen 127.0.0.1:$PORT --data $D/data --no-auth > $D/out 2>&1 &
SP=$!; sleep 1
/work/main/build/bench/ichido-loadgen --url http://127.0.0.1:$PORT --workload $W --connections $C --duration $DUR --warmup 2s > $D/lg.txt 2>&1
CPU=$(awk '{print $14+$15}' /proc/$SP/stat)
M=$(curl -s http://127.0.0.1:$PORT/metrics | grep -E '^ichido_store_(commits|committed_commands)_total' | awk '{print $2}' | tr '\n' ' ')
kill $SP; wait $SP 2>/dev/null
echo "round=$r bin=$(basename $BIN) $(grep -o 'ops_s=[0-9.]*\|p99_ms=[0-9.]*\|errors=[0-9]*' $D/lg.txt | tr '\n' ' ') cpu_ticks=$CPU batch=$(echo $M | awk '{printf "%.1f", $2/$1}')"
rm -rf $D
done; done
