"""ichido: sequential numbers, locks with leases and exactly-once processing for business
automations, over ichido's HTTP API. Standard library only.

    from ichido import Client, IchidoError

    client = Client("https://ichido.example.com", token, "shop")   # or ICHIDO_URL/TOKEN/NS
    n = client.next_number("receipts", "form-response-123")        # n.formatted == "R-0001"
    with client.lock("ledger", wait=10, lease=30) as token:         # renewed in the background
        ...
    result = client.once("invoice-42", send_invoice)                # runs once; others get result

    @client.once(key=lambda order: f"order-{order.id}")              # the decorator form
    def send_order_mail(order): ...
"""

from ._async import AsyncClient
from ._client import (
    BadAnswer,
    Client,
    CompleteUnconfirmed,
    CounterExhausted,
    CounterExists,
    CounterNotFound,
    Dead,
    FingerprintMismatch,
    Forbidden,
    IchidoError,
    InProgress,
    InvalidArgument,
    InvalidRequest,
    KeyRequired,
    LockLost,
    LockTimeout,
    NotHolder,
    StaleToken,
    StoreUnavailable,
    TooManyWaiters,
    Unauthenticated,
    Unreachable,
    once,
    IssuedNumber,
    LockToken,
    OnceContext,
    RetryInfo,
    backoff_base,
)

__all__ = [
    "AsyncClient", "Client", "IchidoError", "IssuedNumber", "LockToken", "OnceContext", "RetryInfo", "backoff_base", "once",
    "CounterNotFound", "CounterExhausted", "CounterExists", "KeyRequired", "LockTimeout", "LockLost", "NotHolder", "InProgress", "Dead", "StaleToken", "FingerprintMismatch", "CompleteUnconfirmed", "Unreachable", "Unauthenticated", "Forbidden", "StoreUnavailable", "TooManyWaiters", "InvalidRequest", "InvalidArgument", "BadAnswer",
]
__version__ = "0.1.0"
