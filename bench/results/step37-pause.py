"""The thirty-seventh step's diagnostic (docs/performance.md): what a request after a pause costs.

    python3 bench/results/step37-pause.py BINARY GAP_MS

Starts BINARY on 127.0.0.1:7877 with a fresh data directory under /work, then 100 times, each
after a pause of GAP_MS: GET /healthz (no disk), a 4 KiB pwrite + fdatasync from this process
(no server), and a W1 `next`; then the same 100 times with no pause. Prints p50 and p90 of each.
"""
import http.client, json, os, statistics, subprocess, sys, tempfile, time
b = sys.argv[1]; gap = float(sys.argv[2]) / 1000
d = tempfile.mkdtemp(dir="/work")
p = subprocess.Popen([b, "serve", "--listen", "127.0.0.1:7877", "--data", d + "/data", "--no-auth"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(1)
c = http.client.HTTPConnection("127.0.0.1", 7877)
def req(m, path, body=None):
    t = time.perf_counter(); c.request(m, path, body=body, headers={"Content-Type": "application/json"}); r = c.getresponse(); r.read(); return (time.perf_counter() - t) * 1000, r.status
print(req("PUT", "/v1/ns/p/counters/c", json.dumps({"format": "R-{seq:4}"})))
fd = os.open(d + "/f", os.O_RDWR | os.O_CREAT); os.pwrite(fd, b"\0" * (1 << 20), 0); os.fsync(fd)
out = {"healthz": [], "fsync": [], "next": [], "healthz_tight": [], "fsync_tight": [], "next_tight": []}
for i in range(100):
    time.sleep(gap); out["healthz"].append(req("GET", "/healthz")[0])
    time.sleep(gap); t = time.perf_counter(); os.pwrite(fd, b"x" * 4096, (i % 200) * 4096); os.fdatasync(fd); out["fsync"].append((time.perf_counter() - t) * 1000)
    time.sleep(gap); out["next"].append(req("POST", "/v1/ns/p/counters/c/next", json.dumps({"idempotency_key": "k%d" % i}))[0])
for i in range(100):
    out["healthz_tight"].append(req("GET", "/healthz")[0])
    t = time.perf_counter(); os.pwrite(fd, b"x" * 4096, (i % 200) * 4096); os.fdatasync(fd); out["fsync_tight"].append((time.perf_counter() - t) * 1000)
    out["next_tight"].append(req("POST", "/v1/ns/p/counters/c/next", json.dumps({"idempotency_key": "t%d" % i}))[0])
for k, v in out.items(): print(k, "p50=%.3f p90=%.3f" % (statistics.median(v), sorted(v)[89]))
p.terminate(); p.wait(); subprocess.run(["rm", "-rf", d])
