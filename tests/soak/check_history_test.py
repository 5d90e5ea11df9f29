"""The history checker must be able to fail: small hand-made histories, one for each kind of
violation, each reported; and the tricky histories that are NOT violations (a lost unkeyed answer,
a keyed retry, a lease handed on by a release, grants exactly at a lease's end) pass."""

import datetime
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_history  # noqa: E402
from check_history import Attempt, Checker  # noqa: E402

T0 = 1_780_000_000_000  # a server time in ms


def at(ms: int) -> str:
    dt = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def item(value, key, issued=T0, voided=None, period=""):
    return {"value": value, "formatted": f"N-{value:06d}", "period": period, "key": key,
            "note": "", "issued_at": at(issued), "voided_at": at(voided) if voided else None,
            "void_reason": "r" if voided else None}


class H:
    """A history under construction: requests in client-clock order (10 µs apart unless given)."""

    def __init__(self):
        self.t = 0
        self.lines = []
        self.final = {"counters": {}, "once": {}, "locks": {}}
        self.run = {"checks": []}

    def tick(self):
        self.t += 10
        return self.t

    def req(self, op, a, st, body=None, t0=None, t1=None):
        t0 = self.tick() if t0 is None else t0
        t1 = self.tick() if t1 is None else t1
        self.t = max(self.t, t1)
        d = {"i": len(self.lines) + 1, "c": 1, "lid": len(self.lines) + 1, "op": op, "a": a,
             "t0": t0, "t1": t1, "st": st}
        if st:
            d["b"] = json.dumps(body if body is not None else {})
        else:
            d["err"] = "connection refused"
        self.lines.append(d)
        return d

    # counters
    def counter(self, name, last, trail, start=0, cmax=None, period=""):
        self.final["counters"][name] = {
            "info": {"name": name, "start": start, "max": cmax, "current_period": period,
                     "last_value": last},
            "trails": {period: trail}}

    def next(self, counter, key, st=200, value=None, issued=T0, replayed=False, voided=None,
             code=None, **kw):
        body = {}
        if st == 200:
            body = {"value": value, "formatted": f"N-{value:06d}", "period": "", "key": key,
                    "replayed": replayed, "issued_at": at(issued)}
            if voided:
                body["voided_at"] = at(voided)
        elif code:
            body = {"error": {"code": code, "message": "m", "details": {}}}
        return self.req("counter.next", {"counter": counter, "key": key}, st, body, **kw)

    def void(self, counter, value, st=200, voided=T0 + 50):
        body = item(value, None, voided=voided) if st == 200 else \
            {"error": {"code": "store_unavailable", "message": "m", "details": {}}}
        return self.req("counter.void", {"counter": counter, "value": value, "period": ""}, st,
                        body)

    # locks
    def acquire(self, lock, rid, token=None, grant=None, lease=1000, st=200, replayed=False,
                acquired=True, **kw):
        a = {"lock": lock, "owner": "o", "lease_ms": lease, "wait_ms": 0, "request_id": rid}
        body = None
        if st == 200:
            body = {"acquired": acquired}
            if acquired:
                body.update({"token": token, "lease_expires_at": at(grant + lease)})
                if replayed:
                    body["replayed"] = True
        return self.req("lock.acquire", a, st, body, **kw)

    def release(self, lock, token, st=200, code=None, **kw):
        body = {"released": True} if st == 200 else \
            {"error": {"code": code or "store_unavailable", "message": "m", "details": {}}}
        return self.req("lock.release", {"lock": lock, "token": token}, st, body, **kw)

    # once
    def begin(self, key, rid, outcome="acquired", token=None, attempt=1, grant=None, lease=1000,
              result=None, st=200, replayed=False, **kw):
        a = {"key": key, "owner": "o", "lease_ms": lease, "request_id": rid, "wait_ms": 0}
        body = None
        if st == 200:
            body = {"outcome": outcome}
            if outcome == "acquired":
                body.update({"token": token, "attempt": attempt,
                             "lease_expires_at": at(grant + lease)})
                if replayed:
                    body["replayed"] = True
            elif outcome == "completed":
                body.update({"result": result, "completed_at": at(T0 + 5000)})
        return self.req("once.begin", a, st, body, **kw)

    def complete(self, key, token, result, st=200, code=None, **kw):
        body = {"outcome": "completed", "completed_at": at(T0 + 5000)} if st == 200 else \
            {"error": {"code": code or "store_unavailable", "message": "m", "details": {}}}
        return self.req("once.complete", {"key": key, "token": token, "result": result}, st, body,
                        **kw)

    def fail(self, key, token, st=200, outcome="pending", **kw):
        body = {"outcome": outcome, "attempt": 1, "max_attempts": 5} if st == 200 else None
        return self.req("once.fail", {"key": key, "token": token, "error": "e", "retry": True},
                        st, body, **kw)

    def once_final(self, key, state, token, attempt, result=None):
        self.final["once"][key] = {"key": key, "state": state, "token": token, "attempt": attempt,
                                   "result": result,
                                   "completed_at": at(T0 + 5000) if state == "completed" else None}

    def check(self):
        return Checker([Attempt(d) for d in self.lines], self.final, self.run).check()


