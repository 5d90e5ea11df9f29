#include "store/sqlite/schema.h"

#include <string>
#include <vector>

namespace ichido::store::sqlite {
namespace {

// Append-only: a released migration is never edited; fix forward with a new one.
const std::vector<const char*>& migrations() {
  static const std::vector<const char*> m = {
      // 1: counters, their per-period state and the audit trail of issued numbers.
      R"sql(
      CREATE TABLE counters (
        id INTEGER PRIMARY KEY,
        ns TEXT NOT NULL,
        name TEXT NOT NULL,
        start INTEGER NOT NULL,
        max INTEGER NOT NULL,
        format TEXT NOT NULL,
        period TEXT NOT NULL,
        timezone TEXT NOT NULL,
        require_key INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        UNIQUE (ns, name)
      );
      CREATE TABLE counter_periods (
        counter_id INTEGER NOT NULL REFERENCES counters(id),
        period TEXT NOT NULL,
        last_value INTEGER NOT NULL,
        issued_count INTEGER NOT NULL,
        voided_count INTEGER NOT NULL,
        PRIMARY KEY (counter_id, period)
      ) WITHOUT ROWID;
      CREATE TABLE issued (
        counter_id INTEGER NOT NULL REFERENCES counters(id),
        period TEXT NOT NULL,
        value INTEGER NOT NULL,
        formatted TEXT NOT NULL,
        key TEXT,
        note TEXT NOT NULL,
        issued_at INTEGER NOT NULL,
        voided_at INTEGER,
        void_reason TEXT NOT NULL,
        PRIMARY KEY (counter_id, period, value)
      ) WITHOUT ROWID;
      CREATE UNIQUE INDEX issued_by_key ON issued (counter_id, key) WHERE key IS NOT NULL;
      )sql",
      // 2: named durable sequences; 'token' feeds fencing tokens of locks and once records.
      R"sql(
      CREATE TABLE sequences (
        name TEXT PRIMARY KEY,
        value INTEGER NOT NULL
      ) WITHOUT ROWID;
      )sql",
      // 3: API tokens (hashes only) and the audit log.
      R"sql(
      CREATE TABLE tokens (
        id TEXT PRIMARY KEY,
        hash TEXT NOT NULL UNIQUE,
        role TEXT NOT NULL,
        scope TEXT NOT NULL,
        label TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER,
        revoked_at INTEGER
      ) WITHOUT ROWID;
      CREATE TABLE audit (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at INTEGER NOT NULL,
        actor TEXT NOT NULL,
        action TEXT NOT NULL,
        ns TEXT NOT NULL,
        status INTEGER NOT NULL,
        remote TEXT NOT NULL,
        detail TEXT NOT NULL
      );
      )sql",
      // 4: once records (core/once.h). A rowid table: results are up to 32 KiB of JSON.
      // finished_at is set exactly for completed and dead records (the retention purge's index).
      R"sql(
      CREATE TABLE once_records (
        id INTEGER PRIMARY KEY,
        ns TEXT NOT NULL,
        key TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('processing', 'pending', 'completed', 'dead')),
        owner TEXT NOT NULL,
        fingerprint TEXT,
        token INTEGER NOT NULL,
        attempt INTEGER NOT NULL,
        max_attempts INTEGER NOT NULL,
        lease_expires_at INTEGER NOT NULL,
        result TEXT,
        last_error TEXT NOT NULL,
        holder_done INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        finished_at INTEGER,
        UNIQUE (ns, key)
      );
      CREATE INDEX once_by_state ON once_records (ns, state, key);
      CREATE INDEX once_finished ON once_records (finished_at) WHERE finished_at IS NOT NULL;
      )sql",
      // 5 (locks): one row per lock with a holder, held or lapsed (core/lock.h). Self-contained:
      // it depends on no other migration but 1.
      R"sql(
      CREATE TABLE IF NOT EXISTS locks (
        ns TEXT NOT NULL,
        name TEXT NOT NULL,
        owner TEXT NOT NULL,
        token INTEGER NOT NULL,
        acquired_at INTEGER NOT NULL,
        lease_expires_at INTEGER NOT NULL,
        PRIMARY KEY (ns, name)
      ) WITHOUT ROWID;
      )sql",
      // 6 (request_id): the request_id of the claim that made a lock's grant or a once record's
      // latest acquisition, so a retried claim whose answer was lost is answered that grant again.
      R"sql(
      ALTER TABLE locks ADD COLUMN request_id TEXT;
      ALTER TABLE once_records ADD COLUMN request_id TEXT;
      )sql",
      // 7 (namespace settings): per-namespace once retention, and the index that lets the purge
      // go namespace by namespace (an upgrade builds it once, over the finished records only).
      R"sql(
      CREATE TABLE IF NOT EXISTS ns_settings (
        ns TEXT PRIMARY KEY,
        once_retention_ms INTEGER
      ) WITHOUT ROWID;
      CREATE INDEX IF NOT EXISTS once_ns_finished ON once_records (ns, finished_at)
        WHERE finished_at IS NOT NULL;
      )sql",
      // 8: once_finished has served no query since the purge goes namespace by namespace (7),
      // and every finished record paid one more b-tree insert for it.
      R"sql(
      DROP INDEX IF EXISTS once_finished;
      )sql",
      // 9: the CHECK on once_records.state as equalities joined by OR instead of IN (...): for an
      // IN list of more than two values SQLite builds an ephemeral b-tree every time the check
      // runs, i.e. on every insert and update of a once record (≈ 15 % of the instructions of a
      // once begin+complete, decision 131). Same rule, same rows, no table rebuild: the
      // procedure of SQLite's ALTER TABLE documentation for changing a CHECK constraint (the
      // schema cookie is bumped by migrate(), kRewritesSchema).
      R"sql(
      PRAGMA writable_schema = ON;
      UPDATE sqlite_schema
        SET sql = replace(sql,
          'CHECK (state IN (''processing'', ''pending'', ''completed'', ''dead''))',
          'CHECK (state = ''processing'' OR state = ''pending'' OR state = ''completed'' OR ' ||
            'state = ''dead'')')
        WHERE type = 'table' AND name = 'once_records';
      PRAGMA writable_schema = OFF;
      )sql",
      // 10: a grant or acquisition that a replay (request_id) answered is marked, so that the
      // undo of its gone first attempt leaves it to the retry (core L9 and O9, decision 135).
      // ADD COLUMN with a constant default rewrites no row.
      R"sql(
      ALTER TABLE locks ADD COLUMN replayed INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE once_records ADD COLUMN replayed INTEGER NOT NULL DEFAULT 0;
      )sql",
      // 11: the state index holds the open records only (decision 131). A completed record left
      // the processing part of once_by_state, a few hot pages, for a random page of its
      // completed part: one more page in the WAL per finished item, for an index that only the
      // completed list and count used. Both now go through the (ns, key) unique index. Every
      // query meant for once_open says `state <> 'completed'` word for word: that is what lets
      // SQLite use a partial index (sqlite_once_tables.cc). An upgrade builds it with one pass
      // over the table.
      R"sql(
      DROP INDEX IF EXISTS once_by_state;
      CREATE INDEX IF NOT EXISTS once_open ON once_records (ns, state, key)
        WHERE state <> 'completed';
      )sql",
      // 12: issued numbers' keys leave the unique index issued_by_key for the writer's key
      // index (decision 143; store/sqlite/key_index.h): every keyed row gets `kseq`, a stamp from
      // the sequence 'key' that only grows, and issued_by_kseq, appended to by every new key, is
      // what a lookup confirms a candidate through and what start-up catches up from. Uniqueness
      // of (counter_id, key) is from now on the writer's rule, and `ichido check` verifies it.
      // key_index_snapshot names the snapshot file (keys.idx) that matches this database. An
      // upgrade numbers the existing keyed rows in one pass in key order.
      R"sql(
      ALTER TABLE issued ADD COLUMN kseq INTEGER;
      UPDATE issued SET kseq = n.kseq
        FROM (SELECT counter_id AS c, period AS p, value AS v,
                     row_number() OVER (ORDER BY counter_id, key) AS kseq
                FROM issued WHERE key IS NOT NULL) AS n
        WHERE issued.counter_id = n.c AND issued.period = n.p AND issued.value = n.v;
      INSERT INTO sequences (name, value)
        SELECT 'key', COALESCE(MAX(kseq), 0) FROM issued WHERE true
        ON CONFLICT (name) DO UPDATE SET value = max(value, excluded.value);
      CREATE INDEX issued_by_kseq ON issued (kseq, counter_id, key) WHERE kseq IS NOT NULL;
      DROP INDEX issued_by_key;
      CREATE TABLE key_index_snapshot (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        snapshot_id INTEGER NOT NULL
      );
      )sql",
      // 13: the month a counter's fiscal year starts in (period 'fiscal_year'; NULL for every
      // other period). ADD COLUMN without a default rewrites no row.
      R"sql(
      ALTER TABLE counters ADD COLUMN fiscal_year_start INTEGER;
      )sql",
  };
  return m;
}

