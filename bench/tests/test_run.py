"""bench/run against ichido alone, short: with authentication on (the default) every ichido row
sends a token the server checks, and answers without errors; --no-auth is the old variant; a
server that does not ask for a token fails the run instead of being measured; --pin puts the
servers and the load generator on the CPUs it names and says so; --w1-counters spreads W1 over
counters of its own rows.
Environment: ICHIDO_BINARY, ICHIDO_LOADGEN (its directory holds the other bench tools)."""

import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import scripts

SCRIPT = scripts.path("run")


def run(out, *extra, server=None):
    bench_bin = os.path.dirname(os.environ["ICHIDO_LOADGEN"])
    return subprocess.run(
        [SCRIPT, "--no-build", "--no-install", "--systems", "ichido", "--workloads", "w1",
         "--conc", "1", "--duration", "1s", "--warmup", "1s", "--out", out,
         "--server", server or os.environ["ICHIDO_BINARY"], "--bench-bin", bench_bin, *extra],
        capture_output=True, text=True, timeout=240)


def report(out):
    files = glob.glob(os.path.join(out, "*.json"))
    assert len(files) == 1, files
    with open(files[0]) as f:
        return os.path.basename(files[0]), json.load(f)


class RunTest(unittest.TestCase):
    def check_rows(self, data, text, workloads=("w1",)):
        rows = [r for r in data["results"] if r["system"] == "ichido"]
        self.assertEqual([r["workload"] for r in rows], list(workloads), text)
        for row in rows:
            self.assertEqual(row["errors"], 0, text)  # a 401 would be counted here
            self.assertGreater(row["ok"], 0, text)

    def test_auth_is_on_by_default_and_the_rows_send_the_token(self):
        with tempfile.TemporaryDirectory() as out:
            r = run(out)
            text = r.stdout + r.stderr
            self.assertEqual(r.returncode, 0, text)
            self.assertIn("# auth: on", r.stdout)
            self.assertNotIn("errors in", r.stderr)
            name, data = report(out)
            self.assertEqual(data["auth"], "on")
            self.assertNotIn("noauth", name)
            self.check_rows(data, text)

    def test_no_auth_runs_the_old_variant_and_says_so(self):
        with tempfile.TemporaryDirectory() as out:
            r = run(out, "--no-auth")
            text = r.stdout + r.stderr
            self.assertEqual(r.returncode, 0, text)
            self.assertIn("# auth: off", r.stdout)
            name, data = report(out)
            self.assertEqual(data["auth"], "off")
            self.assertIn("noauth", name)
            self.check_rows(data, text)

    def test_pin_puts_the_server_on_its_cpus_and_says_so(self):
        # A wrapper records the CPUs the server was allowed before it becomes the server.
        last = str(os.cpu_count() - 1)
        with tempfile.TemporaryDirectory() as tmp:
            wrapper = os.path.join(tmp, "ichido-cpus")
            cpus = os.path.join(tmp, "cpus")
            with open(wrapper, "w") as f:
                f.write("#!/bin/sh\n"
                        f"grep Cpus_allowed_list /proc/self/status >>{cpus}\n"
                        f'exec {os.environ["ICHIDO_BINARY"]} "$@"\n')
            os.chmod(wrapper, 0o755)
            out = os.path.join(tmp, "out")
            r = run(out, "--pin", f"{last}/0", server=wrapper)
            text = r.stdout + r.stderr
            self.assertEqual(r.returncode, 0, text)
            self.assertIn(f"# pinned: every server process on CPUs {last}", r.stdout)
            with open(cpus) as f:
                self.assertEqual(f.read().split(), ["Cpus_allowed_list:", last])
            name, data = report(out)
            self.assertEqual(data["pin"], f"{last}/0")
            self.assertIn("pinned", name)
            self.check_rows(data, text)
        r = run("/nonexistent", "--pin", "0")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--pin wants SERVER-CPUS/LOADGEN-CPUS", r.stderr)

    def test_w1_counters_spread_the_connections_over_counters(self):
        with tempfile.TemporaryDirectory() as out:
            r = run(out, "--w1-counters", "1 3", "--conc", "3")
            text = r.stdout + r.stderr
            self.assertEqual(r.returncode, 0, text)
            self.assertNotIn("errors in", r.stderr)
            name, data = report(out)
            self.assertIn("w1x1+3", name)
            self.check_rows(data, text, workloads=["w1", "w1-3-counters"])
        r = run("/nonexistent", "--w1-counters", "0")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--w1-counters wants whole numbers", r.stderr)

    def test_a_server_that_asks_for_no_token_fails_the_run(self):
        # A wrapper that starts ichido with --no-auth (but still writes an admin token file, so
        # that the script gets as far as its check of the server).
        with tempfile.TemporaryDirectory() as tmp:
            wrapper = os.path.join(tmp, "ichido-no-auth")
            with open(wrapper, "w") as f:
                f.write('#!/bin/sh\n'
                        'for a; do [ "$prev" = --data ] && d=$a; prev=$a; done\n'
                        'mkdir -p "$d" && echo ichido_fake >"$d/admin.token" && '
                        'echo ichido_fake >"$d/bench.token"\n'
                        f'exec {os.environ["ICHIDO_BINARY"]} "$@" --no-auth\n')
            os.chmod(wrapper, 0o755)
            out = os.path.join(tmp, "out")
            r = run(out, server=wrapper)
            self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("without a token: authentication is not on", r.stderr)
            self.assertEqual(glob.glob(os.path.join(out, "*.json")), [])
            kept = re.search(r"kept (\S+) for inspection", r.stderr)  # a failed run keeps its files
            if kept:
                shutil.rmtree(kept.group(1), ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