def good() -> H:
    """A history with every tricky-but-legal case; it must pass."""
    h = H()
    # Keyed counter: a, b acknowledged; c's first answer lost, its retry replays the number.
    h.next("keyed", "a", value=1, issued=T0 + 1)
    h.next("keyed", "b", value=2, issued=T0 + 2)
    h.next("keyed", "c", st=0)
    h.next("keyed", "c", value=3, issued=T0 + 3, replayed=True)
    # d: its only attempt lost, never retried (the script died): number 4 nobody saw is fine.
    h.next("keyed", "d", st=0)
    # e: refused with 503 (nothing changed), retried and acknowledged.
    h.next("keyed", "e", st=503, code="store_unavailable")
    h.next("keyed", "e", value=5, issued=T0 + 5)
    h.void("keyed", 2)
    h.req("counter.get", {"counter": "keyed"}, 200, {"last_value": 5, "current_period": ""})
    h.req("counter.issued_key", {"counter": "keyed", "key": "b"}, 200,
          {"items": [item(2, "b", T0 + 2, voided=T0 + 50)]})
    h.counter("keyed", 5, [item(1, "a", T0 + 1), item(2, "b", T0 + 2, voided=T0 + 50),
                           item(3, "c", T0 + 3), item(4, "d", T0 + 4), item(5, "e", T0 + 5)])
    # Unkeyed: one acknowledged, one lost answer that did use number 2.
    h.next("plain", None, value=1, issued=T0 + 1)
    h.next("plain", None, st=0)
    h.counter("plain", 2, [item(1, None, T0 + 1), item(2, None, T0 + 2)])
    # Bounded at 2: exhausted after 2 was issued; a replay afterwards is fine.
    h.next("bounded", "x", value=1, issued=T0 + 1)
    h.next("bounded", "y", value=2, issued=T0 + 2)
    h.next("bounded", "z", st=409, code="counter_exhausted")
    h.next("bounded", "y", value=2, issued=T0 + 2, replayed=True)
    h.counter("bounded", 2, [item(1, "x", T0 + 1), item(2, "y", T0 + 2)], cmax=2)
    # Lock: A released (request sent before B's grant was answered), so B may be granted inside
    # A's lease; C granted exactly at B's lease end (held means now < end).
    h.acquire("L", "ra", token=10, grant=T0, lease=1000)
    h.release("L", 10)
    h.acquire("L", "rb", token=11, grant=T0 + 200, lease=1000)
    h.acquire("L", "rc", st=0)
    h.acquire("L", "rc", token=12, grant=T0 + 1200, lease=1000)
    h.acquire("L", "rc", token=12, grant=T0 + 1200, lease=1000, replayed=True)
    h.release("L", 11, st=409, code="not_holder")
    h.req("lock.get", {"lock": "L"}, 200, {"held": True, "token": 12})
    # Once: attempt 1 fails, attempt 2 completes; duplicates see the result.
    h.begin("k", "r1", token=13, attempt=1, grant=T0 + 100)
    h.fail("k", 13)
    h.begin("k", "r2", token=14, attempt=2, grant=T0 + 150)
    h.complete("k", 14, {"n": 1}, st=0)
    h.complete("k", 14, {"n": 1})
    h.begin("k", "r3", outcome="completed", result={"n": 1})
    h.complete("k", 13, {"n": 9}, st=409, code="stale_token")
    h.once_final("k", "completed", 14, 2, {"n": 1})
    return h


class GoodHistory(unittest.TestCase):
    def test_a_legal_history_passes(self):
        self.assertEqual(good().check(), [])