// Migrations that edit sqlite_schema directly (writable_schema): after them the schema cookie
// must be bumped so that every connection, this one included, reads the schema again.
constexpr int kRewritesSchema = 9;

}  // namespace

int current_schema_version() { return static_cast<int>(migrations().size()); }

Result<int> schema_version(Db& db) {
  auto exists = db.query(
      "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'");
  if (!exists.ok()) return std::move(exists).error();
  if (exists->step() != SQLITE_ROW) return db.error("read the schema");
  if (exists->int64(0) == 0) return 0;
  auto q = db.query("SELECT COALESCE(MAX(version), 0) FROM schema_version");
  if (!q.ok()) return std::move(q).error();
  if (q->step() != SQLITE_ROW) return db.error("read the schema version");
  return static_cast<int>(q->int64(0));
}

Result<void> migrate(Db& db, const OnUpgrade& on_upgrade) {
  const int target = current_schema_version();
  ICHIDO_TRY(
      db.exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL PRIMARY KEY, "
              "applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)",
              "create the schema version table"));
  // One migration per transaction. The version is read inside the (exclusive) write
  // transaction, so two processes opening a new data directory at once (the server and
  // `ichido token create`) cannot both apply the same migration.
  bool announced = false;
  for (;;) {
    ICHIDO_TRY(db.exec("BEGIN IMMEDIATE", "begin a migration"));
    auto step = [&]() -> Result<bool> {
      int version = 0;
      {
        auto q = db.query("SELECT COALESCE(MAX(version), 0) FROM schema_version");
        if (!q.ok()) return std::move(q).error();
        if (q->step() != SQLITE_ROW) return db.error("read the schema version");
        version = static_cast<int>(q->int64(0));
      }
      if (version > current_schema_version()) {
        return Error(errc::store_unavailable,
                     "The data directory was written by a newer ichido (schema " +
                         std::to_string(version) + "); run that version or newer.");
      }
      if (version >= target) return false;
      if (version > 0 && !announced && on_upgrade) on_upgrade(version, target);
      announced = true;
      ICHIDO_TRY(db.exec(migrations()[version], "apply a schema migration"));
      if (version + 1 == kRewritesSchema) {
        std::int64_t cookie = 0;
        {
          auto c = db.query("PRAGMA schema_version");  // reset when it goes out of scope
          if (!c.ok()) return std::move(c).error();
          if (c->step() != SQLITE_ROW) return db.error("read the schema cookie");
          cookie = c->int64(0);
        }
        const std::string bump = "PRAGMA schema_version = " + std::to_string(cookie + 1);
        ICHIDO_TRY(db.exec(bump.c_str(), "bump the schema cookie"));
      }
      auto q = db.query("INSERT INTO schema_version (version) VALUES (?)");
      if (!q.ok()) return std::move(q).error();
      ICHIDO_TRY(q->bind(1, std::int64_t{version + 1}).run("record the schema version"));
      return true;
    };
    auto more = step();
    if (!more.ok()) {
      (void)db.exec("ROLLBACK", "roll back a migration");
      return std::move(more).error();
    }
    ICHIDO_TRY(db.exec("COMMIT", "commit a migration"));
    if (!*more) return {};
  }
}

}  // namespace ichido::store::sqlite
