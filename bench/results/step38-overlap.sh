#!/bin/bash
# The thirty-eighth step's harness (docs/performance.md), kept as it was run: the writer's fdatasyncs split by whether one of the checkpointer's overlapped them.
# Expects a built tree at /work/main (its build/bench/ichido-loadgen); BIN may be a wrapper script.
# /tmp/ovl.sh BIN WORKLOAD: writer fdatasync durations, split by overlap with the checkpointer's
S=$1; W=$2; D=$(mktemp -d); PORT=$((7900 + RANDOM % 90))
$S serve --listen 127.0.0.1:$PORT --data $D/data --no-auth > $D/out 2>&1 &
SP=$!; sleep 1
/work/main/build/bench/ichido-loadgen --url http://127.0.0.1:$PORT --workload $W --connections 64 --duration 7s --warmup 1s > $D/lg.txt 2>&1 &
LP=$!; sleep 2
perf trace -p $SP -e fdatasync -- sleep 3 > $D/tr.txt 2>&1
wait $LP; kill $SP; wait $SP 2>/dev/null
python3 - $D/tr.txt <<'PY'
import re,sys,statistics as st
w=[];c=[]
for line in open(sys.argv[1]):
    m=re.match(r'\s*([\d.]+)\s+\(\s*([\d.]+) ms\):\s+(\S+)/(\d+)\s+fdatasync',line)
    if not m: continue
    t=float(m.group(1)); d=float(m.group(2)); comm=m.group(3)
    (c if 'ckpt' in comm else w).append((t,t+d,d))
def ov(a):
    return any(b[0]<a[1] and a[0]<b[1] for b in c)
o=[x[2] for x in w if ov(x)]; n=[x[2] for x in w if not ov(x)]
print(f"writer fdatasync: {len(w)} mean {st.mean(x[2] for x in w):.3f} ms; overlapping a checkpointer fsync: {len(o)} mean {st.mean(o) if o else 0:.3f} p50 {st.median(o) if o else 0:.3f}; not: {len(n)} mean {st.mean(n) if n else 0:.3f} p50 {st.median(n) if n else 0:.3f}; checkpointer fsyncs {len(c)} mean {st.mean(x[2] for x in c) if c else 0:.3f}")
PY
rm -rf $D
