"""Type-checked (mypy --strict) like an application using the package: the public API's types must
be precise enough for it. Not a test module; test_packaging.py runs mypy over it."""

from __future__ import annotations

from typing import Dict, List

import ichido
from ichido import Client, IchidoError, IssuedNumber, LockTimeout, LockToken, OnceContext


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


def decorated(client: Client) -> object:
    @client.once(key=lambda order_id: f"order-{order_id}", lease=30)
    def mail(order_id: int) -> Dict[str, int]:
        return {"order": order_id}

    @ichido.once(key=lambda order_id: f"order-{order_id}")
    def mail_again(order_id: int) -> Dict[str, int]:
        return {"order": order_id}

    try:
        return [mail(1), mail_again(2)]
    except LockTimeout as e:
        holder: object = e.details.get("holder")
        return holder
