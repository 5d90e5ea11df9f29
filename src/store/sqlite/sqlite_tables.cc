#include "store/sqlite/sqlite_tables.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "store/sqlite/rows.h"

namespace ichido::store::sqlite {
namespace {

#define COUNTER_COLUMNS                                                           \
  "id, ns, name, start, max, format, period, timezone, require_key, created_at, " \
  "fiscal_year_start"
#define ISSUED_COLUMNS "period, value, formatted, key, note, issued_at, voided_at, void_reason"

Result<CounterRow> counter_from(const Query& q) {
  CounterRow r;
  r.id = q.int64(0);
  r.ns = q.text(1);
  r.name = q.text(2);
  r.config.start = q.int64(3);
  r.config.max = q.int64(4);
  r.config.format = q.text(5);
  auto period = core::parse_period(q.text(6));
  if (!period.ok()) {
    return Error(errc::store_unavailable, "The store holds a counter with an unknown period.");
  }
  r.config.period = *period;
  r.config.timezone = q.text(7);
  r.config.require_key = q.int64(8) != 0;
  r.created_at = q.int64(9);
  r.config.fiscal_year_start = static_cast<int>(q.opt_int64(10).value_or(0));
  return r;
}

core::IssuedNumber issued_from(const Query& q) {
  core::IssuedNumber r;
  r.period = q.text(0);
  r.value = q.int64(1);
  r.formatted = q.text(2);
  r.key = q.opt_text(3);
  r.note = q.text(4);
  r.issued_at = q.int64(5);
  r.voided_at = q.opt_int64(6);
  r.void_reason = q.text(7);
  return r;
}

// Binds ?1 … ?9 of a statement on issued: the counter's id, then ISSUED_COLUMNS in their order.
void bind_issued(Query& q, std::int64_t counter_id, const core::IssuedNumber& r) {
  q.bind(1, counter_id).bind(2, r.period).bind(3, r.value).bind(4, r.formatted).bind(5, r.key);
  q.bind(6, r.note).bind(7, r.issued_at).bind(8, r.voided_at).bind(9, r.void_reason);
}

}  // namespace

Result<std::int64_t> SqliteTables::deferred_value(const char* name, WriterCache::Sequence* seq) {
  if (!seq->value) {
    auto value = sequence_value(name);
    if (!value.ok()) return std::move(value).error();
    seq->value = *value;
  }
  return *seq->value;
}

Result<std::int64_t> SqliteTables::draw(const char* name, WriterCache::Sequence* seq) {
  if (cache_ && cache_->defer_writes) {
    ICHIDO_TRY(deferred_value(name, seq));
    seq->dirty = true;
    ++cache_->deferred_writes;
    return ++*seq->value;
  }
  auto q = db_.query(
      "INSERT INTO sequences (name, value) VALUES (?, 1) "
      "ON CONFLICT (name) DO UPDATE SET value = value + 1 RETURNING value");
  if (!q.ok()) return std::move(q).error();
  q->bind(1, std::string_view(name));
  if (q->step() != SQLITE_ROW) return db_.error("advance a sequence");
  return q->int64(0);
}

Result<std::int64_t> SqliteTables::sequence_value(const char* name) {
  auto q = db_.query("SELECT value FROM sequences WHERE name = ?");
  if (!q.ok()) return std::move(q).error();
  q->bind(1, std::string_view(name));
  const int rc = q->step();
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return db_.error("read a sequence");
  return rc == SQLITE_ROW ? q->int64(0) : 0;
}

// The row's value + 1; in an optimistic batch the value as this batch's draws left it (draw).
Result<std::int64_t> SqliteTables::peek_token() {
  auto value = cache_ && cache_->defer_writes ? deferred_value("token", &cache_->token_)
                                              : sequence_value("token");
  if (!value.ok()) return std::move(value).error();
  return *value + 1;
}

Result<std::int64_t> SqliteTables::next_token() {
  auto token = draw("token", cache_ ? &cache_->token_ : nullptr);
  if (token.ok() && cache_) cache_->drawn_token = std::max(cache_->drawn_token, *token);
  return token;
}

Result<std::int64_t> SqliteTables::next_kseq() {
  auto kseq = draw("key", cache_ ? &cache_->kseq_ : nullptr);
  if (kseq.ok() && cache_) cache_->drew_kseq = true;
  return kseq;
}

Result<std::optional<CounterRow>> SqliteTables::find_counter(const std::string& ns,
                                                             const std::string& name) {
  std::string key;
  if (cache_) {
    key = row_key(ns, name);
    if (auto it = cache_->counters_.find(key); it != cache_->counters_.end()) {
      return std::optional<CounterRow>(it->second);
    }
  }
  auto q = db_.query("SELECT " COUNTER_COLUMNS " FROM counters WHERE ns = ? AND name = ?");
  if (q.ok()) q->bind(1, ns).bind(2, name);
  auto row = one<CounterRow>(db_, std::move(q), counter_from, "read a counter");
  if (cache_ && row.ok() && *row) WriterCache::put(cache_->counters_, std::move(key), **row);
  return row;
}

Result<std::int64_t> SqliteTables::insert_counter(const CounterRow& r) {
  auto q = db_.query(
      "INSERT INTO counters (ns, name, start, max, format, period, timezone, require_key, "
      "created_at, fiscal_year_start) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!q.ok()) return std::move(q).error();
  q->bind(1, r.ns).bind(2, r.name).bind(3, r.config.start).bind(4, r.config.max);
  q->bind(5, r.config.format).bind(6, core::to_string(r.config.period));
  q->bind(7, r.config.timezone).bind(8, std::int64_t{r.config.require_key}).bind(9, r.created_at);
  q->bind(10, r.config.fiscal_year_start != 0
                  ? std::optional<std::int64_t>(r.config.fiscal_year_start)
                  : std::nullopt);
  ICHIDO_TRY(q->run("create a counter"));
  const auto id = static_cast<std::int64_t>(sqlite3_last_insert_rowid(db_.raw()));
  if (cache_) {
    CounterRow stored = r;
    stored.id = id;
    WriterCache::put(cache_->counters_, row_key(r.ns, r.name), std::move(stored));
  }
  return id;
}

Result<std::vector<CounterRow>> SqliteTables::list_counters(const std::string& ns) {
  auto q = db_.query("SELECT " COUNTER_COLUMNS " FROM counters WHERE ns = ? ORDER BY name");
  if (q.ok()) q->bind(1, ns);
  return many<CounterRow>(db_, std::move(q), counter_from, "list counters");
}

Result<std::optional<PeriodRow>> SqliteTables::find_period(std::int64_t id,
                                                           const std::string& period) {
  std::string key;
  if (cache_) {
    key = row_key(std::to_string(id), period);
    if (auto it = cache_->pending_periods_.find(key); it != cache_->pending_periods_.end()) {
      return std::optional<PeriodRow>(it->second.row);
    }
    if (auto it = cache_->periods_.find(key); it != cache_->periods_.end()) {
      return std::optional<PeriodRow>(it->second);
    }
  }
  auto q = db_.query(
      "SELECT last_value, issued_count, voided_count FROM counter_periods "
      "WHERE counter_id = ? AND period = ?");
  if (q.ok()) q->bind(1, id).bind(2, period);
  auto row = one<PeriodRow>(
      db_, std::move(q),
      [](const Query& r) { return PeriodRow{r.int64(0), r.int64(1), r.int64(2)}; },
      "read a counter period");
  if (cache_ && row.ok() && *row) WriterCache::put(cache_->periods_, std::move(key), **row);
  return row;
}

Result<void> SqliteTables::save_period(std::int64_t id, const std::string& period,
                                       const PeriodRow& row) {
  if (cache_ && cache_->defer_writes) {
    ++cache_->deferred_writes;
    auto [it, fresh] = cache_->pending_periods_.try_emplace(
        row_key(std::to_string(id), period), WriterCache::PendingPeriod{id, period, row});
    if (!fresh) it->second.row = row;
    return {};
  }
  return write_period(id, period, row);
}

Result<void> SqliteTables::flush_writes() {
  if (!cache_) return {};
  auto pending = std::move(cache_->pending_periods_);
  cache_->pending_periods_.clear();
  for (const auto& [key, p] : pending) {
    ICHIDO_TRY(write_period(p.counter_id, p.period, p.row));
  }
  ICHIDO_TRY(flush_sequence("token", cache_->token_));
  return flush_sequence("key", cache_->kseq_);
}

Result<void> SqliteTables::flush_sequence(const char* name, WriterCache::Sequence& seq) {
  if (!seq.dirty) return {};
  auto q = db_.query(
      "INSERT INTO sequences (name, value) VALUES (?1, ?2) "
      "ON CONFLICT (name) DO UPDATE SET value = excluded.value");
  if (!q.ok()) return std::move(q).error();
  q->bind(1, std::string_view(name)).bind(2, *seq.value);
  ICHIDO_TRY(q->run("advance a sequence"));
  seq.dirty = false;
  return {};
}

Result<void> SqliteTables::write_period(std::int64_t id, const std::string& period,
                                        const PeriodRow& row) {
  auto q = db_.query(
      "INSERT INTO counter_periods (counter_id, period, last_value, issued_count, voided_count) "
      "VALUES (?, ?, ?, ?, ?) ON CONFLICT (counter_id, period) DO UPDATE SET "
      "last_value = excluded.last_value, issued_count = excluded.issued_count, "
      "voided_count = excluded.voided_count");
  if (!q.ok()) return std::move(q).error();
  q->bind(1, id).bind(2, period).bind(3, row.last_value).bind(4, row.issued_count);
  q->bind(5, row.voided_count);
  ICHIDO_TRY(q->run("save a counter period"));
  if (cache_) WriterCache::put(cache_->periods_, row_key(std::to_string(id), period), row);
  return {};
}

Result<std::optional<core::IssuedNumber>> SqliteTables::find_issued_by_key(std::int64_t id,
                                                                           const std::string& key) {
  if (!keys_) {
    auto q = db_.query("SELECT " ISSUED_COLUMNS " FROM issued WHERE counter_id = ? AND key = ?");
    if (q.ok()) q->bind(1, id).bind(2, key);
    return one<core::IssuedNumber>(db_, std::move(q), issued_from, "look up an idempotency key");
  }
  char scope[8];
  return find_issued_by_hash(id, key, keys_->hash(KeyKind::number, counter_scope(id, scope), key));
}

Result<std::optional<core::IssuedNumber>> SqliteTables::find_issued_by_hash(std::int64_t id,
                                                                            const std::string& key,
                                                                            std::uint64_t hash) {
  std::optional<core::IssuedNumber> found;
  std::optional<Error> failed;
  // A candidate is confirmed by its row: the one with that kseq, of this counter, with this key.
  // A slot whose row this connection's snapshot does not show is no match (not committed yet for
  // this reader, or a rolled-back batch's that is waiting to be removed).
  keys_->find(hash, [&](std::uint64_t kseq) {
    auto q = db_.query("SELECT " ISSUED_COLUMNS ", counter_id FROM issued WHERE kseq = ?");
    if (!q.ok()) {
      failed = std::move(q).error();
      return true;  // stop probing: the answer is the error
    }
    q->bind(1, static_cast<std::int64_t>(kseq));
    const int rc = q->step();
    if (rc == SQLITE_DONE) return false;
    if (rc != SQLITE_ROW) {
      failed = db_.error("look up an idempotency key");
      return true;
    }
    if (q->int64(8) != id || q->opt_text(3) != key) return false;
    found = issued_from(*q);
    return true;
  });
  if (failed) return std::move(*failed);
  return found;
}

Result<std::optional<core::IssuedNumber>> SqliteTables::find_issued(std::int64_t id,
                                                                    const std::string& period,
                                                                    std::int64_t value) {
  auto q = db_.query("SELECT " ISSUED_COLUMNS
                     " FROM issued WHERE counter_id = ? AND period = ? AND value = ?");
  if (q.ok()) q->bind(1, id).bind(2, period).bind(3, value);
  return one<core::IssuedNumber>(db_, std::move(q), issued_from, "read an issued number");
}

Result<std::optional<std::int64_t>> SqliteTables::highest_issued(std::int64_t id,
                                                                 const std::string& period) {
  auto q = db_.query("SELECT MAX(value) FROM issued WHERE counter_id = ? AND period = ?");
  if (!q.ok()) return std::move(q).error();
  q->bind(1, id).bind(2, period);
  if (q->step() != SQLITE_ROW) return db_.error("read the highest issued number");
  return q->opt_int64(0);
}

Result<void> SqliteTables::save_issued(std::int64_t id, const core::IssuedNumber& r) {
  if (r.key) {
    // A keyed number is inserted only by insert_issued_unless_key, which gives it its kseq and
    // slot; here it can only be changed (a void), and its key stays.
    auto q = db_.query(
        "UPDATE issued SET formatted = ?4, note = ?6, issued_at = ?7, voided_at = ?8, "
        "void_reason = ?9 WHERE counter_id = ?1 AND period = ?2 AND value = ?3 AND key = ?5");
    if (!q.ok()) return std::move(q).error();
    bind_issued(*q, id, r);
    ICHIDO_TRY(q->run("record an issued number"));
    if (sqlite3_changes(db_.raw()) == 0) {
      return Error(errc::internal,
                   "A number with a key was to be saved where no number has that key; nothing "
                   "was changed.");
    }
    return {};
  }
  // An upsert on the primary key, as the PostgreSQL store does, not INSERT OR REPLACE: a REPLACE
  // on a table with foreign keys may delete rows, so SQLite gives it a statement journal (a copy
  // of every page it touches); this one needs none.
  auto q = db_.query("INSERT INTO issued (counter_id, " ISSUED_COLUMNS
                     ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                     "ON CONFLICT (counter_id, period, value) DO UPDATE SET "
                     "formatted = excluded.formatted, note = excluded.note, "
                     "issued_at = excluded.issued_at, voided_at = excluded.voided_at, "
                     "void_reason = excluded.void_reason WHERE key IS NULL");
  if (!q.ok()) return std::move(q).error();
  bind_issued(*q, id, r);
  ICHIDO_TRY(q->run("record an issued number"));
  if (sqlite3_changes(db_.raw()) == 0) {
    return Error(errc::internal,
                 "A number without a key was to replace one with a key; nothing was changed.");
  }
  return {};
}

Result<bool> SqliteTables::insert_issued_unless_key(std::int64_t id, const core::IssuedNumber& r) {
  if (!r.key) {
    ICHIDO_TRY(save_issued(id, r));
    return true;
  }
  if (!keys_) {
    return Error(errc::internal, "A number with a key cannot be issued without the key index.");
  }
  char scope[8];
  const std::uint64_t hash = keys_->hash(KeyKind::number, counter_scope(id, scope), *r.key);
  auto found = find_issued_by_hash(id, *r.key, hash);
  if (!found.ok()) return std::move(found).error();
  if (*found) return false;
  auto kseq = next_kseq();
  if (!kseq.ok()) return std::move(kseq).error();
  if (static_cast<std::uint64_t>(*kseq) > KeyTable::kMaxKseq) {
    return Error(errc::store_unavailable,
                 "This data directory has issued its last key stamp (" +
                     std::to_string(KeyTable::kMaxKseq) +
                     " keys over its life, decision 143): numbers with a key cannot be issued "
                     "until the keys are renumbered offline. Nothing was changed.");
  }
  // The slot first (inside the writer's batch, so a rollback removes it), then the row; a slot
  // whose row is never written costs a read but never an answer.
  try {
    keys_->insert(hash, static_cast<std::uint64_t>(*kseq));
  } catch (const std::exception& e) {
    return Error(errc::store_unavailable, std::string("The key index cannot take another key (") +
                                              e.what() + "); nothing was changed.");
  }
  auto q = db_.query("INSERT INTO issued (counter_id, " ISSUED_COLUMNS
                     ", kseq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!q.ok()) return std::move(q).error();
  bind_issued(*q, id, r);
  q->bind(10, *kseq);
  ICHIDO_TRY(q->run("record an issued number"));
  return true;
}

Result<std::uint64_t> SqliteTables::key_snapshot_id() {
  auto q = db_.query("SELECT snapshot_id FROM key_index_snapshot WHERE id = 1");
  if (!q.ok()) return std::move(q).error();
  const int rc = q->step();
  if (rc == SQLITE_DONE) return std::uint64_t{0};
  if (rc != SQLITE_ROW) return db_.error("read the key index's snapshot id");
  return static_cast<std::uint64_t>(q->int64(0));
}

Result<void> SqliteTables::save_key_snapshot_id(std::uint64_t snapshot_id) {
  auto q = db_.query(
      "INSERT INTO key_index_snapshot (id, snapshot_id) VALUES (1, ?) "
      "ON CONFLICT (id) DO UPDATE SET snapshot_id = excluded.snapshot_id");
  if (!q.ok()) return std::move(q).error();
  q->bind(1, static_cast<std::int64_t>(snapshot_id));
  return q->run("record the key index's snapshot id");
}

Result<std::uint64_t> SqliteTables::key_sequence() {
  auto value = sequence_value("key");
  if (!value.ok()) return std::move(value).error();
  return static_cast<std::uint64_t>(*value);
}

Result<void> SqliteTables::scan_keys(std::uint64_t after, const KeyRowSink& add) {
  auto q = db_.query(
      "SELECT kseq, counter_id, key FROM issued WHERE kseq > ? AND kseq IS NOT NULL "
      "ORDER BY kseq");
  if (!q.ok()) return std::move(q).error();
  q->bind(1, static_cast<std::int64_t>(after));
  for (;;) {
    const int rc = q->step();
    if (rc == SQLITE_DONE) return {};
    if (rc != SQLITE_ROW) return db_.error("read the issued numbers' keys");
    char scope[8];
    const std::int64_t kseq = q->int64(0);
    if (kseq < 1) {
      return Error(errc::store_corrupt, "An issued number has the key stamp " +
                                            std::to_string(kseq) + ", which no row can have.");
    }
    add(KeyKind::number, counter_scope(q->int64(1), scope), q->text(2),
        static_cast<std::uint64_t>(kseq));
  }
}

Result<std::vector<core::IssuedNumber>> SqliteTables::list_issued(std::int64_t id,
                                                                  const std::string& period,
                                                                  std::int64_t after, int limit) {
  auto q = db_.query("SELECT " ISSUED_COLUMNS
                     " FROM issued WHERE counter_id = ? AND period = ? AND value > ? "
                     "ORDER BY value LIMIT ?");
  if (q.ok()) q->bind(1, id).bind(2, period).bind(3, after).bind(4, std::int64_t{limit});
  return many<core::IssuedNumber>(db_, std::move(q), issued_from, "list issued numbers");
}

}  // namespace ichido::store::sqlite
