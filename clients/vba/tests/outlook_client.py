"""One Outlook client on the shared mailbox (seed 002), running examples/shared-mailbox's VBA in
the interpreter: every mail of the inbox arrives as an ItemAdd event (HandleSharedMail), then
RetryPending passes run (as from a reminder) until ichido has every mail completed. A forward that
is sent appends "client<TAB>Message-ID" to the ledger. With KILL_AT=N the client prints KILLME when
it sends its N-th forward and hangs there until the test kills the process.

usage: outlook_client.py CLIENT IDS_JSON LEDGER SEED   (ICHIDO_URL, ICHIDO_TOKEN in the environment)
"""

import json
import os
import random
import sys
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import vba  # noqa: E402
from fakes import Items, MailItem  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
client, ids_file, ledger, seed = sys.argv[1:5]
with open(ids_file, encoding="utf-8") as f:
    ids = json.load(f)
random.Random(int(seed)).shuffle(ids)
kill_at = int(os.environ.get("KILL_AT", "0"))
sent = 0


def on_send(mail):
    global sent
    sent += 1
    if sent == kill_at:
        print("KILLME " + json.dumps(vba.py_str(mail.original.message_id)), flush=True)
        time.sleep(3600)
    with open(ledger, "a", encoding="utf-8") as f:
        f.write(f"{client}\t{vba.py_str(mail.original.message_id)}\n")


project = vba.Project(
    [os.path.join(REPO, "clients", "vba", "IchidoJson.bas"), os.path.join(REPO, "clients", "vba", "Ichido.bas"),
     os.path.join(REPO, "examples", "shared-mailbox", "SharedMailbox.bas")],
    environ={"COMPUTERNAME": "PC-" + client, "USERNAME": client},
)
# The example's lease is 5 minutes; the test shortens the constant (as one would for a trial run).
project.const_values[("sharedmailbox", "lease_ms")] = int(os.environ.get("LEASE_MS", "300000"))
project.settings[("ichido", "connection", "url")] = os.environ["ICHIDO_URL"]
project.settings[("ichido", "connection", "token")] = os.environ["ICHIDO_TOKEN"]
# Set up before the mails arrived: SetProcessSince an hour ago (the first run would leave them alone).
project.call("SetProcessSince", vba.ole_date(__import__("datetime").datetime.now()) - 1 / 24)
mails = [MailItem(vba.vba_str(i), f"mail {n}", on_send) for n, i in enumerate(ids)]
project.call("ConnectIchido")
for mail in mails:  # Outlook's ItemAdd, once per new mail
    project.call("HandleNewMail", mail)


def all_completed():
    for i in ids:
        url = os.environ["ICHIDO_URL"] + "/v1/ns/mailbox/once?key=" + urllib.parse.quote(i, safe="")
        req = urllib.request.Request(url, headers={"Authorization": "Bearer " + os.environ["ICHIDO_TOKEN"]})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                if json.load(r)["state"] != "completed":
                    return False
        except urllib.error.HTTPError:
            return False
    return True


while not all_completed():
    time.sleep(0.3)
    project.call("RetryPending", Items(mails))
print(json.dumps({"client": client, "debug": project.debug}, ensure_ascii=False), flush=True)
