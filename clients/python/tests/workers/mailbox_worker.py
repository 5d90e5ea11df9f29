"""One shared-mailbox client (seed 002), as a process: handles every Message-ID in its own order
with once(), comes back to the ones another client holds, until all are done. The work appends
"client<TAB>Message-ID" to a ledger. With KILL_AT=N it prints KILLME when it starts the work for
its N-th mail and hangs until the test kills it."""
import json
import os
import random
import sys
import time

from ichido import Client, IchidoError

client_name, ids_file, ledger, seed = sys.argv[1:5]
with open(ids_file, encoding="utf-8") as f:
    ids = json.load(f)
random.Random(int(seed)).shuffle(ids)
client = Client(owner=client_name)
kill_at = int(os.environ.get("KILL_AT", "0"))
started = 0
results = {}


def process(message_id):
    global started
    started += 1
    if started == kill_at:
        print("KILLME " + json.dumps(message_id), flush=True)
        time.sleep(3600)
    with open(ledger, "a", encoding="utf-8") as f:
        f.write(f"{client_name}\t{message_id}\n")
    return {"by": client_name}


pending = ids
while pending:
    later = []
    for message_id in pending:
        try:
            results[message_id] = client.once(message_id, lambda: process(message_id), lease=1.5)
        except IchidoError as e:
            if e.code != "in_progress":
                raise
            later.append(message_id)
    pending = later
    if pending:
        time.sleep(0.2)
print(json.dumps({"done": len(results), "results": results}, ensure_ascii=False), flush=True)
