#!/usr/bin/env python3
"""Seed 002 in Python: several machines watch one shared mailbox and each mail is handled exactly
once, keyed by its Message-ID (which may hold <, @, /, +, spaces and Japanese). A machine that dies
mid-way loses its claim when the lease lapses, and the next pass (here or elsewhere) takes the mail
over. Run it from cron or a loop on every machine:

    export ICHIDO_URL=https://ichido.example.com ICHIDO_TOKEN=<writer token> ICHIDO_NS=mailbox
    python3 mailbox_once.py --maildir /srv/shared/support --ledger /srv/shared/handled.csv
    python3 mailbox_once.py --imap imap.example.co.jp --user support --password-env IMAP_PASSWORD \
        --ledger handled.csv
    python3 mailbox_once.py --imap outlook.office365.com --user support@example.co.jp \
        --oauth-token-env IMAP_ACCESS_TOKEN --ledger handled.csv      # Exchange Online

Old mail is never handled again: only mails delivered in the last --days days (7; fewer than the
30 days ichido keeps a completed record, so a mail whose record was purged is never looked at),
and none delivered before the first run: that run records its time in --state (default
LEDGER.since) and leaves the mails already there alone, unless --since DATE says from when.

Exchange Online does not accept passwords for IMAP (basic authentication is off): give an OAuth
2.0 access token for https://outlook.office365.com/.default (an app registration with the
IMAP.AccessAsApp permission and access to the mailbox; get it with your tenant's tooling) in the
environment variable named by --oauth-token-env, which logs in with XOAUTH2; or read the mailbox
with Microsoft Graph instead.

The work here appends "Message-ID,Subject,machine" to the ledger CSV; put the real work (forward
to the ticket system, save attachments) in handle(). Needs the ichido package
(pip install ./clients/python). Tested in make test with a Maildir; the IMAP path uses only
imaplib's standard calls (BODY.PEEK, so mails stay unread) and was not run against a server.
"""

import argparse
import csv
import datetime
import email
import email.header
import email.message
import imaplib
import mailbox
import os
import socket
import sys
import time
from typing import Iterator, Optional, Tuple

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


def maildir_messages(path: str, cutoff: float) -> Iterator[Tuple[str, str]]:
    for msg in mailbox.Maildir(path, factory=None, create=False):
        if msg.get_date() >= cutoff:  # the delivery time
            yield raw_header(msg, "Message-ID"), subject_of(msg)


def xoauth2(user: str, token: str) -> bytes:
    """The XOAUTH2 initial response (RFC 7628 style, as Microsoft and Google take it)."""
    return f"user={user}\x01auth=Bearer {token}\x01\x01".encode()


def imap_messages(host: str, user: str, password: Optional[str], token: Optional[str], folder: str,
                  cutoff: float, port: int = 993) -> Iterator[Tuple[str, str]]:
    with imaplib.IMAP4_SSL(host, port) as imap:
        if token is not None:
            imap.authenticate("XOAUTH2", lambda _: xoauth2(user, token))
        else:
            imap.login(user, password or "")
        imap.select(folder, readonly=True)
        # SINCE is a date (no time): the day of the cutoff; the Maildir path compares exactly.
        _, data = imap.search(None, "SINCE", time.strftime("%d-%b-%Y", time.localtime(cutoff)))
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
    p.add_argument("--oauth-token-env", help="IMAP: log in with XOAUTH2, the access token in this environment variable")
    p.add_argument("--days", type=float, default=7.0, help="look only at mails delivered in the last DAYS days (7)")
    p.add_argument("--since", help="the first run: handle mails delivered since this date (YYYY-MM-DD[THH:MM]) instead of none")
    p.add_argument("--state", help="where the first run's time is kept (default: LEDGER.since)")
    args = p.parse_args()
    state = args.state or args.ledger + ".since"
    if args.since:
        since = datetime.datetime.fromisoformat(args.since).timestamp()
        with open(state, "w", encoding="utf-8") as f:
            f.write(f"{since}\n")
    elif os.path.exists(state):
        with open(state, encoding="utf-8") as f:
            since = float(f.read().strip())
    else:
        since = time.time()
        with open(state, "w", encoding="utf-8") as f:
            f.write(f"{since}\n")
        print(f"first run: the mails already in the mailbox are left alone (kept in {state}; --since DATE to handle older ones)", file=sys.stderr)
    cutoff = max(since, time.time() - args.days * 86400)
    client = Client()
    machine = socket.gethostname()

    def handle(message_id: str, subject: str) -> dict:
        with open(args.ledger, "a", newline="", encoding="utf-8") as f:
            csv.writer(f).writerow([message_id, subject, machine])
        return {"handled_by": machine}

    def messages() -> Iterator[Tuple[str, str]]:
        if args.maildir:
            return maildir_messages(args.maildir, cutoff)
        token = os.environ[args.oauth_token_env] if args.oauth_token_env else None
        password = None if token is not None else os.environ[args.password_env]
        return imap_messages(args.imap, args.user, password, token, args.folder, cutoff)

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
