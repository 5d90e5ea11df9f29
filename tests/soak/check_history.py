#!/usr/bin/env python3
"""Checks a soak run's history against ichido's promises (docs/reliability.md).

Input, in the run directory written by ichido-soak:
  history.jsonl  one line per request attempt and per injected fault:
                 {"i","c","lid","op","a":{args},"t0","t1","st","b":"<body>"} — st 0 with "err"
                 means no answer arrived (the request may or may not have taken effect);
                 {"ev": "kill" | "start" | ..., "t": ...} driver events.
                 t0/t1 are the driver's steady clock in microseconds: t0 before the request was
                 sent, t1 after its answer arrived. "A before B" below means A.t1 < B.t0, the
                 only order the clients can know. Server timestamps (lease_expires_at, issued_at)
                 are compared only with each other (one server clock, millisecond resolution).
  final.json     the store read through the API after the last restart: every counter with its
                 audit trail for every period seen, every once key, every lock.
  run.json       the driver's numbers and its own phase checks (fault phases, damaged dirs).

Rules (each violation names one):
  unexpected_answer     an answer the contract does not allow for that call here (a 500, a 503
                        other than store_unavailable, invalid_request, 404 for a counter, ...).
  lost_ack              an acknowledged effect is missing or different after the last restart:
                        a number (value, key, formatted, period, issued_at), a void, a completion,
                        a once grant (the record is gone or its token went backwards).
  duplicate_number      one number of a counter+period given to two keys (or to two unkeyed calls),
                        or present twice in the audit trail.
  replay_mismatch       the same key answered with different numbers, or the same request_id with
                        different tokens.
  gap                   the audit trail of a counter+period is not exactly start+1..last_value.
                        (A number whose `next` was never acknowledged may be in the trail: an
                        unkeyed `next` whose answer was lost can leave one nobody saw. A gap is
                        never fine: voided numbers stay in the trail, marked.)
  phantom               a number or a void in the store that no request can explain: its key's
                        every request was refused (503 means nothing changed, unless its
                        details.outcome is "unknown": then it counts as unanswered), or more
                        unkeyed numbers than acknowledged plus unanswered unkeyed calls.
  order                 numbers not increasing in issue order (A acknowledged before B was sent,
                        yet A >= B), or issued_at decreasing along the trail.
  exhausted             counter_exhausted answered while max was not issued, a value above max,
                        or a new number issued after an exhausted answer.
  stale_read            a read sent after an acknowledgement does not show it (a counter's
                        last_value below an acknowledged number, issued?key without it, a lock
                        reported held by a token older than a grant already acknowledged).
  token_reused          one fencing token in two grants (any locks or once keys).
  token_order           tokens not increasing in grant order (A granted before B was asked for,
                        yet A's token >= B's), or grant times going backwards as tokens grow.
  attempt_order         a once key's attempts not increasing with its tokens.
  two_holders           grant B of a lock/once key made (server time lease_expires_at - lease_ms)
                        before the lease end known for an earlier grant A (its own answer or an
                        acknowledged renew), while A had not released (lock) or failed (once) by
                        a request sent before B was answered.
  stale_holder_succeeded  a release/renew/complete/fail with token A answered 200 although a grant
                        with a larger token on the same resource was acknowledged before it was sent.
  result_changed        a completed once record seen with two different results or times.
  reacquired_after_done  a once key granted, or seen processing/pending, after it was seen
                        completed or dead (the harness never resets), or seen both completed and
                        dead.
  phase_check           one of the driver's own fault-phase checks failed (run.json).

Exit status: 0 with no violation, 1 with violations, 2 when the input cannot be read.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import datetime
import json
import os
import sys
from typing import Any

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
MS = datetime.timedelta(milliseconds=1)

MUTATIONS = {
    "counter.create", "counter.next", "counter.void", "once.begin", "once.complete",
    "once.fail", "once.renew", "lock.acquire", "lock.release", "lock.renew",
}
# The non-2xx answers each call may legitimately get in the soak run (503 store_unavailable is
# allowed everywhere: the store was down, full or restarting).
ALLOWED_ERRORS = {
    "counter.create": set(),
    "counter.next": {(409, "counter_exhausted")},
    "counter.void": set(),
    "counter.get": set(),
    "counter.issued_key": set(),
    "once.begin": set(),
    "once.complete": {(409, "stale_token")},
    "once.fail": {(409, "stale_token")},
    "once.renew": {(409, "stale_token")},
    "once.get": {(404, "once_not_found")},
    "lock.acquire": set(),
    "lock.release": {(409, "not_holder")},
    "lock.renew": {(409, "not_holder")},
    "lock.get": set(),
}


def parse_ms(text: str) -> int:
    """RFC 3339 UTC ('2026-04-01T09:30:00.123Z') to integer milliseconds, exactly."""
    dt = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return (dt - EPOCH) // MS


class Attempt:
    __slots__ = ("i", "c", "lid", "op", "a", "t0", "t1", "st", "body", "err")

    def __init__(self, d: dict):
        self.i = d.get("i")
        self.c = d.get("c")
        self.lid = d.get("lid")
        self.op = d["op"]
        self.a = d.get("a") or {}
        self.t0 = d["t0"]
        self.t1 = d["t1"]
        self.st = d["st"]
        self.err = d.get("err")
        self.body = None
        if self.st and "b" in d:
            try:
                self.body = json.loads(d["b"])
            except ValueError:
                self.body = None

    @property
    def ok(self) -> bool:
        return 200 <= self.st < 300

    @property
    def unknown(self) -> bool:
        """The effect may or may not be there: no answer arrived, or a 503 said the COMMIT's
        outcome is unknown (details.outcome "unknown": PostgreSQL went away mid-commit)."""
        return self.st == 0 or self.outcome_unknown

    @property
    def outcome_unknown(self) -> bool:
        if self.st != 503 or not isinstance(self.body, dict):
            return False
        err = self.body.get("error")
        details = err.get("details") if isinstance(err, dict) else None
        return isinstance(details, dict) and details.get("outcome") == "unknown"

    @property
    def code(self) -> str:
        if isinstance(self.body, dict) and isinstance(self.body.get("error"), dict):
            return self.body["error"].get("code", "")
        return ""

    def get(self, field: str, default: Any = None) -> Any:
        return self.body.get(field, default) if isinstance(self.body, dict) else default

    def ref(self) -> str:
        return f"#{self.i} {self.op} c{self.c} t0={self.t0}"


class Violation:
    def __init__(self, kind: str, message: str):
        self.kind = kind
        self.message = message

    def __repr__(self) -> str:
        return f"{self.kind}: {self.message}"


class Grant:
    """One acquisition of a lock or once key, identified by (resource, request_id)."""

    def __init__(self, resource: tuple, request_id: str):
        self.resource = resource
        self.request_id = request_id
        self.tokens: set[int] = set()
        self.first_send = None  # earliest t0 of any attempt with this request_id
        self.first_ack = None   # earliest t1 of an "acquired" answer
        self.grant_ms = None    # server time of the grant (from a non-replayed answer)
        self.lease_end = None   # latest lease end acknowledged (grant or renew)
        self.attempt = None     # once only
        self.first_ack_ref = ""

    @property
    def token(self) -> int:
        return min(self.tokens)


class Checker:
    def __init__(self, attempts: list[Attempt], final: dict, run: dict | None = None,
                 tolerance_ms: int = 0):
        self.attempts = attempts
        self.final = final
        self.run = run or {}
        self.tol = tolerance_ms
        self.violations: list[Violation] = []
        # What was actually checked (a checker with nothing to check proves nothing).
        self.coverage: collections.Counter = collections.Counter()

    def bad(self, kind: str, message: str) -> None:
        self.violations.append(Violation(kind, message))

    def check(self) -> list[Violation]:
        self.check_answers()
        self.check_counters()
        self.check_grants()
        self.check_once_results()
        self.check_phases()
        return self.violations

    # ------------------------------------------------------------------ every answer

    def check_answers(self) -> None:
        for a in self.attempts:
            if a.op not in ALLOWED_ERRORS:
                self.bad("unexpected_answer", f"{a.ref()}: unknown operation in the history")
                continue
            if a.unknown or a.ok:
                continue
            if a.st == 503 and a.code == "store_unavailable":
                continue
            if (a.st, a.code) in ALLOWED_ERRORS[a.op]:
                continue
            self.bad("unexpected_answer", f"{a.ref()}: {a.st} {a.code or a.body} for {a.a}")

    # ------------------------------------------------------------------ counters

    def check_counters(self) -> None:
        final_counters = self.final.get("counters", {})
        by_counter: dict[str, list[Attempt]] = collections.defaultdict(list)
        for a in self.attempts:
            if a.op.startswith("counter.") and a.op != "counter.create":
                by_counter[a.a.get("counter")].append(a)
        for name in sorted(set(by_counter) | set(final_counters)):
            fc = final_counters.get(name)
            if fc is None:
                self.bad("lost_ack", f"counter {name}: missing from the final read")
                continue
            self.check_counter(name, by_counter.get(name, []), fc)

    def check_counter(self, name: str, attempts: list[Attempt], fc: dict) -> None:
        info = fc["info"]
        start = info.get("start", 0)
        cmax = info.get("max")
        trails: dict[str, list[dict]] = fc.get("trails", {})
        stored: dict[tuple, dict] = {}

        # The final audit trail itself: start+1..last with no gap and no number twice.
        for period, items in trails.items():
            values = [it["value"] for it in items]
            seen = set()
            for it in items:
                if it["value"] in seen:
                    self.bad("duplicate_number",
                             f"counter {name} period {period!r}: {it['value']} twice in the trail")
                seen.add(it["value"])
                stored[(period, it["value"])] = it
            top = max(values) if values else start
            missing = sorted(set(range(start + 1, top + 1)) - seen)
            if missing:
                self.bad("gap", f"counter {name} period {period!r}: missing {missing[:10]}"
                                f"{' …' if len(missing) > 10 else ''} of {start + 1}..{top}")
            if period == info.get("current_period") and info.get("last_value") != top:
                self.bad("gap", f"counter {name}: last_value {info.get('last_value')} but the "
                                f"trail of period {period!r} ends at {top}")
            ordered = sorted(items, key=lambda it: it["value"])
            for prev, cur in zip(ordered, ordered[1:]):
                if parse_ms(cur["issued_at"]) < parse_ms(prev["issued_at"]):
                    self.bad("order", f"counter {name} period {period!r}: {cur['value']} issued at "
                                      f"{cur['issued_at']}, before {prev['value']} "
                                      f"({prev['issued_at']})")
            if cmax is not None:
                for v in values:
                    if v > cmax:
                        self.bad("exhausted", f"counter {name}: {v} in the trail above max {cmax}")

        nexts = [a for a in attempts if a.op == "counter.next"]
        keyed_attempts: dict[str, list[Attempt]] = collections.defaultdict(list)
        for a in nexts:
            if a.a.get("key") is not None:
                keyed_attempts[a.a["key"]].append(a)

        # Every acknowledged number is stored as answered; no number for two owners.
        owner_of: dict[tuple, str] = {}
        value_of_key: dict[str, tuple] = {}
        # Issues for the order rule: (first_ack, first_send, period, value).
        issues: list[tuple[int, int, str, int]] = []
        for key, atts in keyed_attempts.items():
            acks = [a for a in atts if a.st == 200]
            if not acks:
                continue
            first_send = min(a.t0 for a in atts)
            first = min(acks, key=lambda a: a.t1)
            for a in acks:
                ident = (a.get("period"), a.get("value"))
                if ident != (first.get("period"), first.get("value")) or \
                        a.get("issued_at") != first.get("issued_at") or \
                        a.get("formatted") != first.get("formatted"):
                    self.bad("replay_mismatch", f"counter {name} key {key!r}: {a.ref()} answered "
                                                f"{ident} {a.get('issued_at')}, {first.ref()} "
                                                f"answered {(first.get('period'), first.get('value'))}"
                                                f" {first.get('issued_at')}")
            period, value = first.get("period"), first.get("value")
            value_of_key[key] = (period, value)
            issues.append((first.t1, first_send, period, value))
            self._claim(owner_of, name, period, value, f"key {key!r}", first)
            self._stored_as_answered(name, stored, first, key)
            self.coverage["numbers_acknowledged"] += 1
        unkeyed_unknown = 0
        unkeyed_acked = 0
        for a in nexts:
            if a.a.get("key") is not None:
                continue
            if a.unknown:
                unkeyed_unknown += 1
            if a.st != 200:
                continue
            unkeyed_acked += 1
            period, value = a.get("period"), a.get("value")
            issues.append((a.t1, a.t0, period, value))
            self._claim(owner_of, name, period, value, f"unkeyed call {a.ref()}", a)
            self._stored_as_answered(name, stored, a, None)
            self.coverage["numbers_acknowledged"] += 1

        # Phantoms: a stored number must be explained by a request that may have taken effect.
        unkeyed_stored = 0
        self.coverage["numbers_stored"] += len(stored)
        for (period, value), it in stored.items():
            key = it.get("key")
            if key is None:
                unkeyed_stored += 1
                continue
            atts = keyed_attempts.get(key, [])
            if not any(a.st == 200 or a.unknown for a in atts):
                self.bad("phantom", f"counter {name}: {value} ({period!r}) stored for key {key!r}, "
                                    f"whose {len(atts)} request(s) were all refused or never sent")
        if unkeyed_stored > unkeyed_acked + unkeyed_unknown:
            self.bad("phantom", f"counter {name}: {unkeyed_stored} unkeyed numbers stored, but only "
                                f"{unkeyed_acked} acknowledged and {unkeyed_unknown} unanswered "
                                f"unkeyed requests")

        # Order: A acknowledged before B was sent ⇒ A < B (same period).
        by_period: dict[str, list] = collections.defaultdict(list)
        for t_ack, t_send, period, value in issues:
            by_period[period].append((t_ack, t_send, value))
        for period, lst in by_period.items():
            lst.sort()
            acks_t = [x[0] for x in lst]
            prefix_max = []
            m = None
            for x in lst:
                m = x[2] if m is None else max(m, x[2])
                prefix_max.append(m)
            for t_ack, t_send, value in lst:
                k = bisect.bisect_left(acks_t, t_send)  # issues acknowledged before t_send
                if k > 0 and prefix_max[k - 1] >= value:
                    self.bad("order", f"counter {name} period {period!r}: {value} issued to a "
                                      f"request sent after {prefix_max[k - 1]} was acknowledged")

        # Voids: acknowledged ones are stored; stored ones are explained; later reads show them.
        void_attempts: dict[tuple, list[Attempt]] = collections.defaultdict(list)
        for a in attempts:
            if a.op == "counter.void":
                void_attempts[(a.a.get("period", ""), a.a.get("value"))].append(a)
        void_acked_at: dict[tuple, int] = {}
        for ident, atts in void_attempts.items():
            acks = [a for a in atts if a.st == 200]
            if not acks:
                continue
            void_acked_at[ident] = min(a.t1 for a in acks)
            self.coverage["voids_acknowledged"] += 1
            it = stored.get(ident)
            if it is None or not it.get("voided_at"):
                self.bad("lost_ack", f"counter {name}: void of {ident} acknowledged "
                                     f"({acks[0].ref()}) but the trail shows it "
                                     f"{'missing' if it is None else 'not voided'}")
            elif any(a.get("voided_at") != it.get("voided_at") for a in acks):
                self.bad("lost_ack", f"counter {name}: void of {ident} answered voided_at "
                                     f"{acks[0].get('voided_at')}, stored {it.get('voided_at')}")
        for ident, it in stored.items():
            if it.get("voided_at") and not any(a.st == 200 or a.unknown
                                               for a in void_attempts.get(ident, [])):
                self.bad("phantom", f"counter {name}: {ident} voided in the store, but no void of it "
                                    f"was acknowledged or left unanswered")
        for a in nexts:
            if a.st == 200 and a.get("replayed"):
                ident = (a.get("period"), a.get("value"))
                t = void_acked_at.get(ident)
                if t is not None and t < a.t0 and not a.get("voided_at"):
                    self.bad("lost_ack", f"counter {name}: {a.ref()} replayed {ident} without its "
                                         f"acknowledged void")

        # Exhaustion.
        exhausted = [a for a in nexts if a.st == 409 and a.code == "counter_exhausted"]
        if exhausted:
            if cmax is None:
                self.bad("exhausted", f"counter {name}: counter_exhausted without a max "
                                      f"({exhausted[0].ref()})")
            else:
                periods = {p for p in trails if any(it["value"] == cmax for it in trails[p])}
                if not periods:
                    self.bad("exhausted", f"counter {name}: counter_exhausted answered "
                                          f"({exhausted[0].ref()}) but max {cmax} was never issued")
                first_exhausted = min(a.t1 for a in exhausted)
                for a in nexts:
                    if a.st == 200 and not a.get("replayed") and a.t0 > first_exhausted:
                        self.bad("exhausted", f"counter {name}: {a.ref()} issued {a.get('value')} "
                                              f"after counter_exhausted was answered")
        if cmax is not None:
            for a in nexts:
                if a.st == 200 and a.get("value", 0) > cmax:
                    self.bad("exhausted", f"counter {name}: {a.ref()} issued {a.get('value')} "
                                          f"above max {cmax}")

        # Reads during the run.
        acked_by_period: dict[str, list] = collections.defaultdict(list)
        for t_ack, _, period, value in issues:
            acked_by_period[period].append((t_ack, value))
        prefix: dict[str, tuple[list, list]] = {}
        for period, lst in acked_by_period.items():
            lst.sort()
            ts, mx, m = [], [], None
            for t, v in lst:
                m = v if m is None else max(m, v)
                ts.append(t)
                mx.append(m)
            prefix[period] = (ts, mx)
        for a in attempts:
            if a.op == "counter.get" and a.st == 200:
                period = a.get("current_period")
                ts, mx = prefix.get(period, ([], []))
                k = bisect.bisect_left(ts, a.t0)
                if k > 0 and a.get("last_value", 0) < mx[k - 1]:
                    self.bad("stale_read", f"counter {name}: {a.ref()} read last_value "
                                           f"{a.get('last_value')} after {mx[k - 1]} was "
                                           f"acknowledged")
            elif a.op == "counter.issued_key" and a.st == 200:
                key = a.a.get("key")
                items = a.get("items", [])
                known = value_of_key.get(key)
                atts = keyed_attempts.get(key, [])
                acked_before = any(x.st == 200 and x.t1 < a.t0 for x in atts)
                if len(items) > 1:
                    self.bad("duplicate_number", f"counter {name}: {a.ref()} lists {len(items)} "
                                                 f"numbers for key {key!r}")
                if acked_before and not items:
                    self.bad("stale_read", f"counter {name}: {a.ref()} found no number for key "
                                           f"{key!r}, acknowledged before the read was sent")
                if items and known is not None and \
                        (items[0].get("period"), items[0].get("value")) != known:
                    self.bad("replay_mismatch", f"counter {name}: {a.ref()} lists "
                                                f"{items[0].get('value')} for key {key!r}, "
                                                f"answered {known}")
                if items:
                    ident = (items[0].get("period"), items[0].get("value"))
                    t = void_acked_at.get(ident)
                    if t is not None and t < a.t0 and not items[0].get("voided_at"):
                        self.bad("lost_ack", f"counter {name}: {a.ref()} shows {ident} not voided "
                                             f"after its void was acknowledged")

    def _claim(self, owner_of: dict, name: str, period: str, value: int, who: str,
               a: Attempt) -> None:
        ident = (period, value)
        if ident in owner_of and owner_of[ident] != who:
            self.bad("duplicate_number", f"counter {name}: {value} ({period!r}) given to "
                                         f"{owner_of[ident]} and to {who} ({a.ref()})")
        owner_of.setdefault(ident, who)

    def _stored_as_answered(self, name: str, stored: dict, a: Attempt, key: str | None) -> None:
        ident = (a.get("period"), a.get("value"))
        it = stored.get(ident)
        if it is None:
            self.bad("lost_ack", f"counter {name}: {ident} acknowledged ({a.ref()}) is not in the "
                                 f"trail after the last restart")
            return
        for field in ("formatted", "issued_at"):
            if it.get(field) != a.get(field):
                self.bad("lost_ack", f"counter {name}: {ident} answered {field} "
                                     f"{a.get(field)!r} ({a.ref()}), stored {it.get(field)!r}")
        if it.get("key") != key:
            self.bad("lost_ack", f"counter {name}: {ident} answered for key {key!r} ({a.ref()}), "
                                 f"stored for key {it.get('key')!r}")

    # ------------------------------------------------------------------ locks and once: grants

    @staticmethod
    def resource_of(a: Attempt) -> tuple:
        if a.op.startswith("once."):
            return ("once", a.a.get("key"))
        return ("lock", a.a.get("lock"))

    def check_grants(self) -> None:
        grants: dict[tuple, Grant] = {}
        claims = [a for a in self.attempts if a.op in ("once.begin", "lock.acquire")]
        for a in claims:
            res = self.resource_of(a)
            rid = a.a.get("request_id")
            g = grants.get((res, rid))
            if g is None:
                g = grants[(res, rid)] = Grant(res, rid)
            g.first_send = a.t0 if g.first_send is None else min(g.first_send, a.t0)
            acquired = (a.st == 200 and
                        (a.get("outcome") == "acquired" if a.op == "once.begin"
                         else a.get("acquired") is True))
            if not acquired:
                continue
            token = a.get("token")
            g.tokens.add(token)
            if g.first_ack is None or a.t1 < g.first_ack:
                g.first_ack = a.t1
                g.first_ack_ref = a.ref()
            end = parse_ms(a.get("lease_expires_at"))
            g.lease_end = end if g.lease_end is None else max(g.lease_end, end)
            if not a.get("replayed"):
                gm = end - int(a.a.get("lease_ms"))
                g.grant_ms = gm if g.grant_ms is None else min(g.grant_ms, gm)
            if a.op == "once.begin":
                g.attempt = a.get("attempt")
        granted = [g for g in grants.values() if g.tokens]
        self.coverage["grants"] += len(granted)
        self.coverage["grants_with_server_time"] += sum(g.grant_ms is not None for g in granted)

        # One token, one grant; one grant, one token.
        by_token: dict[int, list[Grant]] = collections.defaultdict(list)
        for g in granted:
            if len(g.tokens) > 1:
                self.bad("replay_mismatch", f"{g.resource} request_id {g.request_id!r} answered "
                                            f"tokens {sorted(g.tokens)}")
            for t in g.tokens:
                by_token[t].append(g)
        for t, gs in by_token.items():
            if len(gs) > 1:
                self.bad("token_reused", f"token {t} granted {len(gs)} times: " +
                         ", ".join(f"{g.resource} {g.request_id!r}" for g in gs))

        # Tokens increase in grant order (one sequence per store, across restarts).
        ordered = sorted(granted, key=lambda g: g.first_ack)
        acks_t = [g.first_ack for g in ordered]
        prefix_max, m, who = [], None, []
        for g in ordered:
            if m is None or g.token > m:
                m = g.token
                w = g
            prefix_max.append(m)
            who.append(w)
        for g in granted:
            k = bisect.bisect_left(acks_t, g.first_send)
            if k > 0 and prefix_max[k - 1] >= g.token:
                self.bad("token_order", f"{g.resource} got token {g.token} ({g.first_ack_ref}), "
                                        f"asked for after token {prefix_max[k - 1]} of "
                                        f"{who[k - 1].resource} was granted "
                                        f"({who[k - 1].first_ack_ref})")

        # Per resource: attempts, grant times, leases.
        by_res: dict[tuple, list[Grant]] = collections.defaultdict(list)
        for g in granted:
            by_res[g.resource].append(g)
        ends = self.lease_ends_and_endings()
        renew_end, ended_at = ends
        for res, gs in by_res.items():
            gs.sort(key=lambda g: g.token)
            for g in gs:
                r = renew_end.get((res, g.token))
                if r is not None:
                    g.lease_end = max(g.lease_end, r)
            if res[0] == "once":
                for prev, cur in zip(gs, gs[1:]):
                    if prev.attempt is not None and cur.attempt is not None and \
                            cur.attempt <= prev.attempt:
                        self.bad("attempt_order", f"{res}: token {cur.token} is attempt "
                                                  f"{cur.attempt}, token {prev.token} was attempt "
                                                  f"{prev.attempt}")
            known = [g for g in gs if g.grant_ms is not None]
            for prev, cur in zip(known, known[1:]):
                if cur.grant_ms < prev.grant_ms:
                    self.bad("token_order", f"{res}: token {cur.token} granted at {cur.grant_ms} ms,"
                                            f" before token {prev.token} ({prev.grant_ms} ms)")
            # Two holders: B granted while an earlier grant A's known lease was live and A had not
            # let go by a request sent before B was answered.
            open_grants: list[Grant] = []
            for prev, cur in zip(gs, gs[1:]):
                let_go = ended_at.get((res, prev.token))
                if cur.grant_ms is not None and (let_go is None or let_go >= cur.first_ack):
                    # cur was granted while prev never let go: prev's lease had to lapse first.
                    self.coverage["takeovers_after_lapse"] += 1
            for b in gs:
                if b.grant_ms is not None:
                    open_grants = [a for a in open_grants if a.lease_end > b.grant_ms - self.tol]
                    for a in open_grants:
                        let_go = ended_at.get((res, a.token))
                        if let_go is not None and let_go < b.first_ack:
                            continue
                        self.bad("two_holders",
                                 f"{res}: token {b.token} granted at {b.grant_ms} ms "
                                 f"({b.first_ack_ref}) while token {a.token}'s lease ran to "
                                 f"{a.lease_end} ms ({a.first_ack_ref}), not let go")
                open_grants.append(b)

        # A holder's calls succeed only while nobody newer was granted.
        grants_by_res_ack: dict[tuple, tuple[list, list]] = {}
        for res, gs in by_res.items():
            lst = sorted(gs, key=lambda g: g.first_ack)
            ts, mx, m = [], [], None
            for g in lst:
                m = g.token if m is None else max(m, g.token)
                ts.append(g.first_ack)
                mx.append(m)
            grants_by_res_ack[res] = (ts, mx)
        for a in self.attempts:
            if a.op in ("once.complete", "once.fail", "once.renew", "lock.release",
                        "lock.renew") and a.st == 200:
                res = self.resource_of(a)
                ts, mx = grants_by_res_ack.get(res, ([], []))
                k = bisect.bisect_left(ts, a.t0)
                if k > 0 and mx[k - 1] > a.a.get("token"):
                    self.bad("stale_holder_succeeded", f"{a.ref()}: token {a.a.get('token')} "
                                                       f"answered 200 after token {mx[k - 1]} of "
                                                       f"{res} was granted")
            if a.op == "lock.get" and a.st == 200 and a.get("held"):
                res = ("lock", a.a.get("lock"))
                ts, mx = grants_by_res_ack.get(res, ([], []))
                k = bisect.bisect_left(ts, a.t0)
                if k > 0 and mx[k - 1] > a.get("token", 0):
                    self.bad("stale_read", f"{a.ref()}: lock shown held by token {a.get('token')} "
                                           f"after token {mx[k - 1]} was granted")

        # Acknowledged once grants survive: the record exists with that token or a later one.
        final_once = self.final.get("once", {})
        for res, gs in by_res.items():
            if res[0] != "once":
                continue
            if res[1] not in final_once:
                continue  # not read (the final read covers every key the run used)
            rec = final_once[res[1]]
            top = max(g.token for g in gs)
            if rec is None or rec.get("token", 0) < top:
                self.bad("lost_ack", f"{res}: token {top} was granted, the final record has "
                                     f"{'none' if rec is None else rec.get('token')}")

    def lease_ends_and_endings(self) -> tuple[dict, dict]:
        """Lease ends extended by acknowledged renewals, and the earliest send time of a request
        that let a grant go (lock release, once fail) and may have taken effect."""
        renew_end: dict[tuple, int] = {}
        ended_at: dict[tuple, int] = {}
        for a in self.attempts:
            if a.op in ("once.renew", "lock.renew") and a.st == 200:
                k = (self.resource_of(a), a.a.get("token"))
                end = parse_ms(a.get("lease_expires_at"))
                renew_end[k] = max(renew_end.get(k, end), end)
            if a.op in ("lock.release", "once.fail") and (a.st == 200 or a.unknown):
                k = (self.resource_of(a), a.a.get("token"))
                ended_at[k] = min(ended_at.get(k, a.t0), a.t0)
        return renew_end, ended_at

    # ------------------------------------------------------------------ once: results

    def check_once_results(self) -> None:
        # (t, kind, result, completed_at, ref) per key; kind: completed / dead / open
        obs: dict[str, list] = collections.defaultdict(list)
        for a in self.attempts:
            key = a.a.get("key")
            if a.op == "once.begin" and a.st == 200:
                out = a.get("outcome")
                if out == "completed":
                    obs[key].append((a.t0, a.t1, "completed", a.get("result"),
                                     a.get("completed_at"), a.ref()))
                elif out == "dead":
                    obs[key].append((a.t0, a.t1, "dead", None, None, a.ref()))
                elif out == "acquired":
                    obs[key].append((a.t0, a.t1, "open", None, None, a.ref()))
            elif a.op == "once.complete" and a.st == 200:
                obs[key].append((a.t0, a.t1, "completed", a.a.get("result"),
                                 a.get("completed_at"), a.ref()))
            elif a.op == "once.fail" and a.st == 200 and a.get("outcome") == "dead":
                obs[key].append((a.t0, a.t1, "dead", None, None, a.ref()))
            elif a.op == "once.get" and a.st == 200:
                state = a.get("state")
                if state == "completed":
                    obs[key].append((a.t0, a.t1, "completed", a.get("result"),
                                     a.get("completed_at"), a.ref()))
                elif state == "dead":
                    obs[key].append((a.t0, a.t1, "dead", None, None, a.ref()))
                elif state in ("processing", "pending"):
                    obs[key].append((a.t0, a.t1, "open", None, None, a.ref()))
        final_once = self.final.get("once", {})
        for key, rec in final_once.items():
            if rec is None:
                continue
            inf = float("inf")
            if rec.get("state") == "completed":
                obs[key].append((inf, inf, "completed", rec.get("result"), rec.get("completed_at"),
                                 "final read"))
            elif rec.get("state") == "dead":
                obs[key].append((inf, inf, "dead", None, None, "final read"))
            else:
                obs[key].append((inf, inf, "open", None, None, "final read"))
        for key, lst in obs.items():
            done = [o for o in lst if o[2] in ("completed", "dead")]
            if not done:
                continue
            completed = [o for o in done if o[2] == "completed"]
            dead = [o for o in done if o[2] == "dead"]
            if completed and dead:
                self.bad("reacquired_after_done", f"once {key!r}: seen completed ({completed[0][5]})"
                                                  f" and dead ({dead[0][5]})")
            if completed:
                self.coverage["once_keys_completed"] += 1
                first = completed[0]
                for o in completed[1:]:
                    if o[3] != first[3] or (o[4] and first[4] and o[4] != first[4]):
                        self.bad("result_changed", f"once {key!r}: {first[5]} saw {first[3]} at "
                                                   f"{first[4]}, {o[5]} saw {o[3]} at {o[4]}")
            t_done = min(o[1] for o in done)
            first_done = min(done, key=lambda o: o[1])
            for o in lst:
                if o[2] == "open" and o[0] > t_done:
                    self.bad("reacquired_after_done", f"once {key!r}: {o[5]} found it open after "
                                                      f"{first_done[5]} saw it {first_done[2]}")
        # Acknowledged completions are in the final record (with that result).
        for a in self.attempts:
            if a.op == "once.complete" and a.st == 200:
                key = a.a.get("key")
                if key not in final_once:
                    continue
                rec = final_once[key]
                if rec is None or rec.get("state") != "completed" or \
                        rec.get("result") != a.a.get("result"):
                    self.bad("lost_ack", f"once {key!r}: completion {a.ref()} acknowledged, final "
                                         f"record {None if rec is None else rec.get('state')} "
                                         f"{None if rec is None else rec.get('result')}")

    # ------------------------------------------------------------------ the driver's checks

    def check_phases(self) -> None:
        for c in self.run.get("checks", []):
            if not c.get("ok"):
                self.bad("phase_check", f"[{c.get('phase')}] {c.get('name')}: {c.get('detail')}")


def load_history(path: str) -> tuple[list[Attempt], list[dict]]:
    attempts, events = [], []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                d = json.loads(line)
            except ValueError:
                # The driver flushes whole lines; a torn last line means it was killed.
                raise SystemExit(f"check_history: {path}:{n}: not JSON")
            if "ev" in d:
                events.append(d)
            else:
                attempts.append(Attempt(d))
    return attempts, events


def summarize(attempts: list[Attempt], events: list[dict], run: dict) -> dict:
    s = collections.Counter()
    # Writes in flight (sent, not yet answered) at the moment of each kill -9.
    # One sweep over (time, kind): 0 = a write answered, 1 = a kill, 2 = a write sent; at equal
    # times an answer comes first and a send last, so only t0 < kill < t1 counts.
    points = [(e["t"], 1) for e in events if e.get("ev") == "kill"]
    for a in attempts:
        if a.op in MUTATIONS:
            points.append((a.t0, 2))
            points.append((a.t1, 0))
    points.sort()
    in_flight = 0
    for _, kind in points:
        if kind == 2:
            in_flight += 1
        elif kind == 0:
            in_flight -= 1
        else:
            s["writes_in_flight_at_kills"] += in_flight
    for a in attempts:
        s["requests"] += 1
        if a.st == 0:
            s["no_answer"] += 1
        else:
            s["answered"] += 1
        if a.outcome_unknown:
            s["outcome_unknown_503"] += 1
        elif a.st == 503:
            s["refused_503"] += 1
        if a.op in MUTATIONS:
            s["write_requests"] += 1
            if a.ok:
                s["acknowledged_writes"] += 1
            if a.unknown:
                s["writes_without_answer"] += 1
    out = dict(s)
    for k in ("cycles", "startup_kills", "server_starts", "supervisor_restarts", "sigstops",
              "disk_fulls", "store_faults", "seconds", "seed", "clients"):
        if k in run:
            out[k] = run[k]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir", help="directory with history.jsonl, final.json and run.json")
    p.add_argument("--max-print", type=int, default=50, help="violations printed in full")
    args = p.parse_args(argv)
    try:
        attempts, events = load_history(os.path.join(args.run_dir, "history.jsonl"))
        with open(os.path.join(args.run_dir, "run.json"), encoding="utf-8") as f:
            run = json.load(f)
    except OSError as e:
        print(f"check_history: {e}", file=sys.stderr)
        return 2
    final_path = os.path.join(args.run_dir, "final.json")
    final: dict = {}
    violations: list[Violation] = []
    if os.path.exists(final_path):
        with open(final_path, encoding="utf-8") as f:
            final = json.load(f)
    else:
        violations.append(Violation("phase_check", "no final.json: the run did not reach its "
                                                   "final read (see run.json and the log)"))
    checker = Checker(attempts, final, run)
    violations += checker.check()
    summary = summarize(attempts, events, run)
    summary["checked"] = dict(checker.coverage)
    kinds = collections.Counter(v.kind for v in violations)
    summary["violations"] = len(violations)
    summary["violations_by_kind"] = dict(kinds)
    with open(os.path.join(args.run_dir, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
        f.write("\n")
    for v in violations[:args.max_print]:
        print(f"VIOLATION {v}")
    if len(violations) > args.max_print:
        print(f"... and {len(violations) - args.max_print} more")
    print(f"soak: {summary.get('cycles', 0)} kill -9 cycles "
          f"({summary.get('startup_kills', 0)} during start-up), "
          f"{summary.get('sigstops', 0)} SIGSTOPs, {summary.get('disk_fulls', 0)} disk-full "
          f"episodes, {summary.get('store_faults', 0)} PostgreSQL restarts and crashes, "
          f"{summary.get('supervisor_restarts', 0)} supervisor restarts, "
          f"{int(summary.get('seconds', 0))} s")
    print(f"soak: {summary.get('requests', 0)} requests: {summary.get('answered', 0)} answered, "
          f"{summary.get('no_answer', 0)} without answer, {summary.get('refused_503', 0)} x 503, "
          f"{summary.get('outcome_unknown_503', 0)} x 503 outcome unknown; "
          f"{summary.get('acknowledged_writes', 0)} acknowledged writes "
          f"({summary.get('writes_in_flight_at_kills', 0)} writes in flight at the kills)")
    cov = summary["checked"]
    print(f"soak: checked {cov.get('numbers_acknowledged', 0)} acknowledged numbers against "
          f"{cov.get('numbers_stored', 0)} stored, {cov.get('voids_acknowledged', 0)} voids, "
          f"{cov.get('grants', 0)} lock/once grants ({cov.get('takeovers_after_lapse', 0)} after "
          f"a lapsed lease), {cov.get('once_keys_completed', 0)} completed once keys")
    print(f"soak: {len(violations)} violations" +
          (f" ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))})" if kinds else ""))
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
