"""bench/rounds: the medians and round-by-round ratios of bench/run's rows (fixed lines)."""

import os
import subprocess
import sys
import tempfile
import unittest

import scripts

SCRIPT = scripts.path("rounds")
rounds = scripts.load("rounds")


def row(system, workload, ops, rnd=None, conc=64, p99=5.0, cpu=30.0):
    line = (f"system={system} workload={workload} conc={conc} ops_s={ops} p99_ms={p99} "
            f"errors=0 cpu_us={cpu}")
    return line if rnd is None else f"{line} round={rnd}"


class SummaryTest(unittest.TestCase):
    def test_ratios_pair_the_rounds_and_their_median_is_not_the_ratio_of_medians(self):
        lines = [row("ichido", "w1", 100, 1), row("redis", "w1", 50, 1),
                 row("ichido", "w1", 90, 2), row("redis", "w1", 100, 2),
                 row("ichido", "w1", 120, 3), row("redis", "w1", 200, 3)]
        out = rounds.summarize(lines)
        self.assertEqual(out[0].split(":")[0], "# medians over 3 rounds (bench/rounds)")
        self.assertIn("# w1 conc 64 ichido: 100 ops/s [90-120], p99 5.00 ms, cpu 30.0 µs, 3 rounds",
                      out)
        self.assertIn("# w1 conc 64 redis: 100 ops/s [50-200], p99 5.00 ms, cpu 30.0 µs, 3 rounds",
                      out)
        # Round by round 2.00, 0.90 and 0.60: the median is 0.90, where the ratio of the two
        # medians (100 / 100) would say 1.00.
        self.assertIn("# w1 conc 64 ichido/redis: median 0.90x [0.60-2.00], ichido ahead in 1 of "
                      "3 rounds", out)

    def test_a_round_one_system_missed_is_left_out_of_the_ratios(self):
        lines = [row("ichido", "w2", 50, 1), row("redis", "w2", 100, 1),
                 row("ichido", "w2", 70, 2),
                 row("ichido", "w2", 80, 3), row("redis", "w2", 100, 3)]
        out = rounds.summarize(lines)
        self.assertIn("# w2 conc 64 ichido/redis: median 0.65x [0.50-0.80], ichido ahead in 0 of "
                      "2 rounds", out)
        self.assertIn("# w2 conc 64 ichido: 70 ops/s [50-80], p99 5.00 ms, cpu 30.0 µs, 3 rounds",
                      out)

    def test_rows_without_a_round_do_not_count_and_each_peer_gets_its_line(self):
        lines = [row("fsync", "fsync-serial-before", 5000, conc=1),
                 row("ok-server", "http-ceiling", 70000),
                 row("ichido", "w3", 40, 1, p99=8.0), row("redis", "w3", 20, 1),
                 row("postgres", "w3", 10, 1), row("etcd", "w3", 80, 1)]
        out = rounds.summarize(lines)
        self.assertFalse(any("fsync" in l or "ok-server" in l for l in out))
        self.assertEqual(rounds.collect([row("ichido", "w3", 40, "x")]), {})
        self.assertIn("# w3 conc 64 ichido/redis: median 2.00x [2.00-2.00], ichido ahead in 1 of 1 "
                      "rounds", out)
        self.assertIn("# w3 conc 64 ichido/postgres: median 4.00x [4.00-4.00], ichido ahead in 1 "
                      "of 1 rounds", out)
        self.assertIn("# w3 conc 64 ichido/etcd: median 0.50x [0.50-0.50], ichido ahead in 0 of 1 "
                      "rounds", out)

    def test_ichido_on_postgresql_is_compared_with_postgresql(self):
        lines = [row("ichido-pg1", "w2", 30, 1, conc=16), row("ichido-pg3", "w2", 45, 1, conc=16),
                 row("postgres", "w2", 10, 1, conc=16)]
        out = rounds.summarize(lines)
        self.assertIn("# w2 conc 16 ichido-pg1/postgres: median 3.00x [3.00-3.00], ichido-pg1 "
                      "ahead in 1 of 1 rounds", out)
        self.assertIn("# w2 conc 16 ichido-pg3/postgres: median 4.50x [4.50-4.50], ichido-pg3 "
                      "ahead in 1 of 1 rounds", out)
        self.assertFalse(any(l.startswith("# w2 conc 16 ichido/") for l in out))

    def test_a_second_build_is_compared_with_ichido_and_with_each_peer(self):
        lines = [row("ichido", "w2", 60, 1), row("ichido-b", "w2", 120, 1),
                 row("redis", "w2", 100, 1), row("ichido", "w2", 50, 2),
                 row("ichido-b", "w2", 90, 2), row("redis", "w2", 100, 2)]
        out = rounds.summarize(lines)
        self.assertIn("# w2 conc 64 ichido/ichido-b: median 0.53x [0.50-0.56], ichido ahead in 0 of "
                      "2 rounds", out)
        self.assertIn("# w2 conc 64 ichido-b/redis: median 1.05x [0.90-1.20], ichido-b ahead in 1 "
                      "of 2 rounds", out)
        self.assertFalse(any("ichido-b/postgres" in l or "redis/" in l for l in out))

    def test_workloads_and_concurrencies_are_kept_apart(self):
        lines = [row("ichido", "w1", 10, 1, conc=1), row("redis", "w1", 20, 1, conc=1),
                 row("ichido", "w1", 30, 1, conc=64), row("redis", "w1", 10, 1, conc=64)]
        out = rounds.summarize(lines)
        self.assertIn("# w1 conc 1 ichido/redis: median 0.50x [0.50-0.50], ichido ahead in 0 of 1 "
                      "rounds", out)
        self.assertIn("# w1 conc 64 ichido/redis: median 3.00x [3.00-3.00], ichido ahead in 1 of "
                      "1 rounds", out)
        # conc 1 before conc 64 (numerically, not as text)
        self.assertLess(out.index("# w1 conc 1 ichido/redis: median 0.50x [0.50-0.50], ichido "
                                  "ahead in 0 of 1 rounds"),
                        out.index("# w1 conc 64 ichido/redis: median 3.00x [3.00-3.00], ichido "
                                  "ahead in 1 of 1 rounds"))

    def test_the_script_reads_a_file_or_its_input_and_says_when_there_is_no_round(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "rows.txt")
            with open(path, "w") as f:
                f.write("\n".join([row("ichido", "w1", 30, 1), row("redis", "w1", 20, 1)]) + "\n")
            done = subprocess.run([sys.executable, SCRIPT, path], capture_output=True, text=True)
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertIn("ichido/redis: median 1.50x", done.stdout)
        done = subprocess.run([sys.executable, SCRIPT], input=row("ichido", "w1", 30) + "\n",
                              capture_output=True, text=True)
        self.assertEqual(done.returncode, 2)
        self.assertEqual(done.stdout.strip(), "# rounds: none (no row carries round=)")


if __name__ == "__main__":
    unittest.main()
