"""One execution for one AppSheet row (seed 001), as a process. Prints one JSON line: the result of
once() or the error. With CRASH=1 it hangs in the middle of the work (after numbering the invoice,
before "sending" it) until the test kills it."""
import json
import os
import sys
import time

from ichido import Client, IchidoError

row_id, ledger = sys.argv[1], sys.argv[2]
client = Client(owner=f"bot-{os.getpid()}")  # ICHIDO_URL / ICHIDO_TOKEN / ICHIDO_NS


def send_invoice():
    invoice = client.next_number("invoices", f"appsheet-row-{row_id}")
    if os.environ.get("CRASH") == "1":
        print(json.dumps({"working": True, "invoice": invoice.formatted}), flush=True)
        time.sleep(3600)
    with open(ledger, "a", encoding="utf-8") as f:
        f.write(f"{invoice.formatted}\tsent for row {row_id}\n")
    return {"invoiceNo": invoice.formatted, "invoiceReplayed": invoice.replayed}


try:
    print(json.dumps({"result": client.once(f"appsheet-row-{row_id}", send_invoice, lease=1.5, wait=20)}), flush=True)
except IchidoError as e:
    print(json.dumps({"error": e.code, "message": e.message}), flush=True)
    sys.exit(1)
