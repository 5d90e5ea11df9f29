"""ichido-loadgen against a live ichido: every workload it drives answers without errors, and its
keys have the documented shapes (k-RUNID-CONN-SEQ, or with --keys-in-time-order
k-RUNID-SEQ(12 digits)-CONN), read back from the counter's audit trail, and with --counters N
connection c draws from counter NAME-(c % N) only; and ichido-ok-server, the
HTTP ceiling, serves every connection with one or several threads and stops on SIGTERM.
Environment: ICHIDO_BINARY, ICHIDO_LOADGEN, ICHIDO_OK_SERVER."""

import os
import signal
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "clients", "testing"))

from ichido_testing import Server  # noqa: E402


def run_loadgen(test, url, *args):
    """One second of ichido-loadgen against url: it must exit 0 with answers and no errors."""
    out = subprocess.run(
        [os.environ["ICHIDO_LOADGEN"], "--url", url, "--duration", "1s", "--warmup", "0s", *args],
        capture_output=True, text=True, timeout=120)
    test.assertEqual(out.returncode, 0, out.stderr)
    line = next(l for l in out.stdout.splitlines() if l.startswith("system="))
    fields = dict(f.split("=", 1) for f in line.split())
    test.assertEqual(fields["errors"], "0", line)
    test.assertGreater(int(fields["ok"]), 0, line)


class LoadgenTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server(auth=False).start()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def loadgen(self, *args):
        run_loadgen(self, self.server.url, "--connections", "3", *args)

    def create_counter(self, name):
        status, body = self.server.admin("PUT", f"/v1/ns/bench/counters/{name}", {"start": 0})
        self.assertEqual(status, 201, body)

    def keys_of(self, counter):
        status, body = self.server.admin("GET",
                                         f"/v1/ns/bench/counters/{counter}/issued?limit=1000")
        self.assertEqual(status, 200, body)
        self.assertTrue(body["items"])
        return [i["key"] for i in body["items"]]

    def test_keys_per_connection(self):
        self.create_counter("lanes")
        self.loadgen("--workload", "counter-next", "--name", "lanes", "--run-id", "r1")
        for key in self.keys_of("lanes"):
            self.assertRegex(key, r"^k-r1-[0-2]-[0-9]+$")

    def test_keys_in_time_order(self):
        self.create_counter("timed")
        self.loadgen("--workload", "counter-next", "--name", "timed", "--run-id", "r2",
                     "--keys-in-time-order")
        for key in self.keys_of("timed"):
            self.assertRegex(key, r"^k-r2-[0-9]{12}-[0-2]$")

    def test_a_counter_per_connection(self):
        # --counters 3 with 3 connections: connection c uses spread-c and only it.
        for i in range(3):
            self.create_counter(f"spread-{i}")
        self.loadgen("--workload", "counter-next", "--name", "spread", "--counters", "3",
                     "--run-id", "r3")
        for i in range(3):
            keys = self.keys_of(f"spread-{i}")
            self.assertEqual({k.split("-")[2] for k in keys}, {str(i)}, keys[:3])

    def test_counters_are_refused_where_they_mean_nothing(self):
        for args in (["--counters", "2", "--workload", "once"],
                     ["--counters", "2", "--target", "redis", "--url", "redis://127.0.0.1:1"],
                     ["--counters", "0"]):
            out = subprocess.run([os.environ["ICHIDO_LOADGEN"], *args], capture_output=True,
                                 text=True, timeout=60)
            self.assertEqual(out.returncode, 2, (args, out.stderr))
            self.assertIn("counters", out.stderr, args)

    def test_once_and_lock_workloads(self):
        self.loadgen("--workload", "once", "--keys-in-time-order")
        self.loadgen("--workload", "lock")


class OkServerTest(unittest.TestCase):
    def serve_and_load(self, threads):
        ok = subprocess.Popen(
            [os.environ["ICHIDO_OK_SERVER"], "--listen", "127.0.0.1:0", "--threads", str(threads)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            ready = ok.stdout.readline()
            self.assertRegex(ready, r"^ichido-ok-server listening on 127\.0\.0\.1:[0-9]+$")
            port = ready.strip().rsplit(":", 1)[1]
            # Six connections over the threads in turn: each thread serves two or more of them,
            # and a connection whose thread did not run would time out (an error).
            run_loadgen(self, f"http://127.0.0.1:{port}", "--workload", "get", "--no-verify",
                        "--connections", "6", "--grace", "3s")
            ok.send_signal(signal.SIGTERM)
            _, err = ok.communicate(timeout=10)
            self.assertEqual(ok.returncode, 0, err)
            self.assertIn("stopped", err)
        finally:
            if ok.poll() is None:
                ok.kill()
                ok.wait()

    def test_one_thread(self):
        self.serve_and_load(1)

    def test_three_threads_each_with_its_connections(self):
        self.serve_and_load(3)


if __name__ == "__main__":
    unittest.main()
