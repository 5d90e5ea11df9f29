"""bench/commits: its reading of a WAL (what SQLite's recovery keeps), the b-tree of each page,
the pages per commit, and one short live run. Environment: ICHIDO_BINARY, ICHIDO_LOADGEN."""

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import unittest

import scripts

SCRIPT = scripts.path("commits")
commits = scripts.load("commits")
from benchlib import fields  # noqa: E402  (on the path once commits is loaded)

FRAME_HEADER = 24


class WalTest(unittest.TestCase):
    """A WAL written by SQLite itself (Python's sqlite3, checkpoints off, connection open)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="test_commits.")
        self.db = os.path.join(self.dir, "t.db")
        self.con = sqlite3.connect(self.db, isolation_level=None)
        self.con.execute("PRAGMA journal_mode=WAL")
        self.con.execute("PRAGMA wal_autocheckpoint=0")
        self.con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT, v TEXT)")
        self.con.execute("CREATE INDEX t_k ON t (k)")
        for i in range(5):
            self.con.execute("INSERT INTO t (k, v) VALUES (?, 'x')", (f"k{i}",))
        self.con.execute("UPDATE t SET v = 'y' WHERE id = 1")  # v has no index
        self.page_size = self.con.execute("PRAGMA page_size").fetchone()[0]

    def tearDown(self):
        self.con.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def wal(self):
        with open(self.db + "-wal", "rb") as f:
            return bytearray(f.read())

    def copy(self):
        d = os.path.join(self.dir, "copy")
        os.makedirs(d, exist_ok=True)
        for suffix in ("", "-wal"):
            shutil.copyfile(self.db + suffix, os.path.join(d, "t.db" + suffix))
        return os.path.join(d, "t.db")

    def test_every_transaction_is_one_commit_with_the_pages_it_changed(self):
        got = commits.read_wal(bytes(self.wal()))
        self.assertEqual(len(got), 8)  # CREATE TABLE, CREATE INDEX, 5 inserts, 1 update
        pages = commits.btree_pages(self.copy())
        names = [{pages[p][0] for p in c if p in pages} for c in got]
        for inserted in names[2:7]:
            self.assertIn("t", inserted)
            self.assertIn("t_k", inserted)
        self.assertIn("t", names[7])
        self.assertNotIn("t_k", names[7])  # the update left the index alone

    def test_a_torn_last_frame_drops_only_the_last_commit(self):
        wal = self.wal()
        self.assertEqual(len(commits.read_wal(bytes(wal[:-100]))), 7)

    def test_a_changed_byte_ends_the_wal_where_its_checksum_fails(self):
        last = self.wal()
        last[-1] ^= 1  # in the last frame's page
        self.assertEqual(len(commits.read_wal(bytes(last))), 7)
        first = self.wal()
        first[32 + FRAME_HEADER + 100] ^= 1  # in the first frame's page
        self.assertEqual(commits.read_wal(bytes(first)), [])
        header = self.wal()
        header[15] ^= 1  # the checkpoint sequence, under the header's checksum
        self.assertEqual(commits.read_wal(bytes(header)), [])

    def test_frames_of_an_older_wal_after_the_newest_are_not_read(self):
        wal = self.wal()
        frame = FRAME_HEADER + self.page_size
        n = (len(wal) - 32) // frame
        last = 32 + (n - 1) * frame
        wal[last + 8] ^= 0xFF  # the last frame's first salt: a frame of an earlier WAL
        self.assertEqual(len(commits.read_wal(bytes(wal))), 7)

    def test_not_a_wal(self):
        self.assertEqual(commits.read_wal(b""), [])
        self.assertEqual(commits.read_wal(b"\0" * 4096), [])


class PagesPerCommitTest(unittest.TestCase):
    def test_distinct_pages_per_commit_by_btree_most_first(self):
        pages = {1: ("a", "leaf"), 2: ("b", "leaf"), 3: ("b", "internal")}
        rows = commits.pages_per_commit([[1, 2, 2], [2, 3, 9]], pages)
        self.assertEqual(rows, [("b", "leaf", 1.0), ("(free)", "-", 0.5), ("a", "leaf", 0.5),
                                ("b", "internal", 0.5)])
        self.assertEqual(commits.pages_per_commit([], pages), [])


class ThreadSharesTest(unittest.TestCase):
    def test_per_cent_of_one_core_busiest_first_idle_threads_left_out(self):
        before = {"ichido-writer": 1.0, "ichido-io-1": 2.0, "ichido-ckpt": 0.5}
        after = {"ichido-writer": 2.5, "ichido-io-1": 2.5, "ichido-ckpt": 0.5, "ichido-log": 0.25,
                 "ichido-read-0": 0.5}
        self.assertEqual(commits.thread_shares(before, after, 2.0),
                         [("ichido-writer", 75.0), ("ichido-io-1", 25.0),
                          ("ichido-read-0", 25.0), ("ichido-log", 12.5)])
        self.assertEqual(commits.thread_shares({}, {}, 1.0), [])


class LiveTest(unittest.TestCase):
    def test_a_short_run_names_the_locks_table(self):
        bench_bin = os.path.dirname(os.environ["ICHIDO_LOADGEN"])
        tmp = tempfile.mkdtemp(prefix="test_commits_live.")
        # A session of its own: a tool that hangs is killed with the server it started.
        proc = subprocess.Popen(
            [sys.executable, SCRIPT, "--binary", os.environ["ICHIDO_BINARY"],
             "--bench-bin", bench_bin, "--workload", "lock", "--connections", "4",
             "--duration", "0.5", "--warmup", "0.3", "--dir", tmp],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            stdout, stderr = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
            shutil.rmtree(tmp, ignore_errors=True)
        self.assertEqual(proc.returncode, 0, stdout + stderr)
        lines = stdout.splitlines()
        f = fields(lines[0])
        self.assertEqual(f["system"], "ichido")
        self.assertGreater(int(f["commits_seen"]), 0)
        self.assertGreater(float(f["frames_per_commit"]), 0)
        self.assertGreater(float(f["batch"]), 0)
        trees = {fields(l)["btree"] for l in lines if l.startswith("btree=")}
        self.assertIn("locks", trees)  # every acquire and release writes the locks table
        # Every write goes through the writer thread, so it used CPU during the load; the
        # thread lines come between the machine line and the b-tree lines.
        threads = {fields(l)["thread"]: float(fields(l)["cpu_pct"])
                   for l in lines if l.startswith("thread=")}
        self.assertGreater(threads.get("ichido-writer", 0.0), 0.0, stdout)
        kinds = [l.split("=", 1)[0] for l in lines[1:]]
        self.assertEqual(kinds, sorted(kinds, key=lambda k: k != "thread"), stdout)


if __name__ == "__main__":
    unittest.main()
