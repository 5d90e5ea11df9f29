"""bench/paced: its medians over round lines, and one short live run of two builds alternating.
Environment: ICHIDO_BINARY."""

import os
import subprocess
import sys
import unittest

import scripts

SCRIPT = scripts.path("paced")
paced = scripts.load("paced")


class SummaryTest(unittest.TestCase):
    def test_each_system_gets_the_median_of_its_own_rounds(self):
        rows = [paced.fields(l) for l in [
            "round=1 system=a p50_ms=1.0 p90_ms=2.0 p99_ms=3.0 commit_ms=0.5",
            "round=1 system=b p50_ms=9.0 p90_ms=9.0 p99_ms=9.0 commit_ms=9.0",
            "round=2 system=a p50_ms=2.0 p90_ms=2.0 p99_ms=5.0 commit_ms=0.7",
            "round=3 system=a p50_ms=4.0 p90_ms=3.0 p99_ms=4.0 commit_ms=0.6",
        ]]
        self.assertEqual(paced.summary(rows), [
            "system=a rounds=3 p50_ms_median=2.000 p90_ms_median=2.000 p99_ms_median=4.000 "
            "commit_ms_median=0.600",
            "system=b rounds=1 p50_ms_median=9.000 p90_ms_median=9.000 p99_ms_median=9.000 "
            "commit_ms_median=9.000"])

    def test_the_percentile_is_the_nearest_rank(self):
        ms = [float(i) for i in range(1, 101)]
        self.assertEqual(paced.percentile(ms, 0.9), 91.0)
        self.assertEqual(paced.percentile(ms, 0.99), 100.0)
        self.assertEqual(paced.percentile([7.0], 0.99), 7.0)


class LiveTest(unittest.TestCase):
    def test_two_builds_alternate_and_every_request_is_one_commit(self):
        binary = os.environ["ICHIDO_BINARY"]
        out = subprocess.run(
            [sys.executable, SCRIPT, "--requests", "6", "--gap", "5", "--rounds", "2",
             "--server", binary, "--b", binary],
            capture_output=True, text=True, timeout=300)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        rounds = [paced.fields(l) for l in out.stdout.splitlines() if l.startswith("round=")]
        self.assertEqual([(r["round"], r["system"]) for r in rounds],
                         [("1", "a"), ("1", "b"), ("2", "b"), ("2", "a")])
        for r in rounds:
            self.assertEqual(r["commits"], "6", r)
            for k in ("p50_ms", "p90_ms", "p99_ms", "commit_ms"):
                self.assertGreater(float(r[k]), 0, r)
            self.assertLessEqual(float(r["p50_ms"]), float(r["p99_ms"]), r)
        self.assertRegex(out.stdout, r"(?m)^system=a rounds=2 p50_ms_median=")
        self.assertRegex(out.stdout, r"(?m)^system=b rounds=2 p50_ms_median=")

    def test_a_bad_argument_is_refused(self):
        out = subprocess.run([sys.executable, SCRIPT, "--requests", "0"],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 2)
        self.assertIn("--requests", out.stderr)


if __name__ == "__main__":
    unittest.main()
