"""The ichido client: sequential numbers, locks and exactly-once processing over ichido's HTTP API.

Standard library only. Thread-safe: one Client may be shared by threads (each thread gets its own
keep-alive connection).

Retry rule (the same in every ichido client, docs/decisions/081): calls that are safe to repeat
are retried when no answer came, or on 503/429/502/504, waiting min(5 s, 0.5 s x (1 + n^2)) x a
random factor in [0.5, 1] before the n-th retry (longer when the server sends Retry-After),
re-sending the same key, token or request_id. Other answers raise IchidoError at once. Every
request has a timeout.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import inspect
import json
import os
import random
import socket
import ssl
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Dict, Generator, Iterator, List, Optional, Tuple, Type, TypeVar, Union, overload

__all__ = [
    "Client",
    "IchidoError",
    "CounterNotFound",
    "CounterExhausted",
    "CounterExists",
    "KeyRequired",
    "LockTimeout",
    "LockLost",
    "NotHolder",
    "InProgress",
    "Dead",
    "StaleToken",
    "FingerprintMismatch",
    "CompleteUnconfirmed",
    "Unreachable",
    "Unauthenticated",
    "Forbidden",
    "StoreUnavailable",
    "TooManyWaiters",
    "InvalidRequest",
    "InvalidArgument",
    "BadAnswer",
    "once",
    "IssuedNumber",
    "LockToken",
    "OnceContext",
    "RetryInfo",
    "backoff_base",
]

T = TypeVar("T")
Json = Any

_RETRYABLE_STATUS = frozenset({429, 502, 503, 504})
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


class IchidoError(Exception):
    """Every failure. Branch on ``code``: the API's error code ("counter_not_found",
    "counter_exhausted", "stale_token", "forbidden", ...) or one of this client's:
    "lock_timeout", "in_progress", "dead", "lock_lost", "complete_unconfirmed", "unreachable",
    "bad_answer", "invalid_argument". ``status`` is the HTTP status (0 when no answer came);
    ``details`` the error's details (e.g. ``field`` for invalid_request).

    The codes users meet most also have a subclass (``except LockTimeout:``, ``except
    StaleToken:``): ``IchidoError(code, ...)`` is an instance of the code's subclass, and every
    subclass is an IchidoError with the same ``code``."""

    CODE: ClassVar[str] = ""
    _by_code: ClassVar[Dict[str, Type["IchidoError"]]] = {}

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if cls.CODE:
            IchidoError._by_code[cls.CODE] = cls

    def __new__(
        cls, code: str, message: str = "", status: int = 0, details: Optional[Dict[str, Any]] = None
    ) -> "IchidoError":
        if cls is IchidoError:
            cls = IchidoError._by_code.get(code, IchidoError)
        return super().__new__(cls)

    def __init__(
        self, code: str, message: str, status: int = 0, details: Optional[Dict[str, Any]] = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.details: Dict[str, Any] = details if details is not None else {}

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class CounterNotFound(IchidoError):
    """No counter of that name in the namespace."""

    CODE = "counter_not_found"


class CounterExhausted(IchidoError):
    """The counter reached its max."""

    CODE = "counter_exhausted"


class CounterExists(IchidoError):
    """A counter of that name exists with another config."""

    CODE = "counter_exists"


class KeyRequired(IchidoError):
    """The counter needs a key."""

    CODE = "key_required"


class LockTimeout(IchidoError):
    """The lock was not acquired within the wait (details['holder'])."""

    CODE = "lock_timeout"


class LockLost(IchidoError):
    """The lease of a held lock was lost while the work ran."""

    CODE = "lock_lost"


class NotHolder(IchidoError):
    """The token does not hold the lock (any more)."""

    CODE = "not_holder"


class InProgress(IchidoError):
    """Another holder processes the item."""

    CODE = "in_progress"


class Dead(IchidoError):
    """The item failed too often; an admin must reset it."""

    CODE = "dead"


class StaleToken(IchidoError):
    """The claim's lease lapsed and another holder took the item over."""

    CODE = "stale_token"