class EachViolationIsReported(unittest.TestCase):
    def assertReports(self, h: H, kind: str, also=()):
        """`kind` is reported, and nothing but `kind` and the consequences listed in `also`."""
        found = h.check()
        kinds = {v.kind for v in found}
        self.assertIn(kind, kinds, f"expected {kind}, got {found}")
        self.assertLessEqual(kinds, {kind, *also}, f"unexpected extra kinds in {found}")
        return found

    def test_lost_number(self):
        h = good()
        h.final["counters"]["keyed"]["trails"][""][0]["issued_at"] = at(T0 + 99)
        self.assertReports(h, "lost_ack", also={"order"})
        h = good()
        del h.final["counters"]["keyed"]["trails"][""][4]  # e=5 acknowledged, gone
        h.final["counters"]["keyed"]["info"]["last_value"] = 4
        self.assertReports(h, "lost_ack")

    def test_lost_void(self):
        h = good()
        h.final["counters"]["keyed"]["trails"][""][1]["voided_at"] = None
        self.assertReports(h, "lost_ack")

    def test_lost_completion(self):
        h = good()
        h.once_final("k", "pending", 14, 2)
        self.assertReports(h, "lost_ack", also={"reacquired_after_done"})

    def test_lost_grant(self):
        h = good()
        h.once_final("k", "completed", 13, 1, {"n": 1})  # token went backwards
        self.assertReports(h, "lost_ack")

    def test_duplicate_number(self):
        h = good()
        h.next("keyed", "f", value=5, issued=T0 + 5)  # e already has 5
        self.assertReports(h, "duplicate_number", also={"lost_ack", "order"})
        h = good()
        h.next("plain", None, value=1, issued=T0 + 1)  # two unkeyed calls got 1
        self.assertReports(h, "duplicate_number", also={"order"})

    def test_replay_mismatch(self):
        h = good()
        h.next("keyed", "a", value=1, issued=T0 + 7, replayed=True)  # another issued_at
        self.assertReports(h, "replay_mismatch")
        h = good()
        h.acquire("L", "rc", token=13, grant=T0 + 1200, lease=1000, replayed=True)
        self.assertReports(h, "replay_mismatch", also={"token_reused"})

    def test_gap(self):
        h = good()
        del h.final["counters"]["plain"]["trails"][""][0]  # 1 missing
        self.assertReports(h, "gap", also={"lost_ack"})
        h = good()
        h.final["counters"]["plain"]["info"]["last_value"] = 3  # claims one more than stored
        self.assertReports(h, "gap")

    def test_phantom_number(self):
        h = good()
        h.next("keyed", "g", st=503, code="store_unavailable")
        h.final["counters"]["keyed"]["trails"][""].append(item(6, "g", T0 + 6))
        h.final["counters"]["keyed"]["info"]["last_value"] = 6
        self.assertReports(h, "phantom")
        h = good()
        h.final["counters"]["plain"]["trails"][""].append(item(3, None, T0 + 3))
        h.final["counters"]["plain"]["info"]["last_value"] = 3
        self.assertReports(h, "phantom")

    def test_a_503_whose_outcome_is_unknown_may_have_taken_effect(self):
        # A keyed next answered 503 with details.outcome "unknown" (PostgreSQL went away during
        # the COMMIT) whose number is in the trail: not a phantom, as for a lost answer.
        h = good()
        h.req("counter.next", {"counter": "keyed", "key": "g"}, 503,
              {"error": {"code": "store_unavailable", "message": "m",
                         "details": {"outcome": "unknown"}}})
        h.final["counters"]["keyed"]["trails"][""].append(item(6, "g", T0 + 6))
        h.final["counters"]["keyed"]["info"]["last_value"] = 6
        self.assertEqual(h.check(), [])
        # The same for an unkeyed number: it counts as unanswered, not as refused.
        h = good()
        h.req("counter.next", {"counter": "plain"}, 503,
              {"error": {"code": "store_unavailable", "message": "m",
                         "details": {"outcome": "unknown"}}})
        h.final["counters"]["plain"]["trails"][""].append(item(3, None, T0 + 3))
        h.final["counters"]["plain"]["info"]["last_value"] = 3
        self.assertEqual(h.check(), [])

    def test_phantom_void(self):
        h = good()
        h.void("keyed", 3, st=503)
        h.final["counters"]["keyed"]["trails"][""][2]["voided_at"] = at(T0 + 60)
        self.assertReports(h, "phantom")

    def test_order(self):
        h = H()
        h.next("keyed", "a", value=2, issued=T0 + 1)
        h.next("keyed", "b", value=1, issued=T0 + 2)  # sent after a=2 was acknowledged
        h.counter("keyed", 2, [item(1, "b", T0 + 2), item(2, "a", T0 + 1)])
        found = self.assertReports(h, "order")
        self.assertTrue(any("issued at" in v.message for v in found))  # issued_at too

    def test_concurrent_requests_may_be_issued_in_either_order(self):
        h = H()
        h.next("keyed", "a", value=2, issued=T0 + 1, t0=10, t1=100)
        h.next("keyed", "b", value=1, issued=T0 + 1, t0=20, t1=90)
        h.counter("keyed", 2, [item(1, "b", T0 + 1), item(2, "a", T0 + 1)])
        self.assertEqual(h.check(), [])

    def test_exhausted(self):
        h = H()
        h.next("bounded", "x", value=1, issued=T0 + 1)
        h.next("bounded", "z", st=409, code="counter_exhausted")  # but 2 was never issued
        h.counter("bounded", 1, [item(1, "x", T0 + 1)], cmax=2)
        self.assertReports(h, "exhausted")
        h = good()
        h.next("bounded", "w", value=3, issued=T0 + 3)  # above max, after exhaustion
        self.assertReports(h, "exhausted", also={"lost_ack"})

    def test_stale_counter_read(self):
        h = good()
        h.req("counter.get", {"counter": "keyed"}, 200, {"last_value": 4, "current_period": ""})
        self.assertReports(h, "stale_read")
        h = good()
        h.req("counter.issued_key", {"counter": "keyed", "key": "a"}, 200, {"items": []})
        self.assertReports(h, "stale_read")

    def test_stale_lock_read(self):
        h = good()
        h.req("lock.get", {"lock": "L"}, 200, {"held": True, "token": 11})
        self.assertReports(h, "stale_read")

    def test_token_reused(self):
        h = good()
        h.begin("k2", "r9", token=12, attempt=1, grant=T0 + 3000)  # lock L's token 12
        h.once_final("k2", "processing", 12, 1)
        self.assertReports(h, "token_reused", also={"token_order"})

    def test_token_order(self):
        h = good()
        h.acquire("M", "rm", token=5, grant=T0 + 4000)  # asked after 14 was granted
        self.assertReports(h, "token_order")

    def test_grant_time_order(self):
        h = H()
        h.acquire("L", "ra", token=10, grant=T0 + 500, lease=1000, t0=10, t1=30)
        h.release("L", 10, t0=31, t1=32)
        h.acquire("L", "rb", token=11, grant=T0 + 100, lease=1000, t0=20, t1=40)
        self.assertReports(h, "token_order")

    def test_attempt_order(self):
        h = good()
        h.begin("k3", "r4", token=20, attempt=2, grant=T0 + 9000)
        h.fail("k3", 20)
        h.begin("k3", "r5", token=21, attempt=2, grant=T0 + 9100)  # attempt did not grow
        h.once_final("k3", "processing", 21, 2)
        self.assertReports(h, "attempt_order")

    def test_two_lock_holders(self):
        h = H()
        h.acquire("L", "ra", token=10, grant=T0, lease=1000)
        h.acquire("L", "rb", token=11, grant=T0 + 999, lease=1000)  # 1 ms inside A's lease
        self.assertReports(h, "two_holders")

    def test_two_holders_through_a_renewal(self):
        h = H()
        h.acquire("L", "ra", token=10, grant=T0, lease=1000)
        h.req("lock.renew", {"lock": "L", "token": 10, "lease_ms": 1000}, 200,
              {"token": 10, "lease_expires_at": at(T0 + 1800)})
        h.acquire("L", "rb", token=11, grant=T0 + 1500, lease=1000)
        self.assertReports(h, "two_holders")

    def test_release_sent_after_the_grant_does_not_excuse(self):
        h = H()
        h.acquire("L", "ra", token=10, grant=T0, lease=1000)
        h.acquire("L", "rb", token=11, grant=T0 + 500, lease=1000)
        h.release("L", 10)  # sent after B was answered: B overlapped A
        self.assertReports(h, "two_holders", also={"stale_holder_succeeded"})

    def test_two_once_holders(self):
        h = H()
        h.begin("k", "r1", token=10, attempt=1, grant=T0, lease=1000)
        h.complete("k", 10, {"n": 1}, st=0)  # complete does not hand the key on
        h.begin("k", "r2", token=11, attempt=2, grant=T0 + 500, lease=1000)
        h.once_final("k", "processing", 11, 2)
        self.assertReports(h, "two_holders")

    def test_grant_at_the_exact_lease_end_is_fine(self):
        h = H()
        h.acquire("L", "ra", token=10, grant=T0, lease=1000)
        h.acquire("L", "rb", token=11, grant=T0 + 1000, lease=1000)
        self.assertEqual(h.check(), [])

    def test_stale_holder_succeeded(self):
        h = good()
        h.release("L", 10)  # 12 was granted before this was sent: 200 is wrong (409 expected)
        self.assertReports(h, "stale_holder_succeeded")
        h = good()
        h.complete("k", 13, {"n": 1})
        self.assertReports(h, "stale_holder_succeeded")

    def test_result_changed(self):
        h = good()
        h.begin("k", "r5", outcome="completed", result={"n": 2})
        self.assertReports(h, "result_changed")
        h = good()
        h.final["once"]["k"]["result"] = {"n": 2}
        found = self.assertReports(h, "result_changed", also={"lost_ack"})
        self.assertIn("lost_ack", {v.kind for v in found})

    def test_reacquired_after_done(self):
        h = good()
        h.begin("k", "r6", token=30, attempt=3, grant=T0 + 9000)
        self.assertReports(h, "reacquired_after_done", also={"lost_ack"})
        h = good()
        h.req("once.get", {"key": "k"}, 200, {"state": "pending", "token": 14})
        self.assertReports(h, "reacquired_after_done")
        h = good()
        h.begin("k", "r7", outcome="dead")
        self.assertReports(h, "reacquired_after_done")

    def test_unexpected_answers(self):
        for st, code in ((500, "store_corrupt"), (503, "too_many_connections"),
                         (400, "invalid_request"), (404, "counter_not_found"),
                         (401, "unauthenticated")):
            h = good()
            h.next("keyed", "h", st=st, code=code)
            self.assertReports(h, "unexpected_answer")
        h = good()
        h.req("once.complete", {"key": "k", "token": 14, "result": {"n": 1}}, 409,
              {"error": {"code": "result_mismatch"}})
        self.assertReports(h, "unexpected_answer")

    def test_failed_phase_check(self):
        h = good()
        h.run["checks"].append({"phase": "disk-full", "name": "writes succeed again",
                                "ok": False, "detail": "x"})
        self.assertReports(h, "phase_check")


