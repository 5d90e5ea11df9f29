"""examples/*/*.py as processes against a live ichido: receipt numbers for overlapping CSV exports
from two machines at once, and a Maildir handled by three machines at once."""

from __future__ import annotations

import csv
import mailbox
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(REPO, "clients", "testing"))
sys.path.insert(0, os.path.join(REPO, "clients", "python", "src"))

from ichido import Client  # noqa: E402
from ichido_testing import LossyProxy, Server, mail_message_ids  # noqa: E402


class Examples(unittest.TestCase):
    def setUp(self):
        self.server = Server().start()
        self.addCleanup(self.server.stop)
        self.dir = tempfile.mkdtemp(prefix="ichido-examples-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def env(self, ns):
        return dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "src"), ICHIDO_URL=self.server.url,
                    ICHIDO_TOKEN=self.server.token("writer", ns), ICHIDO_NS=ns)

    def test_receipt_numbers_from_two_overlapping_exports_at_once(self):
        self.server.admin("PUT", "/v1/ns/forms/counters/receipts", {"max": 9999, "format": "R-{seq:4}", "require_key": True})
        env = self.env("forms")
        ids = [f"2_AB{i:04d}" for i in range(100)]

        def export(name, part):
            path = os.path.join(self.dir, name)
            with open(path, "w", newline="", encoding="utf-8") as f:
                w = csv.writer(f)
                w.writerow(["response_id", "氏名"])
                for i in part:
                    w.writerow([i, "山田"])
            return path

        script = os.path.join(REPO, "examples", "receipt-numbers", "receipt_numbers.py")
        a, b = export("a.csv", ids[:70]), export("b.csv", ids[30:])
        procs = [subprocess.Popen([sys.executable, script, src, src + ".out"], env=env) for src in (a, b)]
        self.assertEqual([p.wait(timeout=120) for p in procs], [0, 0])

        def read(path):
            with open(path, newline="", encoding="utf-8") as f:
                return {r["response_id"]: r["receipt"] for r in csv.DictReader(f)}

        ra, rb = read(a + ".out"), read(b + ".out")
        for i in ids[30:70]:
            self.assertEqual(ra[i], rb[i], "the overlap got the same numbers on both machines")
        merged = {**ra, **rb}
        self.assertEqual(sorted(merged.values()), [f"R-{n:04d}" for n in range(1, 101)])
        again = subprocess.run([sys.executable, script, a, a + ".again"], env=env, capture_output=True, text=True)
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertEqual(read(a + ".again"), ra, "a re-run gives the same numbers")

    def test_receipt_numbers_follow_the_rows_order(self):
        # With 20 threads by default, the numbers followed the order the calls finished in:
        # the first row, whose first request was lost, got R-0007 or later.
        self.server.admin("PUT", "/v1/ns/forms/counters/receipts", {"max": 9999, "format": "R-{seq:4}", "require_key": True})
        lost = []
        proxy = LossyProxy(self.server.port, lambda req: "drop_request" if req["path"].endswith("/next") and req["body"]["key"] == "form-r0" and not lost and not lost.append(1) else "pass")
        self.addCleanup(proxy.close)
        env = dict(self.env("forms"), ICHIDO_URL=proxy.url)
        path = os.path.join(self.dir, "rows.csv")
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["response_id"])
            for i in range(30):
                w.writerow([f"r{i}"])
        script = os.path.join(REPO, "examples", "receipt-numbers", "receipt_numbers.py")
        run = subprocess.run([sys.executable, script, path, path + ".out"], env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(run.returncode, 0, run.stderr)
        with open(path + ".out", newline="", encoding="utf-8") as f:
            receipts = [r["receipt"] for r in csv.DictReader(f)]
        self.assertEqual(receipts, [f"R-{n:04d}" for n in range(1, 31)])
        self.assertEqual(lost, [1], "the first row's first request was lost")

    def test_mailbox_once_from_three_machines_handles_each_mail_once(self):
        env = self.env("mailbox")
        box = mailbox.Maildir(os.path.join(self.dir, "support"), create=True)
        ids = mail_message_ids(40)
        for n, mid in enumerate(ids):
            # Written as the bytes a mail server stores (UTF-8 headers, RFC 6532), not through
            # EmailMessage, which would parse the Message-ID (and cut it at the first space).
            subject = f"=?utf-8?b?{__import__('base64').b64encode(f'問い合わせ {n}'.encode()).decode()}?="
            box.add(f"Message-ID: {mid}\r\nSubject: {subject}\r\n\r\n本文\r\n".encode("utf-8"))
        ledger = os.path.join(self.dir, "handled.csv")
        script = os.path.join(REPO, "examples", "shared-mailbox", "mailbox_once.py")
        procs = [subprocess.Popen([sys.executable, script, "--maildir", box._path, "--ledger", ledger, "--lease", "5", "--until-done",
                                   "--since", "2000-01-01", "--state", os.path.join(self.dir, f"since-{n}")], env=env)
                 for n in range(3)]
        self.assertEqual([p.wait(timeout=120) for p in procs], [0, 0, 0])
        with open(ledger, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
        self.assertEqual(sorted(r[0] for r in rows), sorted(ids), "each mail handled exactly once")
        self.assertEqual(sorted(r[1] for r in rows), sorted(f"問い合わせ {n}" for n in range(40)))

    def test_mailbox_once_never_handles_an_old_mail_again_and_leaves_the_first_runs_mails_alone(self):
        server = Server(args=["--once-retention", "1s"]).start()
        self.addCleanup(server.stop)
        env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "src"), ICHIDO_URL=server.url,
                   ICHIDO_TOKEN=server.token("writer", "mailbox"), ICHIDO_NS="mailbox")
        box = mailbox.Maildir(os.path.join(self.dir, "old"), create=True)
        old_key = box.add(b"Message-ID: <old@example.jp>\r\nSubject: old\r\n\r\nx\r\n")
        box.add(b"Message-ID: <new@example.jp>\r\nSubject: new\r\n\r\nx\r\n")
        eight_days_ago = time.time() - 8 * 86400
        path = os.path.join(box._path, box._lookup(old_key))
        os.utime(path, (eight_days_ago, eight_days_ago))
        ledger = os.path.join(self.dir, "old.csv")
        script = os.path.join(REPO, "examples", "shared-mailbox", "mailbox_once.py")
        # The old mail was handled 8 days ago; its completed record is purged (1 s here, 30 days by default).
        with Client(server.url, env["ICHIDO_TOKEN"], "mailbox") as c:
            c.once("<old@example.jp>", lambda: {"handled_by": "long ago"})
        deadline = time.monotonic() + 30
        while server.admin("GET", "/v1/ns/mailbox/once?key=%3Cold%40example.jp%3E")[0] != 404:
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.2)
        run = subprocess.run([sys.executable, script, "--maildir", box._path, "--ledger", ledger, "--since", "2000-01-01"],
                             env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(run.returncode, 0, run.stderr)
        with open(ledger, newline="", encoding="utf-8") as f:
            self.assertEqual([r[0] for r in csv.reader(f)], ["<new@example.jp>"])
        # A first run (no state, no --since) leaves the mails already there alone.
        fresh = os.path.join(self.dir, "fresh.csv")
        box.add(b"Message-ID: <already@example.jp>\r\nSubject: a\r\n\r\nx\r\n")
        run = subprocess.run([sys.executable, script, "--maildir", box._path, "--ledger", fresh], env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("first run", run.stderr)
        self.assertFalse(os.path.exists(fresh) and open(fresh, encoding="utf-8").read(), "nothing handled")
        self.assertEqual(mailbox_once().xoauth2("a@example.jp", "T"), b"user=a@example.jp\x01auth=Bearer T\x01\x01")


def mailbox_once():
    import importlib.util

    spec = importlib.util.spec_from_file_location("mailbox_once", os.path.join(REPO, "examples", "shared-mailbox", "mailbox_once.py"))
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


if __name__ == "__main__":
    unittest.main()