class FingerprintMismatch(IchidoError):
    """The key was used before for other content."""

    CODE = "fingerprint_mismatch"


class CompleteUnconfirmed(IchidoError):
    """The work succeeded but its completion is not confirmed."""

    CODE = "complete_unconfirmed"


class Unreachable(IchidoError):
    """No answer from ichido after the retries."""

    CODE = "unreachable"


class Unauthenticated(IchidoError):
    """No token, or an unknown, expired or revoked one."""

    CODE = "unauthenticated"


class Forbidden(IchidoError):
    """The token's role or namespace does not allow the call."""

    CODE = "forbidden"


class StoreUnavailable(IchidoError):
    """ichido's store is unavailable; nothing changed."""

    CODE = "store_unavailable"


class TooManyWaiters(IchidoError):
    """Too many requests wait already."""

    CODE = "too_many_waiters"


class InvalidRequest(IchidoError):
    """The server refused the request's fields (details['field'])."""

    CODE = "invalid_request"


class InvalidArgument(IchidoError):
    """This client refused an argument before sending anything."""

    CODE = "invalid_argument"


class BadAnswer(IchidoError):
    """The answer was not what ichido answers."""

    CODE = "bad_answer"


@dataclass(frozen=True)
class IssuedNumber:
    """A number issued by a counter."""

    value: int
    formatted: str
    period: str  # "" without periods; "2026", "2026-04", "2026-04-01"
    key: str
    replayed: bool  # this key had been given this number before (a retry, a re-run)
    issued_at: str


@dataclass(frozen=True)
class RetryInfo:
    """Passed to ``on_retry`` before each retry."""

    call: str
    attempt: int  # the attempt about to be made (2 for the first retry)
    delay: float  # seconds
    reason: str


class LockToken(int):
    """The fencing token of a held lock (an int), with the lease's state: ``lost`` says why the
    lease was lost (None while held); ``check()`` raises IchidoError("lock_lost") once it is."""

    _lost_reason: Callable[[], Optional[str]]

    def __new__(cls, token: int, lost_reason: Callable[[], Optional[str]] = lambda: None) -> "LockToken":
        obj = super().__new__(cls, token)
        obj._lost_reason = lost_reason
        return obj

    @property
    def lost(self) -> Optional[str]:
        return self._lost_reason()

    def check(self) -> None:
        lost = self.lost
        if lost is not None:
            raise IchidoError(
                "lock_lost",
                f"the lease of this lock (token {int(self)}) was lost: {lost}; another "
                "holder may be working now",
                details={"token": int(self)},
            )


@dataclass
class OnceContext:
    """Given to a ``once`` function that takes one argument."""

    token: int
    attempt: int
    lost: threading.Event  # set when a renewal found the lease lost


def backoff_base(n: int) -> float:
    """The wait in seconds before the n-th retry (n = 0, 1, ...), before jitter:
    0.5, 1, 2.5, 5, 5, ..."""
    return min(5.0, 0.5 * (1 + n * n))


def _check_name(what: str, value: str) -> None:
    if (
        not isinstance(value, str)
        or not 1 <= len(value.encode("utf-8")) <= 128
        or not set(value) <= _NAME_CHARS
        or value in (".", "..")
    ):
        raise IchidoError(
            "invalid_argument", f"{what} must be 1-128 characters of A-Z a-z 0-9 . _ - (got {value!r})"
        )


def _check_key(what: str, value: str) -> None:
    if not isinstance(value, str) or not value:
        raise IchidoError(
            "invalid_argument", f"{what} must be a non-empty string that names the item (got {value!r})"
        )


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))


class _Answer(dict):  # type: ignore[type-arg]
    """A parsed JSON answer plus the monotonic time its request was sent."""

    sent_at: float = 0.0


