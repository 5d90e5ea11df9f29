"""The Python client's calls and retry rules against a live ichido (unittest): locks (exclusion,
renewal, timeout, loss), once (failure and retry, dead, fingerprint, in_progress, a lost complete
answer, an unreachable complete, the expired sweeper list), the retry rule (503/429/timeouts
retried with backoff, 4xx never), request_id replays of lost acquire/begin answers (also through
the `ichido` CLI), errors, HTTPS."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "testing"))

from ichido import Client, IchidoError, LockToken, backoff_base  # noqa: E402
import ichido  # noqa: E402
from ichido_testing import LossyProxy, Server, ichido_binary  # noqa: E402

NS = "py"


def first_only(suffix, action="drop_answer"):
    """A proxy policy: `action` for the first request whose path ends with `suffix`, then pass."""
    done = []

    def policy(req):
        if req["path"].endswith(suffix) and not done:
            done.append(req)
            return action
        return "pass"

    return policy


class Runs:
    """Counts the calls of a once() function."""

    def __init__(self):
        self.count = 0

    def next(self):
        self.count += 1
        return self.count


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server().start()
        cls.writer = cls.server.token("writer", NS)
        cls.scratch = tempfile.mkdtemp(prefix="ichido-py-client-")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.scratch, ignore_errors=True)

    def client(self, url=None, **kw):
        c = Client(url or self.server.url, self.writer, NS, **kw)
        self.addCleanup(c.close)
        return c

    def proxy(self, policy):
        p = LossyProxy(self.server.port, policy)
        self.addCleanup(p.close)
        return p

    # --- locks -------------------------------------------------------------------------------

    def test_lock_excludes_ten_threads_doing_read_modify_write(self):
        path = os.path.join(self.scratch, "counter.txt")
        with open(path, "w") as f:
            f.write("0")
        tokens = []

        def task(i):
            with self.client(owner=f"task-{i}").lock("file-counter", wait=30, lease=5) as token:
                tokens.append(int(token))
                with open(path) as f:
                    v = int(f.read())
                time.sleep(0.02)
                with open(path, "w") as f:
                    f.write(str(v + 1))

        threads = [threading.Thread(target=task, args=(i,)) for i in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with open(path) as f:
            self.assertEqual(f.read(), "10")
        self.assertEqual(sorted(tokens), tokens, "fencing tokens in grant order")
        _, lock = self.server.admin("GET", f"/v1/ns/{NS}/locks/file-counter")
        self.assertFalse(lock["held"])

    def test_lock_renews_in_the_background_and_the_token_is_an_int(self):
        with self.client().lock("long-work", lease=1) as token:
            self.assertIsInstance(token, LockToken)
            self.assertIsInstance(token, int)
            time.sleep(2.6)
            _, lock = self.server.admin("GET", f"/v1/ns/{NS}/locks/long-work?token={int(token)}")
            self.assertTrue(lock["holder"], "still the holder after 2.6 s with a 1 s lease")
            self.assertIsNone(token.lost)
            token.check()

    def test_lock_timeout_names_the_holder(self):
        with self.client(owner="holder-A").lock("busy"):
            with self.assertRaises(IchidoError) as cm:
                with self.client(owner="waiter-B").lock("busy", wait=0.2):
                    self.fail("must not run")
        self.assertEqual(cm.exception.code, "lock_timeout")
        self.assertEqual(cm.exception.details["holder"]["owner"], "holder-A")

    def test_a_lost_lease_raises_lock_lost_when_the_block_ends(self):
        with self.assertRaises(IchidoError) as cm:
            with self.client().lock("stolen", lease=1) as token:
                self.server.admin("POST", f"/v1/ns/{NS}/locks/stolen/force-release", {})
                deadline = time.monotonic() + 5
                while token.lost is None and time.monotonic() < deadline:
                    time.sleep(0.05)
                self.assertIsNotNone(token.lost)
                with self.assertRaises(IchidoError):
                    token.check()
        self.assertEqual(cm.exception.code, "lock_lost")

    def test_an_exception_in_the_block_releases_the_lock_and_propagates(self):
        with self.assertRaises(ZeroDivisionError):
            with self.client().lock("boom"):
                1 / 0
        _, lock = self.server.admin("GET", f"/v1/ns/{NS}/locks/boom")
        self.assertFalse(lock["held"])

    # --- once --------------------------------------------------------------------------------

    def test_once_fails_on_exception_and_runs_again_next_time(self):
        proxy = self.proxy(lambda req: "pass")
        c = self.client(proxy.url)

        def boom():
            raise RuntimeError("smtp timeout")

        with self.assertRaises(RuntimeError):
            c.once("flaky-1", boom)
        record = c.get_once("flaky-1")
        self.assertEqual(record["state"], "pending")
        self.assertIn("smtp timeout", record["last_error"])
        self.assertEqual(c.once("flaky-1", lambda ctx: {"attempt": ctx.attempt}), {"attempt": 2})
        self.assertEqual(len(proxy.requests("/once/fail")), 1)
        self.assertEqual(c.once("flaky-1", lambda: "again"), {"attempt": 2}, "the stored result")

    def test_once_dead_fingerprint_and_in_progress(self):
        c = self.client()
        def boom():
            raise RuntimeError("boom")

        with self.assertRaises(RuntimeError):
            c.once("fragile", boom, max_attempts=1)
        with self.assertRaises(IchidoError) as cm:
            c.once("fragile", lambda: 1)
        self.assertEqual((cm.exception.code, cm.exception.details["attempts"]), ("dead", 1))
        c.once("doc-1", lambda: 1, fingerprint="sha256:aaa")
        with self.assertRaises(IchidoError) as cm:
            c.once("doc-1", lambda: 1, fingerprint="sha256:bbb")
        self.assertEqual((cm.exception.code, cm.exception.status), ("fingerprint_mismatch", 422))

        started = threading.Event()
        out = {}

        def slow():
            started.set()
            time.sleep(0.8)
            return "first"

        t = threading.Thread(target=lambda: out.setdefault("a", self.client(owner="A").once("busy-item", slow)))
        t.start()
        started.wait(5)
        with self.assertRaises(IchidoError) as cm:
            self.client(owner="B").once("busy-item", lambda: "second")
        self.assertEqual((cm.exception.code, cm.exception.details["owner"]), ("in_progress", "A"))
        t.join()
        self.assertEqual(out["a"], "first")
        self.assertEqual(self.client().once("busy-item", lambda: "third"), "first")

    def test_a_lost_complete_answer_is_retried_never_failed(self):
        proxy = self.proxy(first_only("/once/complete"))
        c = self.client(proxy.url)
        runs = Runs()
        self.assertEqual(c.once("invoice-7", lambda: {"sent": runs.next()}), {"sent": 1})
        self.assertEqual(runs.count, 1)
        self.assertEqual(len(proxy.requests("/once/complete")), 2)
        self.assertEqual(len(proxy.requests("/once/fail")), 0)
        self.assertEqual(c.get_once("invoice-7")["state"], "completed")

    def test_complete_unreachable_until_the_lease_ends_raises_complete_unconfirmed(self):
        proxy = self.proxy(lambda req: "drop_request" if req["path"].endswith("/once/complete") else "pass")
        c = self.client(proxy.url)
        started = time.monotonic()
        with self.assertRaises(IchidoError) as cm:
            c.once("report-2026-04", lambda: {"rows": 12}, lease=1.5)
        e = cm.exception
        self.assertEqual(e.code, "complete_unconfirmed")
        self.assertEqual((e.details["key"], e.details["result"]), ("report-2026-04", {"rows": 12}))
        self.assertGreaterEqual(time.monotonic() - started, 1.0)
        self.assertGreaterEqual(len(proxy.requests("/once/complete")), 2)
        self.assertEqual(len(proxy.requests("/once/fail")), 0, "fail is never sent for work that succeeded")
        time.sleep(max(0, 1.6 - (time.monotonic() - started)))
        self.assertIn("report-2026-04", [r["key"] for r in self.client().expired(10)])
        self.client().complete(e.details["key"], e.details["token"], e.details["result"])
        record = self.client().get_once("report-2026-04")
        self.assertEqual((record["state"], record["result"]), ("completed", {"rows": 12}))

    # --- the retry rule ------------------------------------------------------------------------

    def test_503_and_429_are_retried_with_backoff_4xx_never(self):
        seen = {"503": 0}

        def policy(req):
            if "/counters/r503/next" in req["path"] and seen["503"] < 2:
                seen["503"] += 1
                return {"status": 503, "body": {"error": {"code": "store_unavailable", "message": "down", "details": {}}}}
            if "/counters/r429/next" in req["path"]:
                return {"status": 429, "headers": {"Retry-After": "1"}, "body": {"error": {"code": "too_many_waiters", "message": "x", "details": {}}}}
            return "pass"

        proxy = self.proxy(policy)
        self.server.admin("PUT", f"/v1/ns/{NS}/counters/r503", {})
        retries = []
        c = self.client(proxy.url, on_retry=retries.append)
        t0 = time.monotonic()
        self.assertEqual(c.next_number("r503", "k").value, 1)
        self.assertEqual(len(retries), 2)
        self.assertTrue(0.25 <= retries[0].delay <= 0.5 and 0.5 <= retries[1].delay <= 1.0, retries)
        self.assertGreaterEqual(time.monotonic() - t0, 0.75)
        retries.clear()
        with self.assertRaises(IchidoError) as cm:
            c.next_number("r429", "k")
        self.assertEqual((cm.exception.code, cm.exception.status), ("too_many_waiters", 429))
        self.assertEqual(len(retries), 3)
        self.assertTrue(all(r.delay >= 1.0 for r in retries), "Retry-After is honoured")
        retries.clear()
        with self.assertRaises(IchidoError) as cm:
            c.next_number("missing", "k")
        self.assertEqual((cm.exception.code, cm.exception.status), ("counter_not_found", 404))
        self.assertEqual(retries, [])
        self.assertEqual(len(proxy.requests("/counters/missing/next")), 1)
        self.assertEqual([backoff_base(n) for n in (0, 1, 2, 3, 4, 10)], [0.5, 1, 2.5, 5, 5, 5])

    def test_a_request_without_an_answer_times_out_and_is_retried(self):
        proxy = self.proxy(first_only("/counters/slow/next", "hang"))
        self.server.admin("PUT", f"/v1/ns/{NS}/counters/slow", {})
        self.assertEqual(self.client(proxy.url, timeout=0.3).next_number("slow", "k").value, 1)

    def test_unreachable_after_the_attempts(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        retries = []
        c = self.client(f"http://127.0.0.1:{port}", max_attempts=3, on_retry=retries.append)
        with self.assertRaises(IchidoError) as cm:
            c.next_number("r", "k")
        self.assertEqual((cm.exception.code, cm.exception.status), ("unreachable", 0))
        self.assertIn("after 3 attempt", cm.exception.message)
        self.assertEqual(len(retries), 2)

    # --- request_id: a claim whose answer was lost -----------------------------------------------

    def test_a_lost_acquire_answer_is_replayed_with_the_same_grant(self):
        proxy = self.proxy(first_only("/locks/replayed/acquire"))
        c = self.client(proxy.url, owner="script-1")
        grant = c.acquire("replayed", wait=2, lease=30)
        self.assertTrue(grant["acquired"])
        self.assertTrue(grant.get("replayed"))
        sent = proxy.requests("/locks/replayed/acquire")
        self.assertEqual(len(sent), 2)
        self.assertEqual(sent[0]["body"]["request_id"], sent[1]["body"]["request_id"])
        c.release("replayed", grant["token"])

    def test_a_lost_begin_answer_still_runs_fn_once(self):
        proxy = self.proxy(first_only("/once/begin"))
        runs = Runs()
        result = self.client(proxy.url).once("lost-begin", lambda ctx: {"runs": runs.next(), "attempt": ctx.attempt})
        self.assertEqual(result, {"runs": 1, "attempt": 1})
        begins = proxy.requests("/once/begin")
        self.assertEqual(len(begins), 2)
        self.assertEqual(begins[0]["body"]["request_id"], begins[1]["body"]["request_id"])

    def test_the_cli_resends_its_request_id_when_an_acquire_answer_is_lost(self):
        proxy = self.proxy(first_only("/acquire"))
        env = dict(os.environ, ICHIDO_TOKEN=self.writer)
        run = subprocess.run(
            [ichido_binary(), "lock", "acquire", "cli-lock", "--url", proxy.url, "--ns", NS, "--wait", "2s", "--owner", "cron"],
            env=env, capture_output=True, text=True, timeout=60,
        )
        self.assertEqual(run.returncode, 0, run.stderr)
        token = run.stdout.strip()
        self.assertTrue(token.isdigit(), run.stdout)
        self.assertIn("(replayed)", run.stderr)
        self.assertIn("retrying in", run.stderr)
        sent = proxy.requests("/locks/cli-lock/acquire")
        self.assertEqual(len(sent), 2)
        self.assertEqual(sent[0]["body"]["request_id"], sent[1]["body"]["request_id"])
        _, lock = self.server.admin("GET", f"/v1/ns/{NS}/locks/cli-lock?token={token}")
        self.assertTrue(lock["holder"])

    def test_the_cli_once_run_survives_a_lost_begin_answer(self):
        proxy = self.proxy(first_only("/once/begin"))
        env = dict(os.environ, ICHIDO_TOKEN=self.writer)
        run = subprocess.run(
            [ichido_binary(), "once", "run", "nightly-export", "--url", proxy.url, "--ns", NS, "--", "echo", "exported"],
            env=env, capture_output=True, text=True, timeout=60,
        )
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(run.stdout, "exported\n")
        record = self.client().get_once("nightly-export")
        self.assertEqual((record["state"], record["attempt"]), ("completed", 1))

    # --- errors and HTTPS -----------------------------------------------------------------------

    def test_errors_carry_code_status_details_and_bad_arguments_fail_early(self):
        c = self.client()
        for bad in (lambda: c.next_number("receipts", ""), lambda: c.next_number("no/slash", "k")):
            with self.assertRaises(IchidoError) as cm:
                bad()
            self.assertEqual(cm.exception.code, "invalid_argument")
        with self.assertRaises(IchidoError) as cm:
            c.once("k", lambda: 1, lease=0.01)
        self.assertEqual((cm.exception.code, cm.exception.status, cm.exception.details.get("field")), ("invalid_request", 400, "lease_ms"))
        reader = Client(self.server.url, self.server.token("reader", NS), NS)
        self.addCleanup(reader.close)
        with self.assertRaises(IchidoError) as cm:
            reader.once("k2", lambda: 1)
        self.assertEqual((cm.exception.code, cm.exception.status), ("forbidden", 403))
        self.assertEqual(str(cm.exception).split(":")[0], "forbidden")
        with self.assertRaises(IchidoError):
            Client("ftp://x")

    def test_https_with_cafile_and_refused_without(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d, True)
        cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
             "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", key, "-out", cert],
            check=True, capture_output=True,
        )
        # On localhost: 127.0.0.1 and ::1, whichever the resolver gives first for the name.
        tls = Server(listen="localhost:0", args=["--tls-cert", cert, "--tls-key", key]).start()
        self.addCleanup(tls.stop)
        c = Client(f"https://localhost:{tls.port}", tls.admin_token, "tls", cafile=cert)
        self.addCleanup(c.close)
        self.assertEqual(c.once("over-tls", lambda: {"ok": True}), {"ok": True})
        untrusted = Client(f"https://localhost:{tls.port}", tls.admin_token, "tls", max_attempts=1)
        with self.assertRaises(IchidoError) as cm:
            untrusted.get_once("over-tls")
        self.assertEqual(cm.exception.code, "unreachable")
        self.assertIn("CERTIFICATE_VERIFY_FAILED", cm.exception.message)



class ErrorsAndDecorator(unittest.TestCase):
    """Error subclasses beside the codes, and the decorator form of once."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server().start()
        cls.writer = cls.server.token("writer", "py-deco")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def client(self):
        c = ichido.Client(self.server.url, self.writer, "py-deco")
        self.addCleanup(c.close)
        return c

    def test_each_common_code_raises_its_subclass_with_the_code_unchanged(self):
        c = self.client()
        with self.assertRaises(ichido.CounterNotFound) as cm:
            c.next_number("nope", "k")
        self.assertIsInstance(cm.exception, ichido.IchidoError)
        self.assertEqual((cm.exception.code, cm.exception.status), ("counter_not_found", 404))
        claim = c.begin("held", lease=30)
        other = ichido.Client(self.server.url, self.writer, "py-deco", owner="other")
        self.addCleanup(other.close)
        with self.assertRaises(ichido.InProgress):
            other.once("held", lambda: 1)
        with self.assertRaises(ichido.StaleToken) as cm:
            c.complete("held", int(claim["token"]) + 1000, None)
        self.assertEqual(cm.exception.code, "stale_token")
        with self.assertRaises(ichido.LockTimeout):
            with c.lock("printer", wait=0):
                with other.lock("printer", wait=0.2):
                    pass
        with self.assertRaises(ichido.InvalidArgument):
            c.next_number("bad/name", "k")
        pairs = {ichido.CounterExhausted: "counter_exhausted", ichido.Dead: "dead", ichido.LockLost: "lock_lost",
                 ichido.CompleteUnconfirmed: "complete_unconfirmed", ichido.Unreachable: "unreachable",
                 ichido.Forbidden: "forbidden", ichido.FingerprintMismatch: "fingerprint_mismatch"}
        for cls, code in pairs.items():
            e = ichido.IchidoError(code, "m")
            self.assertIs(type(e), cls)
            self.assertEqual(e.code, code)
        self.assertIs(type(ichido.IchidoError("something_new", "m")), ichido.IchidoError)

    def test_the_decorator_runs_each_key_once_and_returns_the_stored_result(self):
        c = self.client()
        calls = []

        @c.once(key=lambda order: f"order-{order['id']}", lease=30)
        def send_order_mail(order):
            calls.append(order["id"])
            return {"mailed": order["id"], "n": len(calls)}

        self.assertEqual(send_order_mail({"id": 7}), {"mailed": 7, "n": 1})
        self.assertEqual(send_order_mail({"id": 7}), {"mailed": 7, "n": 1}, "the stored result")
        self.assertEqual(send_order_mail({"id": 8}), {"mailed": 8, "n": 2})
        self.assertEqual(calls, [7, 8])
        self.assertEqual(send_order_mail.__name__, "send_order_mail")
        # The module-level form, with a client from the environment, and the same keys.
        os.environ.update(ICHIDO_URL=self.server.url, ICHIDO_TOKEN=self.writer, ICHIDO_NS="py-deco")
        self.addCleanup(lambda: [os.environ.pop(k, None) for k in ("ICHIDO_URL", "ICHIDO_TOKEN", "ICHIDO_NS")])

        @ichido.once(key=lambda order: f"order-{order['id']}")
        def again(order):
            calls.append(("again", order["id"]))
            return "not stored"

        self.assertEqual(again({"id": 7}), {"mailed": 7, "n": 1}, "another function, the same key: the stored result")
        self.assertEqual(calls, [7, 8])
        with self.assertRaises(ichido.InvalidArgument):
            c.once(key="not-callable")

if __name__ == "__main__":
    unittest.main()
