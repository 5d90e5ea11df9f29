"""bench/one-conn: how it judges rounds (which count when the disk changes its speed, the median
ratio, the verdict), and one short live run against a real server and the fsync baseline.
Environment: ICHIDO_BINARY, ICHIDO_LOADGEN (its directory holds ichido-fsync-baseline)."""

import os
import subprocess
import sys
import tempfile
import unittest

import scripts

SCRIPT = scripts.path("one-conn")
one_conn = scripts.load("one-conn")


def rnd(before, after, w1_p50, fsync_mean=0.2, w1_mean=0.5, commit_mean=0.3):
    return {"fsync_p50_before": str(before), "fsync_p50_after": str(after),
            "w1_p50": str(w1_p50), "fsync_mean": str(fsync_mean), "w1_mean": str(w1_mean),
            "commit_mean": str(commit_mean)}


class JudgeTest(unittest.TestCase):
    def summary(self, rounds, tolerance=0.25):
        return dict(kv.split("=", 1) for line in one_conn.judge(rounds, tolerance)
                    for kv in line.split(" ") if "=" in kv and not kv.startswith("target"))

    def test_a_round_during_which_the_disk_changed_its_speed_does_not_count(self):
        s = self.summary([rnd(0.1, 0.1, 0.3), rnd(0.1, 0.4, 0.5), rnd(0.4, 0.4, 1.2)])
        self.assertEqual(s["counted"], "2")
        self.assertEqual(s["ratio_median"], "3.00")  # 0.3/0.1 and 1.2/0.4; the 0.5 round is out

    def test_the_tolerance_is_a_fraction_of_the_smaller_fsync_row(self):
        self.assertEqual(self.summary([rnd(0.2, 0.25, 0.4)])["counted"], "1")   # 25 % apart
        self.assertEqual(self.summary([rnd(0.2, 0.252, 0.4)])["counted"], "0")  # 26 %
        self.assertEqual(self.summary([rnd(0.2, 0.25, 0.4)], tolerance=0.2)["counted"], "0")

    def test_the_ratio_divides_by_the_mean_of_the_two_fsync_rows(self):
        s = self.summary([rnd(0.2, 0.2, 0.36), rnd(0.2, 0.22, 0.399), rnd(0.2, 0.2, 0.9)])
        self.assertEqual(s["ratio_median"], "1.90")  # 1.80, 0.399 / 0.21 = 1.90, 4.50
        self.assertEqual(s["ratio_min"], "1.80")
        self.assertEqual(s["ratio_max"], "4.50")

    def test_the_target_must_hold_on_the_faster_and_on_the_slower_half_of_the_disk(self):
        fast = [rnd(0.1, 0.1, 0.3)]                        # ratio 3.0 on the fast disk
        slow = [rnd(0.5, 0.5, 0.75), rnd(0.5, 0.5, 0.75), rnd(0.5, 0.5, 0.8)]  # 1.5, 1.5, 1.6
        s = self.summary(fast + slow)
        self.assertEqual(s["ratio_median"], "1.55")      # the plain median would pass
        self.assertEqual(s["faster_disk_ratio"], "2.25")  # median of 3.0 and 1.5
        self.assertEqual(s["slower_disk_ratio"], "1.55")
        self.assertEqual(s["fastest_disk_round"], "?")
        self.assertEqual(s["ratio"], "3.00")
        self.assertEqual(s["verdict"], "not")  # "not met"
        s = self.summary([rnd(0.1, 0.1, 0.19), rnd(0.1, 0.1, 0.2)] + slow)
        self.assertEqual(s["faster_disk_ratio"], "1.90")  # 1.9, 2.0 and a slow 1.5
        self.assertEqual(s["verdict"], "met")
        s = self.summary([rnd(0.3, 0.3, 0.6)])  # one round: both halves are that round
        self.assertEqual(s["faster_disk_ratio"], "2.00")
        self.assertEqual(s["slower_disk_ratio"], "2.00")
        self.assertEqual(s["verdict"], "met")

    def test_the_commit_and_the_rest_are_split_from_the_mean_latency(self):
        s = self.summary([rnd(0.2, 0.2, 0.5, fsync_mean=0.25, w1_mean=0.6, commit_mean=0.4)])
        self.assertEqual(s["commit_over_fsync_mean_median"], "1.60")
        self.assertEqual(s["rest_ms_median"], "0.200")

    def test_no_verdict_when_no_round_counts(self):
        lines = one_conn.judge([rnd(0.1, 0.4, 0.5)], 0.25)
        self.assertEqual(lines[0], "rounds=1 counted=0 tolerance=0.25")
        self.assertTrue(lines[-1].startswith("verdict=none"), lines)


