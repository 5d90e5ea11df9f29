# Issue 15, thirty-fourth step: once_records with and without a rowid under a W2-like load
# (docs/performance.md). Usage: python3 step34-without-rowid.py rowid,nrowid ROUNDS (writes $TMPDIR/wr-db-*).
import sqlite3, os, time, random, sys
COLS = """ns TEXT NOT NULL, key TEXT NOT NULL,
 state TEXT NOT NULL CHECK (state IN ('processing','pending','completed','dead')),
 owner TEXT NOT NULL, fingerprint TEXT, token INTEGER NOT NULL, attempt INTEGER NOT NULL,
 max_attempts INTEGER NOT NULL, lease_expires_at INTEGER NOT NULL, result TEXT, last_error TEXT NOT NULL,
 holder_done INTEGER NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, finished_at INTEGER"""
def schema(kind):
    if kind == 'rowid':
        t = f"CREATE TABLE once_records (id INTEGER PRIMARY KEY, {COLS}, UNIQUE (ns, key));"
    else:
        t = f"CREATE TABLE once_records ({COLS}, PRIMARY KEY (ns, key)) WITHOUT ROWID;"
    return t + """
CREATE INDEX once_ns_finished ON once_records (ns, finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX once_open ON once_records (ns, state, key) WHERE state <> 'completed';"""
def run(kind, prefill, pairs, path):
    for s in ('', '-wal', '-shm'):
        try: os.remove(path + s)
        except FileNotFoundError: pass
    db = sqlite3.connect(path, isolation_level=None)
    db.execute('PRAGMA journal_mode=WAL'); db.execute('PRAGMA synchronous=OFF')
    db.execute('PRAGMA wal_autocheckpoint=0')
    db.executescript(schema(kind))
    ins = "INSERT INTO once_records (ns,key,state,owner,fingerprint,token,attempt,max_attempts,lease_expires_at,result,last_error,holder_done,created_at,updated_at,finished_at) VALUES (?,?,'processing',?,NULL,?,1,3,?,NULL,'',0,?,?,NULL)"
    upd_r = "UPDATE once_records SET state='completed', result=?, holder_done=1, updated_at=?, finished_at=? WHERE id=? AND ns=? AND key=?"
    upd_k = "UPDATE once_records SET state='completed', result=?, holder_done=1, updated_at=?, finished_at=? WHERE ns=? AND key=?"
    db.execute('BEGIN')
    for i in range(prefill):
        c = i % 64
        k = f'o-prev-{c}-{i//64}'
        db.execute(ins, ('bench', k, 'w', i, 0, 0, 0))
        db.execute(upd_k, ('{"ok":true}', 0, 0, 'bench', k))
    db.execute('COMMIT')
    db.execute('PRAGMA wal_checkpoint(TRUNCATE)')
    # W2: 64 conns, each alternates begin/complete; batch = 24 ops from round-robin
    state = [0]*64; seq=[0]*64; rid=[0]*64
    order = list(range(64))
    ops = 0; commits = 0
    t0 = time.process_time()
    pos = 0
    frames0 = 0
    while ops < pairs*2:
        db.execute('BEGIN')
        for _ in range(24):
            c = order[pos % 64]; pos += 1
            k = f'o-run-{c}-{seq[c]}'
            if state[c] == 0:
                cur = db.execute(ins, ('bench', k, 'w', ops, 0, 0, 0))
                rid[c] = cur.lastrowid; state[c] = 1
            else:
                if kind == 'rowid': db.execute(upd_r, ('{"ok":true}', 1, 1, rid[c], 'bench', k))
                else: db.execute(upd_k, ('{"ok":true}', 1, 1, 'bench', k))
                state[c] = 0; seq[c] += 1
            ops += 1
        db.execute('COMMIT'); commits += 1
    t = time.process_time() - t0
    walsz = os.path.getsize(path + '-wal')
    frames = (walsz - 32) / (4096 + 24)
    print(f'{kind:6} prefill={prefill} ops={ops} us/op={t/ops*1e6:.2f} frames/commit={frames/commits:.1f} dbpages={os.path.getsize(path)//4096}')
    db.close()
kinds = sys.argv[1].split(',')
for r in range(int(sys.argv[2])):
    for k in (kinds if r % 2 == 0 else kinds[::-1]):
        run(k, 200000, 30000, os.path.join(os.environ.get("TMPDIR", "/tmp"), "wr-db-" + k))
