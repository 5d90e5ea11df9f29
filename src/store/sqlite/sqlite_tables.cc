#include "store/sqlite/sqlite_tables.h"

#include "store/sqlite/rows.h"

namespace ichido::store::sqlite {
namespace {

#define COUNTER_COLUMNS \
  "id, ns, name, start, max, format, period, timezone, require_key, created_at"
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

}  // namespace

Result<std::int64_t> SqliteTables::next_token() {
  if (cache_ && cache_->defer_writes) {
    if (!cache_->token_) {
      auto q = db_.query("SELECT value FROM sequences WHERE name = 'token'");
      if (!q.ok()) return std::move(q).error();
      const int rc = q->step();
      if (rc != SQLITE_ROW && rc != SQLITE_DONE) return db_.error("read the token sequence");
      cache_->token_ = rc == SQLITE_ROW ? q->int64(0) : 0;
    }
    const std::int64_t token = ++*cache_->token_;
    cache_->token_dirty_ = true;
    ++cache_->deferred_writes;
    cache_->drawn_token = std::max(cache_->drawn_token, token);
    return token;
  }
  auto q = db_.query(
      "INSERT INTO sequences (name, value) VALUES ('token', 1) "
      "ON CONFLICT (name) DO UPDATE SET value = value + 1 RETURNING value");
  if (!q.ok()) return std::move(q).error();
  if (q->step() != SQLITE_ROW) return db_.error("advance the token sequence");
  const std::int64_t token = q->int64(0);
  if (cache_) cache_->drawn_token = std::max(cache_->drawn_token, token);
  return token;
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
      "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!q.ok()) return std::move(q).error();
  q->bind(1, r.ns).bind(2, r.name).bind(3, r.config.start).bind(4, r.config.max);
  q->bind(5, r.config.format).bind(6, core::to_string(r.config.period));
  q->bind(7, r.config.timezone).bind(8, std::int64_t{r.config.require_key}).bind(9, r.created_at);
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
      [](const Query& r) {
        return PeriodRow{r.int64(0), r.int64(1), r.int64(2)};
      },
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
  if (cache_->token_dirty_) {
    auto q = db_.query(
        "INSERT INTO sequences (name, value) VALUES ('token', ?1) "
        "ON CONFLICT (name) DO UPDATE SET value = excluded.value");
    if (!q.ok()) return std::move(q).error();
    q->bind(1, *cache_->token_);
    ICHIDO_TRY(q->run("advance the token sequence"));
    cache_->token_dirty_ = false;
  }
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
  auto q = db_.query("SELECT " ISSUED_COLUMNS " FROM issued WHERE counter_id = ? AND key = ?");
  if (q.ok()) q->bind(1, id).bind(2, key);
  return one<core::IssuedNumber>(db_, std::move(q), issued_from, "look up an idempotency key");
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
  // An upsert on the primary key, as the PostgreSQL store does, not INSERT OR REPLACE: a REPLACE
  // on a table with foreign keys may delete rows, so SQLite gives it a statement journal (a copy
  // of every page it touches); this one needs none. It also never deletes another row whose key
  // collides (the rules look a key up first, so that would be a bug): it fails instead.
  auto q = db_.query("INSERT INTO issued (counter_id, " ISSUED_COLUMNS
                     ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                     "ON CONFLICT (counter_id, period, value) DO UPDATE SET "
                     "formatted = excluded.formatted, key = excluded.key, note = excluded.note, "
                     "issued_at = excluded.issued_at, voided_at = excluded.voided_at, "
                     "void_reason = excluded.void_reason");
  if (!q.ok()) return std::move(q).error();
  q->bind(1, id).bind(2, r.period).bind(3, r.value).bind(4, r.formatted).bind(5, r.key);
  q->bind(6, r.note).bind(7, r.issued_at).bind(8, r.voided_at).bind(9, r.void_reason);
  return q->run("record an issued number");
}

Result<bool> SqliteTables::insert_issued_unless_key(std::int64_t id, const core::IssuedNumber& r) {
  // The conflict target is issued_by_key (a partial index: its WHERE is part of the target). A
  // row with the same (period, value) is not handled here: that insert fails, as it must.
  auto q = db_.query("INSERT INTO issued (counter_id, " ISSUED_COLUMNS
                     ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                     "ON CONFLICT (counter_id, key) WHERE key IS NOT NULL DO NOTHING");
  if (!q.ok()) return std::move(q).error();
  q->bind(1, id).bind(2, r.period).bind(3, r.value).bind(4, r.formatted).bind(5, r.key);
  q->bind(6, r.note).bind(7, r.issued_at).bind(8, r.voided_at).bind(9, r.void_reason);
  ICHIDO_TRY(q->run("record an issued number"));
  return sqlite3_changes(db_.raw()) > 0;
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
