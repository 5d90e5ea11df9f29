"""ichido-loadgen against a live ichido: every workload it drives answers without errors, and its
keys have the documented shapes (k-RUNID-CONN-SEQ, or with --keys-in-time-order
k-RUNID-SEQ(12 digits)-CONN), read back from the counter's audit trail. Environment:
ICHIDO_BINARY, ICHIDO_LOADGEN."""

import json
import os
import re
import subprocess
import tempfile
import time
import unittest
import urllib.request


class LoadgenTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.server = subprocess.Popen(
            [os.environ["ICHIDO_BINARY"], "serve", "--listen", "127.0.0.1:0", "--data",
             cls.tmp.name + "/data", "--no-auth"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        cls.addr = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = cls.server.stdout.readline()
            m = re.search(r"listening on (\S+)$", line.strip())
            if m:
                cls.addr = m.group(1)
                break
        if not cls.addr:
            cls.server.kill()
            raise RuntimeError("ichido did not start")

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()
        cls.server.wait(30)
        cls.tmp.cleanup()

    def call(self, method, path, body=None):
        req = urllib.request.Request(f"http://{self.addr}{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read() or b"{}")

    def loadgen(self, *args):
        out = subprocess.run(
            [os.environ["ICHIDO_LOADGEN"], "--url", f"http://{self.addr}", "--duration", "1s",
             "--warmup", "0s", "--connections", "3", *args],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        line = next(l for l in out.stdout.splitlines() if l.startswith("system="))
        fields = dict(f.split("=", 1) for f in line.split())
        self.assertEqual(fields["errors"], "0", line)
        self.assertGreater(int(fields["ok"]), 0, line)
        return fields

    def keys_of(self, counter):
        items = self.call("GET", f"/v1/ns/bench/counters/{counter}/issued?limit=1000")["items"]
        self.assertTrue(items)
        return [i["key"] for i in items]

    def test_keys_per_connection(self):
        self.call("PUT", "/v1/ns/bench/counters/lanes", {"start": 0})
        self.loadgen("--workload", "counter-next", "--name", "lanes", "--run-id", "r1")
        for key in self.keys_of("lanes"):
            self.assertRegex(key, r"^k-r1-[0-2]-[0-9]+$")

    def test_keys_in_time_order(self):
        self.call("PUT", "/v1/ns/bench/counters/timed", {"start": 0})
        self.loadgen("--workload", "counter-next", "--name", "timed", "--run-id", "r2",
                     "--keys-in-time-order")
        for key in self.keys_of("timed"):
            self.assertRegex(key, r"^k-r2-[0-9]{12}-[0-2]$")

    def test_once_and_lock_workloads(self):
        self.loadgen("--workload", "once", "--keys-in-time-order")
        self.loadgen("--workload", "lock")


if __name__ == "__main__":
    unittest.main()
