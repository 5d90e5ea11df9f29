"""AsyncClient: the same calls and retry rules as Client, for asyncio applications (FastAPI,
aiohttp). Standard library only: HTTP/1.1 over asyncio streams, kept-alive connections reused,
leases renewed by a task. The retry rule is Client's own (_plan), driven with asyncio.sleep."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import json
import ssl
import time
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, List, Optional, Tuple, Union, overload

from ._client import (
    Client,
    IchidoError,
    IssuedNumber,
    Json,
    OnceContext,
    RetryInfo,
    _acquire_body,
    _Answer,
    _begin_body,
    _check_key,
    _check_name,
    _granted,
    _issued,
    _ms,
    _Outcome,
    _retry_after,
    _settled,
    _takes_an_argument,
    _unconfirmed,
)

_Conn = Tuple[asyncio.StreamReader, asyncio.StreamWriter]


class AsyncClient:
    """Client's calls as coroutines: ``await next_number(...)``, ``async with lock(...)``,
    ``await once(key, fn)`` (fn may be a coroutine function or a plain one), and the decorator
    ``@client.once(key=...)`` on ``async def`` functions. Arguments, defaults, errors and the
    retry rule are Client's. Use one AsyncClient per event loop; ``await aclose()`` at the end."""

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
        self._config = Client(url, token, ns, owner=owner, timeout=timeout, max_attempts=max_attempts, cafile=cafile, on_retry=on_retry)
        self.url = self._config.url
        self.ns = self._config.ns
        self.owner = self._config.owner
        self._idle: List[_Conn] = []

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for _, writer in idle:
            writer.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # --- the calls ------------------------------------------------------------------------------

    async def next_number(self, counter: str, key: str, *, note: Optional[str] = None) -> IssuedNumber:
        _check_name("counter", counter)
        _check_key("key", key)
        body: Dict[str, Any] = {"key": key} if note is None else {"key": key, "note": note}
        return _issued(await self._call("POST", f"/counters/{counter}/next", body, retry=True), key)

    @contextlib.asynccontextmanager
    async def lock(self, name: str, *, wait: float = 10.0, lease: float = 30.0, owner: Optional[str] = None) -> AsyncIterator[int]:
        """``async with client.lock(name) as token:``; the lease is renewed by a task every third
        of it; raises "lock_timeout", and "lock_lost" when a renewal found the lease lost."""
        number = _granted(name, wait, await self.acquire(name, wait=wait, lease=lease, owner=owner))
        lost = asyncio.Event()
        renewer = asyncio.ensure_future(self._renew_every(lease, lambda: self.renew_lock(name, number, lease=lease), "not_holder", lost))
        failed = False
        try:
            yield number
        except BaseException:
            failed = True
            raise
        finally:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer
            with contextlib.suppress(IchidoError):
                await self.release(name, number)
            if lost.is_set() and not failed:
                raise IchidoError("lock_lost", f"the lease of lock {name} (token {number}) was lost", details={"token": number})

    @overload
    async def once(self, key: str, fn: Callable[..., Any], *, lease: float = 60.0, wait: float = 0.0,
                   fingerprint: Optional[str] = None, owner: Optional[str] = None, max_attempts: Optional[int] = None) -> Json: ...

    @overload
    def once(self, key: Callable[..., str], fn: None = None, *, lease: float = 60.0, wait: float = 0.0,
             fingerprint: Optional[str] = None, owner: Optional[str] = None,
             max_attempts: Optional[int] = None) -> Callable[[Callable[..., Awaitable[Any]]], Callable[..., Awaitable[Json]]]: ...

    def once(self, key: Union[str, Callable[..., str]], fn: Optional[Callable[..., Any]] = None, **options: Any) -> Any:
        """``await once(key, fn)``, or ``@client.once(key=lambda order: ...)`` on an async def."""
        if fn is None:
            if not callable(key):
                raise IchidoError("invalid_argument", "once(key=...) as a decorator takes a function of the arguments that returns the key")
            key_of = key

            def decorate(f: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Json]]:
                @functools.wraps(f)
                async def wrapper(*args: Any, **kwargs: Any) -> Json:
                    return await self._once(str(key_of(*args, **kwargs)), lambda: f(*args, **kwargs), **options)

                return wrapper

            return decorate
        if not isinstance(key, str):
            raise IchidoError("invalid_argument", f"key must be a non-empty string that names the item (got {key!r})")
        return self._once(key, fn, **options)

    async def _once(self, key: str, fn: Callable[..., Any], *, lease: float = 60.0, wait: float = 0.0,
                    fingerprint: Optional[str] = None, owner: Optional[str] = None, max_attempts: Optional[int] = None) -> Json:
        claim = await self.begin(key, lease=lease, wait=wait, fingerprint=fingerprint, owner=owner, max_attempts=max_attempts)
        if _settled(key, claim):
            return claim.get("result")
        token = int(claim["token"])
        lost = asyncio.Event()
        lease_end = [claim.sent_at + lease]
        renewer = asyncio.ensure_future(self._renew_every(lease, lambda: self.renew_once(key, token, lease=lease), "stale_token", lost, lease_end))
        context = OnceContext(token=token, attempt=int(claim.get("attempt", 1)), lost=lost)  # type: ignore[arg-type]
        try:
            result = fn(context) if _takes_an_argument(fn) else fn()
            if inspect.isawaitable(result):
                result = await result
        except BaseException as e:
            renewer.cancel()
            with contextlib.suppress(IchidoError):
                await self.fail(key, token, f"{type(e).__name__}: {e}")
            raise
        renewer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewer
        stored = json.loads(json.dumps(result))
        await self.complete(key, token, stored, until=lease_end[0] - time.monotonic())
        return stored

    async def expired(self, limit: int = 100) -> List[Dict[str, Any]]:
        return await self.list_once("expired", limit)

    async def dead(self, limit: int = 100) -> List[Dict[str, Any]]:
        return await self.list_once("dead", limit)

    # --- the calls underneath -----------------------------------------------------------------

    async def acquire(self, name: str, *, wait: float = 0.0, lease: float = 30.0, owner: Optional[str] = None,
                      request_id: Optional[str] = None) -> _Answer:
        body = _acquire_body(name, owner or self.owner, lease, wait, request_id)
        return await self._call("POST", f"/locks/{name}/acquire", body, retry=True, wait=wait)

    async def release(self, name: str, token: int) -> _Answer:
        return await self._call("POST", f"/locks/{name}/release", {"token": int(token)}, retry="unchanged")

    async def renew_lock(self, name: str, token: int, *, lease: float = 30.0) -> _Answer:
        return await self._call("POST", f"/locks/{name}/renew", {"token": int(token), "lease_ms": _ms(lease)}, retry=True)

    async def begin(self, key: str, *, lease: float = 60.0, wait: float = 0.0, fingerprint: Optional[str] = None,
                    owner: Optional[str] = None, max_attempts: Optional[int] = None, request_id: Optional[str] = None) -> _Answer:
        body = _begin_body(key, owner or self.owner, lease, wait, fingerprint, max_attempts, request_id)
        return await self._call("POST", "/once/begin", body, retry=True, wait=wait)

    async def complete(self, key: str, token: int, result: Json = None, *, until: Optional[float] = None) -> _Answer:
        try:
            return await self._call("POST", "/once/complete", {"key": key, "token": int(token), "result": result},
                                    retry=True, deadline=None if until is None else time.monotonic() + until)
        except IchidoError as e:
            mapped = _unconfirmed(e, key, token, result)
            if mapped is e:
                raise
            raise mapped from e

    async def fail(self, key: str, token: int, error: str, *, retry: bool = True) -> _Answer:
        body = {"key": key, "token": int(token), "error": str(error)[:4000], "retry": retry}
        return await self._call("POST", "/once/fail", body, retry="unchanged")

    async def renew_once(self, key: str, token: int, *, lease: float = 60.0) -> _Answer:
        return await self._call("POST", "/once/renew", {"key": key, "token": int(token), "lease_ms": _ms(lease)}, retry=True)

    async def get_once(self, key: str) -> _Answer:
        return await self._call("GET", "/once?key=" + _quote(key), None, retry=True)

    async def list_once(self, state: str, limit: int = 100) -> List[Dict[str, Any]]:
        items: List[Dict[str, Any]] = (await self._call("GET", f"/once?state={_quote(state)}&limit={int(limit)}", None, retry=True))["items"]
        return items

    # --- plumbing --------------------------------------------------------------------------------

    async def _renew_every(self, lease: float, renew: Callable[[], Awaitable[Any]], lost_code: str,
                           lost: asyncio.Event, lease_end: Optional[List[float]] = None) -> None:
        every = max(0.2, lease / 3)
        end = time.monotonic() + lease
        while True:
            await asyncio.sleep(every)
            sent = time.monotonic()
            try:
                await renew()
                end = sent + lease
                if lease_end is not None:
                    lease_end[0] = end
            except IchidoError as e:
                if e.code == lost_code or time.monotonic() >= end:
                    lost.set()
                    return

    async def _call(self, method: str, path: str, body: Any, *, retry: Union[bool, str] = False,
                    wait: float = 0.0, deadline: Optional[float] = None) -> _Answer:
        plan = self._config._plan(method, path, body, retry=retry, wait=wait, deadline=deadline)
        step = next(plan)
        while True:
            if step[0] == "sleep":
                await asyncio.sleep(step[1])
                outcome: Any = None
            else:
                outcome = await self._send(*step[1])
            try:
                step = plan.send(outcome)
            except StopIteration as done:
                answer: _Answer = done.value
                return answer

    async def _send(self, method: str, target: str, headers: Dict[str, str], data: Optional[bytes], timeout: float) -> _Outcome:
        sent_at = time.monotonic()
        try:
            status, text, retry_after = await asyncio.wait_for(self._exchange(method, target, headers, data), timeout)
            return _Outcome(sent_at, status, text, retry_after, None)
        except (OSError, EOFError, ValueError, asyncio.TimeoutError, asyncio.IncompleteReadError) as e:
            return _Outcome(sent_at, 0, "", 0.0, e)

    async def _exchange(self, method: str, target: str, headers: Dict[str, str], data: Optional[bytes]) -> Tuple[int, str, float]:
        c = self._config
        host = f"{c._host}:{c._port}"
        head = f"{method} {target} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(data or b'')}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        reused = bool(self._idle)
        conn = self._idle.pop() if reused else await self._open()
        reader, writer = conn
        try:
            writer.write(head.encode("latin-1") + (data or b""))
            await writer.drain()
            status_line = await reader.readline()
            if not status_line and reused:  # the server closed the kept-alive connection: a fresh one
                writer.close()
                reader, writer = conn = await self._open()
                writer.write(head.encode("latin-1") + (data or b""))
                await writer.drain()
                status_line = await reader.readline()
            parts = status_line.decode("latin-1").split(" ", 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/"):
                raise EOFError(f"no HTTP answer ({status_line!r})")
            status = int(parts[1])
            fields: Dict[str, str] = {}
            while True:
                line = (await reader.readline()).decode("latin-1")
                if line in ("\r\n", "\n", ""):
                    break
                k, _, v = line.partition(":")
                fields[k.strip().lower()] = v.strip()
            if fields.get("transfer-encoding", "").lower() == "chunked":
                body = b""
                while True:
                    size = int((await reader.readline()).split(b";")[0], 16)
                    if size == 0:
                        await reader.readline()
                        break
                    body += await reader.readexactly(size)
                    await reader.readexactly(2)
            else:
                body = await reader.readexactly(int(fields.get("content-length", "0")))
        except BaseException:
            writer.close()
            raise
        if fields.get("connection", "").lower() == "close":
            writer.close()
        else:
            self._idle.append(conn)
        return status, body.decode("utf-8", errors="replace"), _retry_after(fields.get("retry-after"))

    async def _open(self) -> _Conn:
        c = self._config
        context: Optional[ssl.SSLContext] = c._ssl
        return await asyncio.open_connection(c._host, c._port, ssl=context, server_hostname=c._host if context else None)


def _quote(s: str) -> str:
    import urllib.parse

    return urllib.parse.quote(s, safe="")