def _issued(a: Dict[str, Any], key: str) -> IssuedNumber:
    value = a.get("value")
    if not isinstance(value, int) or isinstance(value, bool) or value < 0 or not isinstance(a.get("formatted"), str):
        raise IchidoError("bad_answer", f"the answer has no valid number: {dict(a)}")
    return IssuedNumber(
        value=value,
        formatted=a["formatted"],
        period=a.get("period", ""),
        key=a.get("key", key),
        replayed=a.get("replayed") is True,
        issued_at=a.get("issued_at", ""),
    )


def _granted(name: str, wait: float, grant: Dict[str, Any]) -> int:
    """The fencing token of an acquire answer, or IchidoError("lock_timeout")."""
    if not grant.get("acquired"):
        holder = grant.get("holder") or {}
        raise IchidoError(
            "lock_timeout",
            f"lock {name} was not acquired within {wait} s (held by {holder.get('owner', '?')} "
            f"until {holder.get('lease_expires_at', '?')})",
            200,
            {"holder": grant.get("holder")},
        )
    return int(grant["token"])


def _settled(key: str, claim: Dict[str, Any]) -> bool:
    """True when the begin answer says completed (the result is in it), False when acquired;
    raises "in_progress", "dead" or "bad_answer" otherwise."""
    outcome = claim.get("outcome")
    if outcome == "completed":
        return True
    if outcome == "in_progress":
        raise IchidoError(
            "in_progress",
            f"{key} is being processed by {claim.get('owner')} (lease until {claim.get('lease_expires_at')})",
            200,
            {k: claim.get(k) for k in ("owner", "lease_expires_at", "retry_after_ms")},
        )
    if outcome == "dead":
        raise IchidoError(
            "dead",
            f"{key} failed {claim.get('attempts')} times (last error: {claim.get('last_error')}); "
            "an admin must reset it",
            200,
            {k: claim.get(k) for k in ("attempts", "last_error")},
        )
    if outcome != "acquired":
        raise IchidoError("bad_answer", f"unexpected begin answer: {dict(claim)}")
    return False


def _begin_body(
    key: str, owner: str, lease: float, wait: float, fingerprint: Optional[str], max_attempts: Optional[int], request_id: Optional[str]
) -> Callable[[int], Dict[str, Any]]:
    """The begin body as a function of the elapsed ms; one request_id for all retries."""
    _check_key("key", key)
    rid = request_id or uuid.uuid4().hex

    def body(elapsed: int) -> Dict[str, Any]:
        b: Dict[str, Any] = {"key": key, "owner": owner, "lease_ms": _ms(lease), "wait_ms": max(0, _ms(wait) - elapsed), "request_id": rid}
        if fingerprint is not None:
            b["fingerprint"] = fingerprint
        if max_attempts is not None:
            b["max_attempts"] = max_attempts
        return b

    return body


def _acquire_body(name: str, owner: str, lease: float, wait: float, request_id: Optional[str]) -> Callable[[int], Dict[str, Any]]:
    _check_name("lock name", name)
    rid = request_id or uuid.uuid4().hex
    return lambda elapsed: {"owner": owner, "wait_ms": max(0, _ms(wait) - elapsed), "lease_ms": _ms(lease), "request_id": rid}


def _unconfirmed(e: IchidoError, key: str, token: int, result: Json) -> IchidoError:
    """complete's failure: "complete_unconfirmed" when no definitive answer came, else e itself."""
    if e.status == 0 or e.status in _RETRYABLE_STATUS:
        return IchidoError(
            "complete_unconfirmed",
            f"the work for {key} succeeded but ichido did not confirm recording it ({e.message}); "
            "record it with complete(key, token, result) before the lease ends, or the item "
            "will be processed again",
            e.status,
            {"key": key, "token": int(token), "result": result},
        )
    return e