class Summary(unittest.TestCase):
    def test_writes_in_flight_at_kills(self):
        h = H()
        h.next("keyed", "a", st=0, t0=100, t1=300)   # spans the kill at 200
        h.next("keyed", "b", value=1, t0=150, t1=200)  # answered at the kill's instant: not
        h.next("keyed", "c", value=2, t0=200, t1=250)  # sent at the kill's instant: not
        h.req("counter.get", {"counter": "keyed"}, 0, t0=100, t1=300)  # a read: not a write
        s = check_history.summarize([Attempt(d) for d in h.lines],
                                    [{"ev": "kill", "t": 200}, {"ev": "start", "t": 210}], {})
        self.assertEqual(s["writes_in_flight_at_kills"], 1)
        self.assertEqual(s["acknowledged_writes"], 2)
        self.assertEqual(s["no_answer"], 2)


class CommandLine(unittest.TestCase):
    def write_run(self, h: H, d: str, final=True):
        with open(os.path.join(d, "history.jsonl"), "w") as f:
            for line in h.lines:
                f.write(json.dumps(line) + "\n")
            f.write(json.dumps({"ev": "kill", "t": 5}) + "\n")
        if final:
            with open(os.path.join(d, "final.json"), "w") as f:
                json.dump(h.final, f)
        with open(os.path.join(d, "run.json"), "w") as f:
            json.dump({"cycles": 3, "checks": h.run["checks"]}, f)

    def run_checker(self, d):
        return subprocess.run([sys.executable, check_history.__file__, d], capture_output=True,
                              text=True)

    def test_exit_codes_and_summary(self):
        with tempfile.TemporaryDirectory() as d:
            self.write_run(good(), d)
            r = self.run_checker(d)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("0 violations", r.stdout)
            with open(os.path.join(d, "summary.json")) as f:
                s = json.load(f)
            self.assertEqual(s["violations"], 0)
            self.assertEqual(s["cycles"], 3)
            self.assertGreater(s["acknowledged_writes"], 10)
        with tempfile.TemporaryDirectory() as d:
            h = good()
            h.next("keyed", "f", value=5, issued=T0 + 5)
            self.write_run(h, d)
            r = self.run_checker(d)
            self.assertEqual(r.returncode, 1)
            self.assertIn("VIOLATION duplicate_number", r.stdout)

    def test_a_run_without_final_read_fails(self):
        with tempfile.TemporaryDirectory() as d:
            self.write_run(good(), d, final=False)
            r = self.run_checker(d)
            self.assertEqual(r.returncode, 1)
            self.assertIn("no final.json", r.stdout)


if __name__ == "__main__":
    unittest.main()
