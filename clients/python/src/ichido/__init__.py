"""ichido: sequential numbers, locks with leases and exactly-once processing for business
automations, over ichido's HTTP API. Standard library only.

    from ichido import Client, IchidoError

    client = Client("https://ichido.example.com", token, "shop")   # or ICHIDO_URL/TOKEN/NS
    n = client.next_number("receipts", "form-response-123")        # n.formatted == "R-0001"
    with client.lock("ledger", wait=10, lease=30) as token:         # renewed in the background
        ...
    result = client.once("invoice-42", send_invoice)                # runs once; others get result
"""

from ._client import (
    Client,
    IchidoError,
    IssuedNumber,
    LockToken,
    OnceContext,
    RetryInfo,
    backoff_base,
)

__all__ = ["Client", "IchidoError", "IssuedNumber", "LockToken", "OnceContext", "RetryInfo", "backoff_base"]
__version__ = "0.1.0"