class _LeaseKeeper:
    """Renews a lease every third of it in a thread until stop(); ``lost`` says why once a
    renewal answered ``lost_code`` or failed until the lease ended."""

    def __init__(self, lease: float, granted_at: float, renew: Callable[[], Any], lost_code: str):
        self.lease = lease
        self.end = granted_at + lease  # monotonic; guarded by _mu
        self.lost: Optional[str] = None  # guarded by _mu
        self.lost_event = threading.Event()
        self._renew = renew
        self._lost_code = lost_code
        self._mu = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ichido-lease", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        every = max(0.2, self.lease / 3)
        wait = every
        while not self._stop.wait(wait):
            sent = time.monotonic()
            try:
                self._renew()
                with self._mu:
                    self.end = sent + self.lease
                wait = every
            except IchidoError as e:
                with self._mu:
                    expired = time.monotonic() >= self.end
                if e.code == self._lost_code or expired:
                    with self._mu:
                        self.lost = e.code if e.code == self._lost_code else f"{e.code}: {e.message}"
                    self.lost_event.set()
                    return
                with self._mu:
                    wait = max(0.05, min(every, self.end - time.monotonic() - 0.05))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def lease_end(self) -> float:
        with self._mu:
            return self.end

    def lost_reason(self) -> Optional[str]:
        with self._mu:
            return self.lost


