"""Type-checked (mypy --strict) like an application using the package: the public API's types must
be precise enough for it. Not a test module; test_packaging.py runs mypy over it."""

from __future__ import annotations

from typing import Dict, List

from ichido import Client, IchidoError, IssuedNumber, LockToken, OnceContext


def number(client: Client, response_id: str) -> str:
    n: IssuedNumber = client.next_number("receipts", f"form-{response_id}")
    value: int = n.value
    return n.formatted if value > 0 else ""


def guarded(client: Client) -> int:
    with client.lock("ledger", wait=10, lease=30) as token:
        assert isinstance(token, LockToken)
        token.check()
        return int(token) + 0


def send(context: OnceContext) -> Dict[str, int]:
    return {"attempt": context.attempt, "token": context.token}


def process(client: Client, message_id: str) -> object:
    try:
        return client.once(message_id, send, lease=60, wait=10)
    except IchidoError as e:
        code: str = e.code
        status: int = e.status
        return {"code": code, "status": status}


def stuck(client: Client) -> List[str]:
    return [str(item["key"]) for item in client.expired(50)]