class LiveTest(unittest.TestCase):
    def test_a_short_run_measures_every_round_and_judges_them(self):
        bench_bin = os.path.dirname(os.environ["ICHIDO_LOADGEN"])
        out = subprocess.run(
            [sys.executable, SCRIPT, "--rounds", "2", "--duration", "0.5", "--warmup", "0.5",
             "--server", os.environ["ICHIDO_BINARY"], "--bench-bin", bench_bin],
            capture_output=True, text=True, timeout=300)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        rounds = [one_conn.fields(l) for l in out.stdout.splitlines() if l.startswith("round=")]
        self.assertEqual([r["round"] for r in rounds], ["1", "2"])
        for r in rounds:
            for k in ("fsync_p50_before", "fsync_p50_after", "fsync_mean", "w1_p50", "w1_mean",
                      "commit_mean"):
                self.assertGreater(float(r[k]), 0, r)
            # One connection: one commit per request (the rows are closed loops).
            self.assertGreater(int(r["commits"]), 0, r)
            self.assertLess(abs(int(r["commits"]) - float(r["w1_ops_s"]) * 0.5),
                            0.2 * int(r["commits"]) + 2, r)
        # The second round's "before" row is the first round's "after" row.
        self.assertEqual(rounds[1]["fsync_p50_before"], rounds[0]["fsync_p50_after"])
        self.assertIn("rounds=2 ", out.stdout)
        self.assertRegex(out.stdout, r"(?m)^verdict=(met|not met|none)")
        # The judge of the printed lines says the same again.
        log = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"one-conn-{os.getpid()}.txt")
        with open(log, "w") as f:
            f.write(out.stdout)
        try:
            again = subprocess.run([sys.executable, SCRIPT, "--judge", log], capture_output=True,
                                   text=True, timeout=60)
        finally:
            os.unlink(log)
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertIn(again.stdout.strip(), out.stdout)

    def run_with_fake_loadgen(self, script):
        """bench/one-conn against the real server, with an ichido-loadgen that runs `script`."""
        with tempfile.TemporaryDirectory() as bench_bin:
            loadgen = os.path.join(bench_bin, "ichido-loadgen")
            with open(loadgen, "w") as f:
                f.write("#!/bin/sh\n" + script + "\n")
            os.chmod(loadgen, 0o755)
            os.symlink(os.path.join(os.path.dirname(os.environ["ICHIDO_LOADGEN"]),
                                    "ichido-fsync-baseline"),
                       os.path.join(bench_bin, "ichido-fsync-baseline"))
            return subprocess.run(
                [sys.executable, SCRIPT, "--rounds", "1", "--duration", "0.5", "--warmup", "0.5",
                 "--server", os.environ["ICHIDO_BINARY"], "--bench-bin", bench_bin],
                capture_output=True, text=True, timeout=120)

    def test_a_row_with_errors_a_failed_row_or_a_round_with_no_answer_is_an_error(self):
        out = self.run_with_fake_loadgen("echo system=ichido ops_s=900.0 p50_ms=1.0 errors=3")
        self.assertEqual(out.returncode, 1, out.stdout)
        self.assertIn("saw errors", out.stderr)
        out = self.run_with_fake_loadgen("echo cannot connect >&2; exit 2")
        self.assertEqual(out.returncode, 1, out.stdout)
        self.assertIn("ichido-loadgen failed (exit 2): cannot connect", out.stderr)
        out = self.run_with_fake_loadgen("echo system=ichido ops_s=0.0 p50_ms=0 errors=0")
        self.assertEqual(out.returncode, 1, out.stdout)
        self.assertIn("round 1 answered nothing", out.stderr)
        self.assertNotIn("verdict=", out.stdout)

    def test_a_server_that_does_not_start_is_an_error(self):
        out = subprocess.run([sys.executable, SCRIPT, "--rounds", "1", "--server", "/bin/false"],
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 1)
        self.assertIn("did not start", out.stderr)


if __name__ == "__main__":
    unittest.main()