class Client:
    """A connection to one ichido namespace.

    ``url``, ``token`` and ``ns`` default to $ICHIDO_URL, $ICHIDO_TOKEN and $ICHIDO_NS (ns else
    "default"). ``owner`` (default "HOST:PID") is shown to others and ties retries of a claim
    together. ``timeout`` is the per-request timeout in seconds (a waiting call adds its wait);
    ``max_attempts`` the attempts of a call that is safe to repeat (4, the first included);
    ``cafile`` a PEM file of CAs for https (default $ICHIDO_CACERT, else the system's).
    """

    def __init__(
        self,
        url: Optional[str] = None,
        token: Optional[str] = None,
        ns: Optional[str] = None,
        *,
        owner: Optional[str] = None,
        timeout: float = 30.0,
        max_attempts: int = 4,
        cafile: Optional[str] = None,
        on_retry: Optional[Callable[[RetryInfo], None]] = None,
    ) -> None:
        url = url if url is not None else os.environ.get("ICHIDO_URL")
        if not url:
            raise IchidoError(
                "invalid_argument", "url is required (or set ICHIDO_URL), e.g. https://ichido.example.com"
            )
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise IchidoError("invalid_argument", f"url must be http://HOST[:PORT] or https://... (got {url})")
        self.url = url.rstrip("/")
        self._scheme = parsed.scheme
        self._host = parsed.hostname
        self._port = parsed.port or (443 if parsed.scheme == "https" else 80)
        self._prefix = parsed.path.rstrip("/")
        self.token = token if token is not None else os.environ.get("ICHIDO_TOKEN", "")
        self.ns = ns if ns is not None else (os.environ.get("ICHIDO_NS") or "default")
        _check_name("ns", self.ns)
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}"
        self.timeout = timeout
        self.max_attempts = max_attempts
        self.on_retry = on_retry
        self._ssl: Optional[ssl.SSLContext] = None
        if self._scheme == "https":
            self._ssl = ssl.create_default_context(cafile=cafile or os.environ.get("ICHIDO_CACERT") or None)
        self._local = threading.local()
        self._conns_mu = threading.Lock()
        self._conns: List[http.client.HTTPConnection] = []  # every thread's; guarded by _conns_mu

    def close(self) -> None:
        """Closes the kept-alive connections of every thread (they reopen when needed)."""
        with self._conns_mu:
            conns, self._conns = self._conns, []
        for conn in conns:
            conn.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the three calls --------------------------------------------------------------------------

    def next_number(self, counter: str, key: str, *, note: Optional[str] = None) -> IssuedNumber:
        """The next number of ``counter`` for the item named by ``key`` (a form response id, an
        order number). The same key always gets the same number back (``replayed`` True)."""
        _check_name("counter", counter)
        _check_key("key", key)  # without a key, a retry after a lost answer issues a second number
        body: Dict[str, Any] = {"key": key}
        if note is not None:
            body["note"] = note
        return _issued(self._call("POST", f"/counters/{counter}/next", body, retry=True), key)

    @contextlib.contextmanager
    def lock(
        self, name: str, *, wait: float = 10.0, lease: float = 30.0, owner: Optional[str] = None
    ) -> Iterator[LockToken]:
        """``with client.lock(name, wait=10, lease=30) as token:`` holds the lock while the block
        runs, renewing the lease every third of it, and releases it afterwards. Raises
        IchidoError "lock_timeout" (details["holder"]) when not acquired within ``wait`` seconds,
        and "lock_lost" when the block ends after a renewal found the lease lost (the token's
        ``check()`` raises it at once, for long work that can stop early)."""
        _check_name("lock name", name)
        grant = self.acquire(name, wait=wait, lease=lease, owner=owner)
        number = _granted(name, wait, grant)
        keeper = _LeaseKeeper(
            lease, grant.sent_at, lambda: self.renew_lock(name, number, lease=lease), "not_holder"
        )
        token = LockToken(number, keeper.lost_reason)
        failed = False
        try:
            yield token
        except BaseException:
            failed = True
            raise
        finally:
            keeper.stop()
            with contextlib.suppress(IchidoError):
                self.release(name, number)  # a lost release costs the lease only
            if not failed:
                token.check()

    @overload
    def once(
        self,
        key: str,
        fn: Callable[..., Any],
        *,
        lease: float = 60.0,
        wait: float = 0.0,
        fingerprint: Optional[str] = None,
        owner: Optional[str] = None,
        max_attempts: Optional[int] = None,
    ) -> Json: ...

    @overload
    def once(
        self,
        key: Callable[..., str],
        fn: None = None,
        *,
        lease: float = 60.0,
        wait: float = 0.0,
        fingerprint: Optional[str] = None,
        owner: Optional[str] = None,
        max_attempts: Optional[int] = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Json]]: ...

    def once(
        self,
        key: Union[str, Callable[..., str]],
        fn: Optional[Callable[..., Any]] = None,
        *,
        lease: float = 60.0,
        wait: float = 0.0,
        fingerprint: Optional[str] = None,
        owner: Optional[str] = None,
        max_attempts: Optional[int] = None,
    ) -> Any:
        """``once(key, fn)`` runs fn once for the item; ``@client.once(key=lambda order:
        f"order-{order.id}")`` is the decorator form: each call of the decorated function is made
        once per key, computed from its arguments (as Powertools' ``@idempotent_function``)."""
        options: Dict[str, Any] = dict(lease=lease, wait=wait, fingerprint=fingerprint, owner=owner, max_attempts=max_attempts)
        if fn is None:
            if not callable(key):
                raise IchidoError("invalid_argument", "once(key=...) as a decorator takes a function of the arguments that returns the key")
            return _once_decorator(lambda: self, key, options)
        if not isinstance(key, str):
            raise IchidoError("invalid_argument", f"key must be a non-empty string that names the item (got {key!r})")
        return self._once(key, fn, **options)

    def _once(
        self,
        key: str,
        fn: Callable[..., Any],
        *,
        lease: float = 60.0,
        wait: float = 0.0,
        fingerprint: Optional[str] = None,
        owner: Optional[str] = None,
        max_attempts: Optional[int] = None,
    ) -> Json:
        """Runs ``fn()`` once for the item ``key``, however often and wherever once() is called
        for it; returns its result (as JSON: the same value every caller gets). Later calls return
        the stored result without running fn. ``fn`` may take one argument, an OnceContext.
        Raises IchidoError "in_progress" (another holder, after ``wait`` seconds) or "dead"
        (failed too often). If fn raises, the item is failed (retryable) and the exception
        re-raised. complete is retried until the lease ends; if still unconfirmed,
        "complete_unconfirmed" is raised (details: key, token, result) — fail is never sent for
        work that succeeded."""
        _check_key("key", key)
        claim = self.begin(
            key, lease=lease, wait=wait, fingerprint=fingerprint, owner=owner, max_attempts=max_attempts
        )
        if _settled(key, claim):
            return claim.get("result")
        token = int(claim["token"])
        keeper = _LeaseKeeper(
            lease, claim.sent_at, lambda: self.renew_once(key, token, lease=lease), "stale_token"
        )
        context = OnceContext(token=token, attempt=int(claim.get("attempt", 1)), lost=keeper.lost_event)
        try:
            result = fn(context) if _takes_an_argument(fn) else fn()
        except BaseException as e:
            keeper.stop()
            with contextlib.suppress(IchidoError):
                self.fail(key, token, f"{type(e).__name__}: {e}")
            raise
        keeper.stop()
        stored = json.loads(json.dumps(result))  # every caller gets the JSON form
        remaining = keeper.lease_end() - time.monotonic()
        self.complete(key, token, stored, until=remaining)
        return stored

    def expired(self, limit: int = 100) -> List[Dict[str, Any]]:
        """The items whose holder's lease lapsed without completing (a crashed worker): for a
        sweeper that alerts or re-queues them."""
        items: List[Dict[str, Any]] = self._call(
            "GET", f"/once?state=expired&limit={int(limit)}", None, retry=True
        )["items"]
        return items

    # --- the calls underneath ---------------------------------------------------------------------

    def acquire(
        self,
        name: str,
        *,
        wait: float = 0.0,
        lease: float = 30.0,
        owner: Optional[str] = None,
        request_id: Optional[str] = None,
    ) -> _Answer:
        """{acquired, token, lease_expires_at, holder, replayed}. One request_id for all retries."""
        body = _acquire_body(name, owner or self.owner, lease, wait, request_id)
        return self._call("POST", f"/locks/{name}/acquire", body, retry=True, wait=wait)

    def release(self, name: str, token: int) -> _Answer:
        return self._call("POST", f"/locks/{name}/release", {"token": int(token)}, retry="unchanged")

    def renew_lock(self, name: str, token: int, *, lease: float = 30.0) -> _Answer:
        return self._call(
            "POST", f"/locks/{name}/renew", {"token": int(token), "lease_ms": _ms(lease)}, retry=True
        )

    def begin(
        self,
        key: str,
        *,
        lease: float = 60.0,
        wait: float = 0.0,
        fingerprint: Optional[str] = None,
        owner: Optional[str] = None,
        max_attempts: Optional[int] = None,
        request_id: Optional[str] = None,
    ) -> _Answer:
        """The begin answer: outcome acquired / in_progress / completed / dead."""
        body = _begin_body(key, owner or self.owner, lease, wait, fingerprint, max_attempts, request_id)
        return self._call("POST", "/once/begin", body, retry=True, wait=wait)

    def complete(self, key: str, token: int, result: Json = None, *, until: Optional[float] = None) -> _Answer:
        """Records success; retried while no definitive answer comes. With ``until`` (seconds from
        now, e.g. what is left of the lease) until then, after which IchidoError
        "complete_unconfirmed" is raised."""
        try:
            return self._call(
                "POST",
                "/once/complete",
                {"key": key, "token": int(token), "result": result},
                retry=True,
                deadline=None if until is None else time.monotonic() + until,
            )
        except IchidoError as e:
            mapped = _unconfirmed(e, key, token, result)
            if mapped is e:
                raise
            raise mapped from e

    def fail(self, key: str, token: int, error: str, *, retry: bool = True) -> _Answer:
        return self._call(
            "POST",
            "/once/fail",
            {"key": key, "token": int(token), "error": str(error)[:4000], "retry": retry},
            retry="unchanged",
        )

    def renew_once(self, key: str, token: int, *, lease: float = 60.0) -> _Answer:
        return self._call(
            "POST", "/once/renew", {"key": key, "token": int(token), "lease_ms": _ms(lease)}, retry=True
        )

    def get_once(self, key: str) -> _Answer:
        return self._call("GET", "/once?key=" + urllib.parse.quote(key, safe=""), None, retry=True)

    def list_once(self, state: str, limit: int = 100) -> List[Dict[str, Any]]:
        items: List[Dict[str, Any]] = self._call(
            "GET", f"/once?state={urllib.parse.quote(state)}&limit={int(limit)}", None, retry=True
        )["items"]
        return items

    # --- plumbing ---------------------------------------------------------------------------------

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        conn: Optional[http.client.HTTPConnection] = getattr(self._local, "conn", None)
        if conn is None:
            if self._ssl is not None:
                conn = http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self._ssl)
            else:
                conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
            self._local.conn = conn
            with self._conns_mu:
                self._conns.append(conn)
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn

    def _drop_connection(self) -> None:
        conn: Optional[http.client.HTTPConnection] = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            with self._conns_mu:
                if conn in self._conns:
                    self._conns.remove(conn)
        self._local.conn = None

    def _call(
        self,
        method: str,
        path: str,
        body: Union[None, Dict[str, Any], Callable[[int], Dict[str, Any]]],
        *,
        retry: Union[bool, str] = False,
        wait: float = 0.0,
        deadline: Optional[float] = None,
    ) -> _Answer:
        """One API call with the retry rule (``_plan``), over this thread's connection."""
        plan = self._plan(method, path, body, retry=retry, wait=wait, deadline=deadline)
        step = next(plan)
        while True:
            if step[0] == "sleep":
                time.sleep(step[1])
                outcome: Any = None
            else:
                outcome = self._send(*step[1])
            try:
                step = plan.send(outcome)
            except StopIteration as done:
                answer: _Answer = done.value
                return answer

    def _send(self, method: str, target: str, headers: Dict[str, str], data: Optional[bytes], timeout: float) -> "_Outcome":
        sent_at = time.monotonic()
        try:
            conn = self._connection(timeout)
            conn.request(method, target, body=data, headers=headers)
            res = conn.getresponse()
            status = res.status
            text = res.read().decode("utf-8", errors="replace")
            retry_after = _retry_after(res.getheader("Retry-After"))
            if res.will_close:
                self._drop_connection()
            return _Outcome(sent_at, status, text, retry_after, None)
        except (OSError, http.client.HTTPException) as e:
            self._drop_connection()
            return _Outcome(sent_at, 0, "", 0.0, e)

    def _plan(
        self,
        method: str,
        path: str,
        body: Union[None, Dict[str, Any], Callable[[int], Dict[str, Any]]],
        *,
        retry: Union[bool, str] = False,
        wait: float = 0.0,
        deadline: Optional[float] = None,
    ) -> Generator[Tuple[str, Any], Any, _Answer]:
        """The retry rule of one API call, for the sync and the async client alike: yields
        ("send", (method, target, headers, data, timeout)) and gets an _Outcome back, or
        ("sleep", seconds); returns the answer or raises IchidoError. ``body``: a dict, or a
        function of the elapsed ms (for waiting calls). ``retry``: True (safe to repeat),
        "unchanged" (only 503/429, answers that say nothing changed), False. ``deadline``: retry
        until then (monotonic) instead of max_attempts."""
        target = f"{self._prefix}/v1/ns/{urllib.parse.quote(self.ns, safe='')}{path}"
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            elapsed_ms = _ms(time.monotonic() - started)
            payload = body(elapsed_ms) if callable(body) else body
            timeout = self.timeout + max(0.0, wait - elapsed_ms / 1000)
            headers = {"Accept": "application/json", "User-Agent": "ichido-python/0.1.0"}
            if self.token:
                headers["Authorization"] = f"Bearer {self.token}"
            data = None
            if payload is not None:
                data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
                headers["Content-Type"] = "application/json"
            got: _Outcome = yield ("send", (method, target, headers, data, timeout))
            status, text, failure = got.status, got.text, got.failure
            answer: Any = None
            if failure is None:
                try:
                    answer = json.loads(text) if text else None
                except ValueError:
                    answer = None
                if 200 <= status < 300:
                    if not isinstance(answer, dict):
                        raise IchidoError(
                            "bad_answer", f"HTTP {status} from {self.url} is not JSON; is the url an ichido server?", status
                        )
                    out = _Answer(answer)
                    out.sent_at = got.sent_at
                    return out
            transient = failure is not None or status in _RETRYABLE_STATUS
            if retry is True:
                may_retry = transient
            elif retry == "unchanged":
                may_retry = status in (503, 429)
            else:
                may_retry = False
            base = backoff_base(attempt - 1)
            delay = max(base / 2 + random.random() * base / 2, got.retry_after)
            if deadline is not None:
                left = deadline - time.monotonic()
                in_time = left > 0.1
                delay = min(delay, left - 0.1)
            else:
                in_time = attempt < self.max_attempts
            reason = f"{type(failure).__name__}: {failure}" if failure is not None else f"HTTP {status}"
            if may_retry and in_time:
                if self.on_retry is not None:
                    self.on_retry(RetryInfo(call=f"{method} {path}", attempt=attempt + 1, delay=delay, reason=reason))
                yield ("sleep", delay)
                continue
            if failure is not None:
                raise IchidoError(
                    "unreachable",
                    f"no answer from ichido for {method} {path} after {attempt} attempt(s): {reason}",
                    0,
                ) from failure
            err = answer.get("error") if isinstance(answer, dict) else None
            if isinstance(err, dict):
                raise IchidoError(str(err.get("code")), str(err.get("message")), status, err.get("details") or {})
            raise IchidoError(f"http_{status}", f"HTTP {status}: {text[:200]}", status)


