#!/usr/bin/env python3
"""Seed 000 in Python: receipt numbers for form responses exported as CSV, from many threads (or
machines) at once. Each response is numbered with its id as the key, so running this again — after
a crash, on another machine, on an overlapping export — gives every response the same number;
no number is issued twice or skipped.

    export ICHIDO_URL=https://ichido.example.com ICHIDO_TOKEN=<writer token> ICHIDO_NS=forms
    ichido counter create receipts --ns forms --max 9999 --format 'R-{seq:4}' --require-key   # once, admin
    python3 receipt_numbers.py responses.csv numbered.csv --id-column response_id

Writes numbered.csv: the input's columns plus "receipt". The rows are numbered one after the
other, so the numbers follow the rows' order (R-0001 for the first new row); --threads N is
faster for large files, but then the numbers follow the order the calls finish in. Needs the
ichido package (pip install ./clients/python).
"""

import argparse
import csv
import sys
from concurrent.futures import ThreadPoolExecutor

from ichido import Client, IchidoError


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("responses", help="CSV with a header row")
    p.add_argument("output", help="CSV to write, with a receipt column added")
    p.add_argument("--id-column", default="response_id", help="the column that identifies a response")
    p.add_argument("--counter", default="receipts")
    p.add_argument("--threads", type=int, default=1,
                   help="calls at once (default 1: numbers in row order; more is faster, but then the "
                   "numbers follow the order the calls finish in, not the rows')")
    args = p.parse_args()

    with open(args.responses, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if rows and args.id_column not in rows[0]:
        print(f"no column {args.id_column!r} in {args.responses}", file=sys.stderr)
        return 2
    client = Client()

    def number(row: dict) -> str:
        return client.next_number(args.counter, "form-" + row[args.id_column]).formatted

    try:
        with ThreadPoolExecutor(max_workers=args.threads) as pool:
            receipts = list(pool.map(number, rows))
    except IchidoError as e:
        print(f"stopped: {e} (run it again: numbered responses keep their numbers)", file=sys.stderr)
        return 1
    with open(args.output, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=[*(rows[0].keys() if rows else [args.id_column]), "receipt"])
        w.writeheader()
        for row, receipt in zip(rows, receipts):
            w.writerow({**row, "receipt": receipt})
    return 0


if __name__ == "__main__":
    sys.exit(main())
