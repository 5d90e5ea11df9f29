"""bench/ab: its summary (the median ratio, the sign test, the verdict) on fixed rounds, and one
short live run of two servers side by side. Environment: ICHIDO_BINARY, ICHIDO_LOADGEN."""

import os
import subprocess
import sys
import tempfile
import unittest

import scripts

SCRIPT = scripts.path("ab")
ab = scripts.load("ab")


def rnd(ratio, a_cpu=40.0, b_cpu=40.0, a_p99=8.0, b_p99=8.0):
    return {"ratio": str(ratio), "a_cpu_us": str(a_cpu), "b_cpu_us": str(b_cpu),
            "a_p99_ms": str(a_p99), "b_p99_ms": str(b_p99)}


class JudgeTest(unittest.TestCase):
    def summary(self, rounds):
        return dict(kv.split("=", 1) for line in ab.judge(rounds) for kv in line.split(" ")
                    if "=" in kv)

    def test_the_sign_test_is_the_exact_two_sided_binomial(self):
        self.assertAlmostEqual(ab.sign_test_p(8, 8), 2 / 256)
        self.assertAlmostEqual(ab.sign_test_p(0, 8), 2 / 256)
        self.assertAlmostEqual(ab.sign_test_p(6, 8), 2 * (1 + 8 + 28) / 256)
        self.assertAlmostEqual(ab.sign_test_p(4, 8), 1.0)
        self.assertEqual(ab.sign_test_p(0, 0), 1.0)

    def test_b_ahead_in_every_round_of_eight_is_a_difference_and_the_median_says_how_much(self):
        s = self.summary([rnd(1.01 + i / 100) for i in range(8)])
        self.assertEqual((s["b_ahead"], s["b_behind"], s["sign_test_p"]), ("8", "0", "0.008"))
        self.assertEqual(s["ratio_median"], "1.045")
        self.assertEqual(s["verdict"], "B")  # "B faster (median +4.5 %)"
        self.assertIn("verdict=B faster (median +4.5 %)", ab.judge([rnd(1.01 + i / 100)
                                                                    for i in range(8)]))
        self.assertIn("verdict=B slower (median -4.5 %)", ab.judge([rnd(0.99 - i / 100)
                                                                    for i in range(8)]))

    def test_six_of_eight_is_no_difference_shown_and_ties_count_for_neither_side(self):
        lines = ab.judge([rnd(1.1)] * 6 + [rnd(0.9)] * 2)
        self.assertIn("sign_test_p=0.289", lines[0])
        self.assertEqual(lines[-1], "verdict=no difference shown")
        s = self.summary([rnd(1.1)] * 5 + [rnd(1.0)] * 3)
        self.assertEqual((s["b_ahead"], s["b_behind"], s["sign_test_p"]), ("5", "0", "0.062"))

    def test_cpu_and_p99_are_the_median_ratios_of_the_rounds(self):
        s = self.summary([rnd(1.0, a_cpu=40, b_cpu=36, a_p99=10, b_p99=5),
                          rnd(1.0, a_cpu=40, b_cpu=38, a_p99=10, b_p99=20),
                          rnd(1.0, a_cpu=40, b_cpu=44, a_p99=10, b_p99=9)])
        self.assertEqual(s["cpu_per_request_ratio_median"], "0.950")
        self.assertEqual(s["p99_ratio_median"], "0.900")

    def test_no_round_no_verdict(self):
        self.assertEqual(ab.judge([])[-1], "verdict=none: no round was measured")


class LiveTest(unittest.TestCase):
    def run_ab(self, *extra):
        bench_bin = os.path.dirname(os.environ["ICHIDO_LOADGEN"])
        return subprocess.run(
            [sys.executable, SCRIPT, "--bench-bin", bench_bin, "--connections", "2",
             "--duration", "0.5", "--warmup", "0.3", *extra],
            capture_output=True, text=True, timeout=300)

    def test_one_build_against_itself_measures_every_round_of_both(self):
        binary = os.environ["ICHIDO_BINARY"]
        out = self.run_ab("--a", binary, "--b", binary, "--rounds", "2", "--workload", "lock")
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        rounds = [ab.fields(l) for l in out.stdout.splitlines() if l.startswith("round=")]
        self.assertEqual([(r["round"], r["first"]) for r in rounds], [("1", "a"), ("2", "b")])
        for r in rounds:
            for k in ("a_ops_s", "b_ops_s", "a_p99_ms", "b_p99_ms", "a_cpu_us", "b_cpu_us"):
                self.assertGreater(float(r[k]), 0, r)
            self.assertAlmostEqual(float(r["ratio"]), float(r["b_ops_s"]) / float(r["a_ops_s"]),
                                   places=3)
        self.assertRegex(out.stdout, r"(?m)^rounds=2 b_ahead=\d b_behind=\d sign_test_p=")
        self.assertRegex(out.stdout, r"(?m)^verdict=")

    def test_without_a_build_to_compare_against_it_says_so(self):
        out = self.run_ab("--rounds", "1")
        self.assertEqual(out.returncode, 2)
        self.assertIn("--a is required", out.stderr)

    def test_a_row_with_errors_is_an_error_and_no_verdict(self):
        with tempfile.TemporaryDirectory() as bench_bin:
            loadgen = os.path.join(bench_bin, "ichido-loadgen")
            with open(loadgen, "w") as f:
                f.write("#!/bin/sh\necho system=ichido ops_s=900.0 p99_ms=1.0 errors=3\n")
            os.chmod(loadgen, 0o755)
            binary = os.environ["ICHIDO_BINARY"]
            out = subprocess.run(
                [sys.executable, SCRIPT, "--bench-bin", bench_bin, "--a", binary, "--b", binary,
                 "--rounds", "1", "--duration", "0.5", "--warmup", "0"],
                capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 1, out.stdout)
        self.assertIn("bench/ab: ichido-loadgen saw errors", out.stderr)
        self.assertNotIn("verdict=", out.stdout)

    def test_a_server_that_asks_for_no_token_is_an_error_unless_no_auth(self):
        with tempfile.TemporaryDirectory() as d:
            wrapper = os.path.join(d, "ichido-no-auth")
            with open(wrapper, "w") as f:
                f.write(f'#!/bin/sh\nexec {os.environ["ICHIDO_BINARY"]} "$@" --no-auth\n')
            os.chmod(wrapper, 0o755)
            out = self.run_ab("--a", wrapper, "--b", wrapper, "--rounds", "1")
            self.assertEqual(out.returncode, 1, out.stdout)
            self.assertIn("the server does not ask for a token", out.stderr)
            out = self.run_ab("--a", wrapper, "--b", wrapper, "--rounds", "1", "--no-auth")
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr)

    def test_a_server_that_does_not_start_is_an_error(self):
        out = self.run_ab("--a", "/bin/false", "--rounds", "1")
        self.assertEqual(out.returncode, 1)
        self.assertIn("bench/ab: the server did not start", out.stderr)


if __name__ == "__main__":
    unittest.main()
