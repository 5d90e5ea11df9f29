#!/usr/bin/env python3
"""Seed 002 in Python: several machines watch one shared mailbox and each mail is handled exactly
once, keyed by its Message-ID (which may hold <, @, /, +, spaces and Japanese). A machine that dies
mid-way loses its claim when the lease lapses, and the next pass (here or elsewhere) takes the mail
over. Run it from cron or a loop on every machine:

    export ICHIDO_URL=https://ichido.example.com ICHIDO_TOKEN=<writer token> ICHIDO_NS=mailbox
    python3 mailbox_once.py --maildir /srv/shared/support --ledger /srv/shared/handled.csv
    python3 mailbox_once.py --imap imap.example.co.jp --user support --password-env IMAP_PASSWORD \
        --ledger handled.csv

The work here appends "Message-ID,Subject,machine" to the ledger CSV; put the real work (forward
to the ticket system, save attachments) in handle(). Needs the ichido package
(pip install ./clients/python). Tested in make test with a Maildir; the IMAP path uses only
imaplib's standard calls (BODY.PEEK, so mails stay unread) and was not run against a server.
"""

import argparse
import csv
import email
import email.header
import email.message
import imaplib
import mailbox
import os
import socket
import sys
import time
from typing import Iterator, Tuple

from ichido import Client, IchidoError


def raw_header(msg: email.message.Message, name: str) -> str:
    """A header as it was written: the Message-ID must be the same text on every machine (as
    Outlook's PR_INTERNET_MESSAGE_ID is), so it is not parsed; UTF-8 bytes (RFC 6532) are decoded."""
    value = next((v for k, v in msg.raw_items() if k.lower() == name.lower()), "")
    if not isinstance(value, str):
        return str(value).strip()
    try:
        value = value.encode("ascii", "surrogateescape").decode("utf-8")
    except UnicodeError:
        pass
    return " ".join(value.split())  # unfolded


def subject_of(msg: email.message.Message) -> str:
    return str(email.header.make_header(email.header.decode_header(raw_header(msg, "Subject"))))


def maildir_messages(path: str) -> Iterator[Tuple[str, str]]:
    for msg in mailbox.Maildir(path, factory=None, create=False):
        yield raw_header(msg, "Message-ID"), subject_of(msg)


def imap_messages(host: str, user: str, password: str, folder: str) -> Iterator[Tuple[str, str]]:
    with imaplib.IMAP4_SSL(host) as imap:
        imap.login(user, password)
        imap.select(folder, readonly=True)
        _, data = imap.search(None, "ALL")
        for num in data[0].split():
            _, parts = imap.fetch(num, "(BODY.PEEK[HEADER.FIELDS (MESSAGE-ID SUBJECT)])")
            header = email.message_from_bytes(parts[0][1])
            yield raw_header(header, "Message-ID"), subject_of(header)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--maildir")
    src.add_argument("--imap", metavar="HOST")
    p.add_argument("--user")
    p.add_argument("--password-env", default="IMAP_PASSWORD")
    p.add_argument("--folder", default="INBOX")
    p.add_argument("--ledger", required=True)
    p.add_argument("--lease", type=float, default=300.0, help="seconds a claim lasts if this machine dies")
    p.add_argument("--until-done", action="store_true", help="come back to mails others hold until all are done")
    args = p.parse_args()
    client = Client()
    machine = socket.gethostname()

    def handle(message_id: str, subject: str) -> dict:
        with open(args.ledger, "a", newline="", encoding="utf-8") as f:
            csv.writer(f).writerow([message_id, subject, machine])
        return {"handled_by": machine}

    def messages() -> Iterator[Tuple[str, str]]:
        if args.maildir:
            return maildir_messages(args.maildir)
        return imap_messages(args.imap, args.user, os.environ[args.password_env], args.folder)

    while True:
        busy = 0
        for message_id, subject in messages():
            if not message_id:
                continue  # drafts and some system mails have none
            try:
                client.once(message_id, lambda: handle(message_id, subject), lease=args.lease)
            except IchidoError as e:
                if e.code == "in_progress":
                    busy += 1
                elif e.code == "dead":
                    print(f"{message_id}: failed too often ({e.details.get('last_error')}); an admin resets it", file=sys.stderr)
                else:
                    raise
        if busy == 0 or not args.until_done:
            return 0
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(main())