@dataclass(frozen=True)
class _Outcome:
    """What one attempt got: no answer (failure) or a status, its body and Retry-After."""

    sent_at: float
    status: int
    text: str
    retry_after: float
    failure: Optional[BaseException]


def _retry_after(value: Optional[str]) -> float:
    try:
        return float(value or 0)
    except ValueError:
        return 0.0


def _once_decorator(
    client: Callable[[], "Client"], key: Callable[..., str], options: Dict[str, Any]
) -> Callable[[Callable[..., Any]], Callable[..., Json]]:
    def decorate(fn: Callable[..., Any]) -> Callable[..., Json]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Json:
            k = key(*args, **kwargs)
            return client().once(str(k), lambda: fn(*args, **kwargs), **options)

        return wrapper

    return decorate


_default_client: Optional[Client] = None
_default_mu = threading.Lock()


def once(
    key: Callable[..., str],
    *,
    client: Optional[Client] = None,
    lease: float = 60.0,
    wait: float = 0.0,
    fingerprint: Optional[str] = None,
    owner: Optional[str] = None,
    max_attempts: Optional[int] = None,
) -> Callable[[Callable[..., Any]], Callable[..., Json]]:
    """``@ichido.once(key=lambda order: f"order-{order.id}")``: the decorated function runs once
    per key; later calls (any process, any machine) return the first call's stored result. Uses
    ``client``, else one Client() made from $ICHIDO_URL/$ICHIDO_TOKEN/$ICHIDO_NS at the first call."""

    def get() -> Client:
        global _default_client
        if client is not None:
            return client
        with _default_mu:
            if _default_client is None:
                _default_client = Client()
            return _default_client

    options: Dict[str, Any] = dict(lease=lease, wait=wait, fingerprint=fingerprint, owner=owner, max_attempts=max_attempts)
    return _once_decorator(get, key, options)


def _takes_an_argument(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [
        p
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        and p.default is inspect.Parameter.empty
    ]
    return len(positional) >= 1 or any(p.kind == inspect.Parameter.VAR_POSITIONAL for p in params)
