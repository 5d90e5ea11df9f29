"""The three seed scenarios on the Python client against a live ichido (unittest).

000: 20 concurrent threads (each its own Client) number 200 form responses through a proxy that
     loses answers after the server committed, then re-run; exhaustion at max.
001: an AppSheet row fired 3 times as processes, the first killed (SIGKILL) mid-work.
002: 3 shared-mailbox clients (processes) on 100 mails with <, @, /, +, spaces and Japanese in the
     Message-IDs, one killed while it holds a claim.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "testing"))

from ichido import Client, IchidoError  # noqa: E402
from ichido_testing import LossyProxy, Server, Tethered, flaky_for_keys, mail_message_ids  # noqa: E402


def Worker(script, args, env, on_line=lambda line, w: None):
    """A fixture script as its own (tethered) process."""
    full_env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "src"), **env)
    return Tethered([sys.executable, os.path.join(HERE, "workers", script), *args], full_env, on_line)


class Scenarios(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server().start()
        cls.scratch = tempfile.mkdtemp(prefix="ichido-py-scenarios-")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        import shutil

        shutil.rmtree(cls.scratch, ignore_errors=True)

    def test_seed_000_twenty_threads_number_200_form_responses_with_lost_answers_and_reruns(self):
        ns = "forms"
        status, _ = self.server.admin(
            "PUT", f"/v1/ns/{ns}/counters/receipts", {"max": 200, "format": "R-{seq:4}", "require_key": True}
        )
        self.assertEqual(status, 201)
        token = self.server.token("writer", ns)
        proxy = LossyProxy(self.server.port, flaky_for_keys(random.Random(2026), "/counters/receipts/next"))
        self.addCleanup(proxy.close)
        responses = [f"form-response-{i:03d}" for i in range(1, 201)]
        first = {}
        errors = []

        def execution(e):
            try:
                with Client(proxy.url, token, ns, owner=f"execution-{e}") as client:
                    for key in responses[e::20]:
                        first[key] = client.next_number("receipts", key)
            except Exception as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=execution, args=(e,)) for e in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(sorted(n.value for n in first.values()), list(range(1, 201)), "no duplicate, no gap")
        for n in first.values():
            self.assertEqual(n.formatted, f"R-{n.value:04d}")
        lost = {e["body"]["key"] for e in proxy.dropped("/next")}
        self.assertGreaterEqual(len(lost), 10)
        self.assertEqual({k for k, n in first.items() if n.replayed}, lost, "same number on retry")

        rerun = Client(proxy.url, token, ns, owner="rerun")
        for key in responses[::7]:
            n = rerun.next_number("receipts", key)
            self.assertEqual(n.value, first[key].value)
            self.assertTrue(n.replayed)
        _, counter = self.server.admin("GET", f"/v1/ns/{ns}/counters/receipts")
        self.assertEqual((counter["last_value"], counter["issued_count"]), (200, 200))

        direct = Client(self.server.url, token, ns)
        with self.assertRaises(IchidoError) as cm:
            direct.next_number("receipts", "form-response-201")
        self.assertEqual((cm.exception.code, cm.exception.status), ("counter_exhausted", 409))
        again = direct.next_number("receipts", responses[41])
        self.assertEqual((again.value, again.replayed), (first[responses[41]].value, True))

    def test_seed_001_a_row_fired_three_times_with_a_crashing_worker(self):
        ns = "appsheet"
        status, _ = self.server.admin(
            "PUT", f"/v1/ns/{ns}/counters/invoices", {"format": "INV-{seq:4}", "require_key": True}
        )
        self.assertEqual(status, 201)
        env = {"ICHIDO_URL": self.server.url, "ICHIDO_TOKEN": self.server.token("writer", ns), "ICHIDO_NS": ns}
        ledger = os.path.join(self.scratch, "invoices-sent.txt")
        open(ledger, "w").close()
        crash = {}

        def on_line(line, w):
            msg = json.loads(line)
            if msg.get("working"):
                crash["invoice"] = msg["invoice"]
                crash["at"] = time.monotonic()
                w.kill()

        a = Worker("row_worker.py", ["42", ledger], dict(env, CRASH="1"), on_line)
        a.wait()
        self.assertIn("at", crash, a.err)
        b = Worker("row_worker.py", ["42", ledger], env)
        c = Worker("row_worker.py", ["42", ledger], env)
        self.assertEqual(b.wait(), 0, b.err)
        self.assertEqual(c.wait(), 0, c.err)
        self.assertEqual(b.last()["result"], c.last()["result"], "the duplicate gets the stored result")
        self.assertEqual(b.last()["result"]["invoiceNo"], crash["invoice"], "no invoice number burnt")
        self.assertTrue(b.last()["result"]["invoiceReplayed"])
        self.assertGreaterEqual(time.monotonic() - crash["at"], 1.0, "recovery after the lease")
        with open(ledger, encoding="utf-8") as f:
            self.assertEqual(f.read().splitlines(), [f"{crash['invoice']}\tsent for row 42"])
        record = Client(self.server.url, env["ICHIDO_TOKEN"], ns).get_once("appsheet-row-42")
        self.assertEqual((record["state"], record["attempt"]), ("completed", 2))
        d = Worker("row_worker.py", ["42", ledger], env)
        self.assertEqual(d.wait(), 0)
        self.assertEqual(d.last()["result"], b.last()["result"])
        with open(ledger, encoding="utf-8") as f:
            self.assertEqual(len(f.read().splitlines()), 1)

    def test_seed_002_three_mailbox_clients_on_100_mails_one_killed(self):
        ns = "mailbox"
        env = {"ICHIDO_URL": self.server.url, "ICHIDO_TOKEN": self.server.token("writer", ns), "ICHIDO_NS": ns}
        ids = mail_message_ids(100)
        ids_file = os.path.join(self.scratch, "ids.json")
        with open(ids_file, "w", encoding="utf-8") as f:
            json.dump(ids, f, ensure_ascii=False)
        ledger = os.path.join(self.scratch, "mailbox-ledger.txt")
        open(ledger, "w").close()
        killed = {}

        def on_line(line, w):
            if line.startswith("KILLME "):
                killed["id"] = json.loads(line[7:])
                w.kill()

        workers = [
            Worker("mailbox_worker.py", [name, ids_file, ledger, str(seed)], dict(env, KILL_AT="10" if name == "outlook-B" else "0"), on_line)
            for seed, name in enumerate(["outlook-A", "outlook-B", "outlook-C"], start=7)
        ]
        codes = [w.wait() for w in workers]
        self.assertEqual(codes[0], 0, workers[0].err)
        self.assertEqual(codes[2], 0, workers[2].err)
        self.assertNotEqual(codes[1], 0)
        self.assertIn("id", killed)
        with open(ledger, encoding="utf-8") as f:
            lines = f.read().splitlines()
        processed = [line.split("\t", 1)[1] for line in lines]
        self.assertEqual(len(processed), 100, "each mail processed exactly once")
        self.assertEqual(set(processed), set(ids))
        a, c = workers[0].last()["results"], workers[2].last()["results"]
        for message_id in ids:
            self.assertEqual(a[message_id], c[message_id])
        client = Client(self.server.url, env["ICHIDO_TOKEN"], ns)
        for message_id in ids:
            record = client.get_once(message_id)
            self.assertEqual(record["state"], "completed", message_id)
            self.assertEqual(record["attempt"], 2 if message_id == killed["id"] else 1, message_id)


class FlakyProxyPolicy(unittest.TestCase):
    """The test proxy's own promise, which every seed test's retry count relies on."""

    def test_a_key_fails_at_most_max_per_key_times_even_when_several_clients_send_it(self):
        class Scripted:
            def __init__(self, values):
                self.values = list(values)

            def random(self):
                return self.values.pop(0)

        # Client A fails, B (same key) gets through, A fails, C gets through, then A twice more:
        # counted in a row per key, A saw four failures and gave up after its four attempts.
        policy = flaky_for_keys(Scripted([0.0, 0.99, 0.0, 0.99, 0.0, 0.0]), "/next")
        req = {"method": "POST", "path": "/v1/ns/n/counters/c/next", "body": {"key": "k"}, "n": 0}
        actions = [policy(req) for _ in range(6)]
        self.assertEqual(sum(a != "pass" for a in actions), 2, actions)


if __name__ == "__main__":
    unittest.main()
