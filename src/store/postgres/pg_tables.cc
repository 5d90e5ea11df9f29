#include "store/postgres/pg_tables.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <thread>
#include <utility>

#include "store/lease_sql.h"
#include "store/once_sql.h"
#include "store/table_store.h"

namespace ichido::store::postgres {
namespace {

#define COUNTER_COLUMNS                                                           \
  "id, ns, name, start, max, format, period, timezone, require_key, created_at, " \
  "fiscal_year_start"
#define ISSUED_COLUMNS "period, value, formatted, key, note, issued_at, voided_at, void_reason"
#define ONCE_COLUMNS                                                                         \
  "key, state, owner, fingerprint, token, attempt, max_attempts, lease_expires_at, result, " \
  "last_error, holder_done, created_at, updated_at, finished_at, request_id, replayed"
#define TOKEN_COLUMNS "id, hash, role, scope, label, created_at, expires_at, revoked_at"
#define AUDIT_COLUMNS "id, at, actor, action, ns, status, remote, detail"
#define LOCK_COLUMNS \
  "name, owner, token, acquired_at, lease_expires_at, request_id, waiter, replayed"

// The database's clock in milliseconds (floor: never ahead of the real instant).
#define DB_NOW_MS "floor(extract(epoch from clock_timestamp()) * 1000)::int8"

std::string fill(const std::string& sql, const std::string& q) {
  std::string out;
  for (std::size_t i = 0; i < sql.size(); ++i) {
    if (sql.compare(i, 3, "{s}") == 0) {
      out += q;
      i += 2;
    } else {
      out.push_back(sql[i]);
    }
  }
  return out;
}

Error corrupt(const std::string& what) {
  return Error(errc::store_unavailable, "The store holds " + what + "; an operator must look.");
}

Result<CounterRow> counter_from(const PgResult& r, int i) {
  CounterRow c;
  c.id = r.i64(i, 0);
  c.ns = r.str(i, 1);
  c.name = r.str(i, 2);
  c.config.start = r.i64(i, 3);
  c.config.max = r.i64(i, 4);
  c.config.format = r.str(i, 5);
  auto period = core::parse_period(r.str(i, 6));
  if (!period.ok()) return corrupt("a counter with an unknown period");
  c.config.period = *period;
  c.config.timezone = r.str(i, 7);
  c.config.require_key = r.boolean(i, 8);
  c.created_at = r.i64(i, 9);
  c.config.fiscal_year_start = static_cast<int>(r.opt_i64(i, 10).value_or(0));
  return c;
}

core::IssuedNumber issued_from(const PgResult& r, int i) {
  core::IssuedNumber n;
  n.period = r.str(i, 0);
  n.value = r.i64(i, 1);
  n.formatted = r.str(i, 2);
  n.key = r.opt_str(i, 3);
  n.note = r.str(i, 4);
  n.issued_at = r.i64(i, 5);
  n.voided_at = r.opt_i64(i, 6);
  n.void_reason = r.str(i, 7);
  return n;
}

Result<core::OnceRecord> once_from(const PgResult& r, int i) {
  core::OnceRecord o;
  o.key = r.str(i, 0);
  const std::string state = r.str(i, 1);
  if (state == "processing") {
    o.state = core::OnceState::processing;
  } else if (state == "pending") {
    o.state = core::OnceState::pending;
  } else if (state == "completed") {
    o.state = core::OnceState::completed;
  } else if (state == "dead") {
    o.state = core::OnceState::dead;
  } else {
    return corrupt("a once record in an unknown state");
  }
  o.owner = r.str(i, 2);
  o.fingerprint = r.opt_str(i, 3);
  o.token = r.i64(i, 4);
  o.attempt = r.i64(i, 5);
  o.max_attempts = r.i64(i, 6);
  o.lease_expires_at = r.i64(i, 7);
  o.result = r.opt_str(i, 8);
  o.last_error = r.str(i, 9);
  o.holder_done = r.boolean(i, 10);
  o.created_at = r.i64(i, 11);
  o.updated_at = r.i64(i, 12);
  o.finished_at = r.opt_i64(i, 13);
  o.request_id = r.opt_str(i, 14);
  o.replayed = r.boolean(i, 15);
  return o;
}

Result<core::TokenInfo> token_from(const PgResult& r, int i) {
  core::TokenInfo t;
  t.id = r.str(i, 0);
  t.hash = r.str(i, 1);
  auto role = core::parse_role(r.str(i, 2));
  if (!role.ok()) return corrupt("a token with an unknown role");
  t.role = *role;
  t.scope = r.str(i, 3);
  t.label = r.str(i, 4);
  t.created_at = r.i64(i, 5);
  t.expires_at = r.opt_i64(i, 6);
  t.revoked_at = r.opt_i64(i, 7);
  return t;
}

core::AuditEntry audit_from(const PgResult& r, int i) {
  core::AuditEntry e;
  e.id = r.i64(i, 0);
  e.at = r.i64(i, 1);
  e.actor = r.str(i, 2);
  e.action = r.str(i, 3);
  e.ns = r.str(i, 4);
  e.status = static_cast<unsigned>(r.i64(i, 5));
  e.remote = r.str(i, 6);
  e.detail = r.str(i, 7);
  return e;
}

core::LockRecord lock_from(const PgResult& r, int i) {
  return core::LockRecord{r.str(i, 0), r.str(i, 1),     r.i64(i, 2),     r.i64(i, 3),
                          r.i64(i, 4), r.opt_str(i, 5), r.opt_str(i, 6), r.boolean(i, 7)};
}

// find_lock_queue's rows: the live head (mine = false) and the caller's own place (mine = true).
LockQueueView lock_queue_from(const PgResult& r) {
  LockQueueView v;
  for (int i = 0; i < r.rows(); ++i) {
    if (r.boolean(i, 5)) {
      v.mine = r.i64(i, 0);
    } else {
      v.head = LockWaiterRow{r.i64(i, 0), r.str(i, 1), r.str(i, 2), r.i64(i, 3), r.opt_str(i, 4)};
    }
  }
  return v;
}

// Maps every row of a result (the mapper returns T or Result<T>).
template <class T, class From>
Result<std::vector<T>> all(Result<PgResult> r, From from) {
  if (!r.ok()) return std::move(r).error();
  std::vector<T> out;
  out.reserve(r->rows());
  for (int i = 0; i < r->rows(); ++i) {
    if constexpr (std::is_same_v<decltype(from(*r, i)), T>) {
      out.push_back(from(*r, i));
    } else {
      auto v = from(*r, i);
      if (!v.ok()) return std::move(v).error();
      out.push_back(std::move(*v));
    }
  }
  return out;
}

template <class T, class From>
Result<std::optional<T>> first(Result<PgResult> r, From from) {
  auto rows = all<T>(std::move(r), from);
  if (!rows.ok()) return std::move(rows).error();
  if (rows->empty()) return std::optional<T>();
  return std::optional<T>(std::move(rows->front()));
}

}  // namespace

Sql::Sql(const std::string& schema) {
  const std::string q = "\"" + schema + "\"";
  auto S = [&q](const std::string& sql) { return Stmt{fill(sql, q)}; };
  begin_write = S("BEGIN ISOLATION LEVEL READ COMMITTED");
  begin_read = S("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
  // Transaction-scoped (is_local = true): nothing outlives the transaction, so pooled server
  // connections stay clean. A node that stops mid-transaction (frozen, partitioned) holds its key
  // locks at most idle_in_transaction_session_timeout; a lock wait longer than lock_timeout fails
  // the batch with 503 instead of hanging it.
  tx_settings =
      S("SELECT set_config('lock_timeout', $1, true), "
        "set_config('idle_in_transaction_session_timeout', $2, true)");
  // The batch's key locks in the order given (sorted by the caller: every batch of every node
  // takes them in the same order, so they cannot deadlock), then the clock — read after the
  // locks, so `now` never goes backwards for a key from one transaction to the next.
  lock_keys_now =
      S("WITH l AS MATERIALIZED (SELECT pg_advisory_xact_lock(k) FROM unnest($1::int8[]) AS k) "
        "SELECT count(*), " DB_NOW_MS " FROM l");
  now = S("SELECT " DB_NOW_MS);
  commit = S("COMMIT");
  rollback = S("ROLLBACK");
  savepoint = S("SAVEPOINT job");
  rollback_to_savepoint = S("ROLLBACK TO SAVEPOINT job");
  release_savepoint = S("RELEASE SAVEPOINT job");

  next_token = S("SELECT nextval('{s}.token_seq') FROM generate_series(1, $1)");
  find_counter = S("SELECT " COUNTER_COLUMNS " FROM {s}.counters WHERE ns = $1 AND name = $2");
  insert_counter =
      S("INSERT INTO {s}.counters (ns, name, start, max, format, period, timezone, require_key, "
        "created_at, fiscal_year_start) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) "
        "RETURNING id");
  list_counters = S("SELECT " COUNTER_COLUMNS " FROM {s}.counters WHERE ns = $1 ORDER BY name");
  latest_period =
      S("SELECT p.period, p.last_value, p.issued_count, p.voided_count FROM {s}.counter_periods p "
        "JOIN {s}.counters c ON c.id = p.counter_id WHERE c.ns = $1 AND c.name = $2 "
        "ORDER BY p.period DESC LIMIT 1");
  find_period =
      S("SELECT last_value, issued_count, voided_count FROM {s}.counter_periods "
        "WHERE counter_id = $1 AND period = $2");
  save_period =
      S("INSERT INTO {s}.counter_periods (counter_id, period, last_value, issued_count, "
        "voided_count) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (counter_id, period) DO UPDATE SET "
        "last_value = excluded.last_value, issued_count = excluded.issued_count, "
        "voided_count = excluded.voided_count");
  find_issued_by_key =
      S("SELECT " ISSUED_COLUMNS " FROM {s}.issued WHERE counter_id = $1 AND key = $2");
  find_issued_by_counter_key =
      S("SELECT i.period, i.value, i.formatted, i.key, i.note, i.issued_at, i.voided_at, "
        "i.void_reason FROM {s}.issued i JOIN {s}.counters c ON c.id = i.counter_id "
        "WHERE c.ns = $1 AND c.name = $2 AND i.key = $3");
  find_issued = S("SELECT " ISSUED_COLUMNS
                  " FROM {s}.issued WHERE counter_id = $1 AND period = $2 AND value = $3");
  highest_issued = S("SELECT max(value) FROM {s}.issued WHERE counter_id = $1 AND period = $2");
  save_issued = S("INSERT INTO {s}.issued (counter_id, " ISSUED_COLUMNS
                  ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) "
                  "ON CONFLICT (counter_id, period, value) DO UPDATE SET "
                  "formatted = excluded.formatted, key = excluded.key, note = excluded.note, "
                  "issued_at = excluded.issued_at, voided_at = excluded.voided_at, "
                  "void_reason = excluded.void_reason");
  list_issued = S("SELECT " ISSUED_COLUMNS
                  " FROM {s}.issued WHERE counter_id = $1 AND period = $2 AND value > $3 "
                  "ORDER BY value LIMIT $4");

  find_once = S("SELECT " ONCE_COLUMNS " FROM {s}.once_records WHERE ns = $1 AND key = $2");
  save_once =
      S("INSERT INTO {s}.once_records (ns, " ONCE_COLUMNS
        ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17) "
        "ON CONFLICT (ns, key) DO UPDATE SET state = excluded.state, "
        "owner = excluded.owner, fingerprint = excluded.fingerprint, "
        "token = excluded.token, attempt = excluded.attempt, "
        "max_attempts = excluded.max_attempts, "
        "lease_expires_at = excluded.lease_expires_at, result = excluded.result, "
        "last_error = excluded.last_error, holder_done = excluded.holder_done, "
        "created_at = excluded.created_at, updated_at = excluded.updated_at, "
        "finished_at = excluded.finished_at, request_id = excluded.request_id, "
        "replayed = excluded.replayed");
  delete_once = S("DELETE FROM {s}.once_records WHERE ns = $1 AND key = $2");
  // One listing per filter (once_sql.h): $1 ns, $2 after, then $3 now when the filter looks at
  // the lease, and the limit last. The literal state lets a generic plan use that state's
  // partial index.
  for (const core::OnceFilter f : core::kOnceFilters) {
    std::string sql = "SELECT " ONCE_COLUMNS " FROM {s}.once_records WHERE ns = $1 AND key > $2";
    if (const std::string w = once_sql::where(f, "$3"); !w.empty()) sql += " AND " + w;
    sql += once_sql::uses_now(f) ? " ORDER BY key LIMIT $4" : " ORDER BY key LIMIT $3";
    list_once[static_cast<std::size_t>(f)] = S(sql);
  }
  // Index once_ns_finished (migration 2): a range of (ns, finished_at), oldest first.
  purge_candidates =
      S("SELECT key FROM {s}.once_records WHERE ns = $1 AND finished_at IS NOT NULL "
        "AND finished_at < $2 ORDER BY finished_at LIMIT $3");
  // Each candidate is deleted only if its key lock is free (or already ours): the lock is tried
  // after the row matched, and held to the end of the transaction like every key lock.
  purge_delete =
      S("DELETE FROM {s}.once_records o USING unnest($2::text[], $3::int8[]) "
        "AS d(key, k) WHERE o.ns = $1 AND o.key = d.key AND o.finished_at IS NOT NULL "
        "AND o.finished_at < $4 AND pg_try_advisory_xact_lock(d.k)");
  find_ns_settings = S("SELECT once_retention_ms FROM {s}.ns_settings WHERE ns = $1");
  save_ns_settings =
      S("INSERT INTO {s}.ns_settings (ns, once_retention_ms) VALUES ($1, $2) "
        "ON CONFLICT (ns) DO UPDATE SET once_retention_ms = excluded.once_retention_ms");
  delete_ns_settings = S("DELETE FROM {s}.ns_settings WHERE ns = $1");
  // Distinct namespaces by index skipping (a recursive min(ns) > previous per table): one index
  // probe per namespace, not a scan of the rows (the same SQL as the embedded store's).
  list_namespaces =
      S("WITH RECURSIVE "
        "c(ns) AS (SELECT min(ns) FROM {s}.counters UNION ALL "
        "  SELECT (SELECT min(ns) FROM {s}.counters WHERE ns > c.ns) FROM c "
        "  WHERE c.ns IS NOT NULL), "
        "o(ns) AS (SELECT min(ns) FROM {s}.once_records UNION ALL "
        "  SELECT (SELECT min(ns) FROM {s}.once_records WHERE ns > o.ns) FROM o "
        "  WHERE o.ns IS NOT NULL), "
        "l(ns) AS (SELECT min(ns) FROM {s}.locks UNION ALL "
        "  SELECT (SELECT min(ns) FROM {s}.locks WHERE ns > l.ns) FROM l "
        "  WHERE l.ns IS NOT NULL) "
        "SELECT ns FROM c WHERE ns IS NOT NULL UNION SELECT ns FROM o WHERE ns IS NOT NULL "
        "UNION SELECT ns FROM l WHERE ns IS NOT NULL ORDER BY 1");
  // Each count stops at the cap: an index range bounded by LIMIT, never a full scan. $1 ns,
  // $2 the cap.
  {
    using F = core::OnceFilter;
    const auto capped_count = [](F f) {
      return "(SELECT count(*) FROM (SELECT 1 FROM {s}.once_records WHERE ns = $1 AND " +
             once_sql::state_term(f) + " LIMIT $2) c)";
    };
    count_once_state = S("SELECT " + capped_count(F::pending) + ", " + capped_count(F::completed) +
                         ", " + capped_count(F::dead));
    // Processing rows read once: the lapsed ones (OnceFilter::expired) counted among them, the
    // live ones are the rest. $1 ns, $2 now, $3 the cap.
    const std::string lapsed = once_sql::lease_term(F::expired, "$2");
    count_once_processing =
        S("SELECT count(*), count(*) FILTER (WHERE " + lapsed +
          "), min(lease_expires_at) FILTER (WHERE " + lapsed +
          ") FROM (SELECT lease_expires_at FROM {s}.once_records WHERE ns = $1 AND " +
          once_sql::state_term(F::expired) +  // the processing rows, live or lapsed
          " LIMIT $3) p");
  }

  insert_token =
      S("INSERT INTO {s}.tokens (" TOKEN_COLUMNS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8)");
  find_token = S("SELECT " TOKEN_COLUMNS " FROM {s}.tokens WHERE id = $1");
  find_token_by_hash = S("SELECT " TOKEN_COLUMNS " FROM {s}.tokens WHERE hash = $1");
  save_token =
      S("UPDATE {s}.tokens SET role = $1, scope = $2, label = $3, expires_at = $4, "
        "revoked_at = $5 WHERE id = $6");
  list_tokens = S("SELECT " TOKEN_COLUMNS " FROM {s}.tokens ORDER BY created_at, id");
  count_tokens = S("SELECT count(*) FROM {s}.tokens");
  insert_audit =
      S("INSERT INTO {s}.audit (at, actor, action, ns, status, remote, detail) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id");
  // Empty filters match everything (as over SQLite: AuditQuery). Free text is bytea here, so
  // the action's substring is position() on bytes, like SQLite's instr() on the same bytes.
#define AUDIT_FILTER                                                              \
  " FROM {s}.audit WHERE id > $1 AND id < $2 AND ($3 = ''::bytea OR actor = $3) " \
  "AND ($4 = ''::bytea OR position($4 in action) > 0) AND ($5::bytea IS NULL OR ns = $5) "
  list_audit = S("SELECT " AUDIT_COLUMNS AUDIT_FILTER "ORDER BY id LIMIT $6");
  list_audit_newest = S("SELECT " AUDIT_COLUMNS AUDIT_FILTER "ORDER BY id DESC LIMIT $6");
#undef AUDIT_FILTER

  find_lock = S("SELECT " LOCK_COLUMNS " FROM {s}.locks WHERE ns = $1 AND name = $2");
  save_lock = S("INSERT INTO {s}.locks (ns, " LOCK_COLUMNS
                ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) "
                "ON CONFLICT (ns, name) DO UPDATE SET owner = excluded.owner, "
                "token = excluded.token, acquired_at = excluded.acquired_at, "
                "lease_expires_at = excluded.lease_expires_at, request_id = excluded.request_id, "
                "waiter = excluded.waiter, replayed = excluded.replayed");
  delete_lock = S("DELETE FROM {s}.locks WHERE ns = $1 AND name = $2");
  // The held locks (core/lock.h L3): $1 ns, $2 now.
  list_live_locks = S("SELECT " LOCK_COLUMNS " FROM {s}.locks WHERE ns = $1 AND " +
                      lease_sql::term(core::LeaseSide::live, "$2") + " ORDER BY name");

  // A waiter is live while its node's heartbeat lease and its own deadline last (core/lock.h
  // Q1), both on the database's clock.
#define LIVE_IN_NS                                                      \
  " FROM {s}.lock_waiters w JOIN {s}.nodes n ON n.node_id = w.node_id " \
  "WHERE w.ns = $1 AND w.deadline_at > " DB_NOW_MS " AND n.lease_expires_at > " DB_NOW_MS
#define LIVE_WAITERS LIVE_IN_NS " AND w.name = $2"
  find_lock_queue =
      S("(SELECT w.seq, w.waiter_id, w.owner, w.lease_ms, w.request_id, false" LIVE_WAITERS
        " ORDER BY w.seq LIMIT 1) UNION ALL "
        "(SELECT seq, waiter_id, owner, lease_ms, request_id, true "
        "FROM {s}.lock_waiters WHERE ns = $1 AND name = $2 AND waiter_id = $3)");
  count_lock_waiters = S("SELECT count(*)" LIVE_WAITERS);
  count_lock_waiters_in = S("SELECT w.name, count(*)" LIVE_IN_NS " GROUP BY w.name");
#undef LIVE_WAITERS
#undef LIVE_IN_NS
  enqueue_lock_waiter =
      S("INSERT INTO {s}.lock_waiters (ns, name, waiter_id, node_id, owner, lease_ms, request_id, "
        "enqueued_at, deadline_at) VALUES ($1, $2, $3, $4, $5, $6, $7, " DB_NOW_MS ", " DB_NOW_MS
        " + $8) ON CONFLICT (ns, name, waiter_id) DO NOTHING");
  delete_lock_waiter =
      S("DELETE FROM {s}.lock_waiters WHERE ns = $1 AND name = $2 AND waiter_id = $3");
  node_heartbeat =
      S("INSERT INTO {s}.nodes (node_id, lease_expires_at, started_at) VALUES ($1, " DB_NOW_MS
        " + $2, " DB_NOW_MS
        ") ON CONFLICT (node_id) DO UPDATE SET "
        "lease_expires_at = excluded.lease_expires_at");
  // Nodes silent for $1 ms, their places, and places whose wait ended $1 ms ago. They are no
  // longer live (nobody counts them); this only keeps the tables small.
  node_cleanup = S("WITH gone AS (DELETE FROM {s}.nodes WHERE lease_expires_at < " DB_NOW_MS
                   " - $1 RETURNING node_id) DELETE FROM {s}.lock_waiters WHERE node_id IN "
                   "(SELECT node_id FROM gone) OR deadline_at < " DB_NOW_MS " - $1");
  bump_token_epoch = S("UPDATE {s}.token_epoch SET epoch = epoch + 1");
  token_epoch = S("SELECT epoch FROM {s}.token_epoch");
  node_tokens_applied =
      S("UPDATE {s}.nodes SET tokens_epoch = greatest(tokens_epoch, $2) WHERE node_id = $1");
  // The live nodes (but $1) that have not applied every revocation committed so far.
  token_acks_pending =
      S("SELECT n.node_id FROM {s}.nodes n, {s}.token_epoch e WHERE n.node_id <> $1 AND "
        "n.lease_expires_at > " DB_NOW_MS " AND n.tokens_epoch < e.epoch ORDER BY n.node_id");
  node_leave =
      S("WITH w AS (DELETE FROM {s}.lock_waiters WHERE node_id = $1) "
        "DELETE FROM {s}.nodes WHERE node_id = $1");

  probe =
      S("SELECT pg_is_in_recovery(), current_setting('transaction_read_only') = 'on', "
        "(SELECT store_id FROM {s}.store_identity), "
        "(SELECT coalesce(max(version), 0)::int8 FROM {s}.schema_version), "
        "(SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {s}.token_seq)");
  find_store_id = S("SELECT store_id FROM {s}.store_identity");
  notify = S("SELECT pg_notify($1, $2)");
}

template <class T>
Result<std::optional<std::optional<T>>> PgTables::remembered(Rows<T>& rows,
                                                             const std::string& key) {
  using R = std::optional<std::optional<T>>;
  if (!batched_) return R();
  auto it = rows.find(key);
  if (it == rows.end()) return R();
  if (!it->second.ready) {
    ICHIDO_TRY(conn_.wait_results());
    it = rows.find(key);
    if (it == rows.end() || !it->second.ready) return R();
  }
  return R(it->second.value);
}

void PgTables::prefetch_counter(const std::string& ns, const std::string& name) {
  if (!batched_) return;
  const std::string k = row_key(ns, name);
  if (!counters_.try_emplace(k).second) return;  // already asked for, or known
  conn_.send_read(sql_.find_counter, Params().text(ns).text(name), [this, k](const PgResult& r) {
    if (r.rows() == 0) {
      counters_[k] = {true, std::nullopt};
      return;
    }
    auto row = counter_from(r, 0);
    if (!row.ok()) {
      counters_.erase(k);  // the lookup itself will report it
      return;
    }
    counter_names_[row->id] = k;
    counters_[k] = {true, std::move(*row)};
  });
  latest_period_.try_emplace(k);
  conn_.send_read(sql_.latest_period, Params().text(ns).text(name), [this, k](const PgResult& r) {
    auto& slot = latest_period_[k];
    slot.ready = true;
    if (r.rows()) {
      slot.value = std::make_pair(r.str(0, 0), PeriodRow{r.i64(0, 1), r.i64(0, 2), r.i64(0, 3)});
    }
  });
}

void PgTables::end_prefetch() {
  if (!batched_ || tokens_wanted_ == 0) return;
  const int n = std::min(tokens_wanted_, 1000);
  tokens_wanted_ = 0;
  conn_.send_read(sql_.next_token, Params().i64(n), [this](const PgResult& r) {
    for (int i = 0; i < r.rows(); ++i) tokens_.push_back(r.i64(i, 0));
    std::sort(tokens_.begin(), tokens_.end(), std::greater<>());
  });
}

void PgTables::prefetch_issued_by_key(const std::string& ns, const std::string& name,
                                      const std::string& key) {
  if (!batched_) return;
  const std::string k = row_key(row_key(ns, name), key);
  if (!issued_.try_emplace(k).second) return;
  conn_.send_read(sql_.find_issued_by_counter_key, Params().text(ns).text(name).text(key),
                  [this, k](const PgResult& r) {
                    issued_[k] = {true, r.rows()
                                            ? std::optional<core::IssuedNumber>(issued_from(r, 0))
                                            : std::nullopt};
                  });
}

void PgTables::prefetch_once(const std::string& ns, const std::string& key) {
  if (!batched_) return;
  const std::string k = row_key(ns, key);
  if (!once_.try_emplace(k).second) return;
  conn_.send_read(sql_.find_once, Params().text(ns).text(key), [this, k](const PgResult& r) {
    if (r.rows() == 0) {
      once_[k] = {true, std::nullopt};
      return;
    }
    auto rec = once_from(r, 0);
    if (!rec.ok()) {
      once_.erase(k);  // the lookup itself will report it
      return;
    }
    once_[k] = {true, std::move(*rec)};
  });
}

void PgTables::prefetch_lock(const std::string& ns, const std::string& name) {
  if (!batched_) return;
  const std::string k = row_key(ns, name);
  if (!locks_.try_emplace(k).second) return;
  conn_.send_read(sql_.find_lock, Params().text(ns).text(name), [this, k](const PgResult& r) {
    locks_[k] = {true, r.rows() ? std::optional<core::LockRecord>(lock_from(r, 0)) : std::nullopt};
  });
}

Result<void> PgTables::write(const Stmt& stmt, const Params& params) {
  ++writes_;
  if (batched_) {
    conn_.send(stmt, params);
    if (conn_.broken()) return pg_unavailable("the connection was lost");
    return {};
  }
  auto r = conn_.query(stmt, params);
  if (!r.ok()) return std::move(r).error();
  return {};
}

Result<std::int64_t> PgTables::next_token() {
  if (tokens_.empty() && batched_) ICHIDO_TRY(conn_.wait_results());  // announced ones, if any
  if (tokens_.empty()) {
    auto r = conn_.query(sql_.next_token, Params().i64(batched_ ? token_batch_ : 1));
    if (!r.ok()) return std::move(r).error();
    for (int i = 0; i < r->rows(); ++i) tokens_.push_back(r->i64(i, 0));
    std::sort(tokens_.begin(), tokens_.end(), std::greater<>());
    if (tokens_.empty()) return pg_unavailable("the token sequence returned nothing");
  }
  const std::int64_t t = tokens_.back();
  tokens_.pop_back();
  return t;
}

Result<std::optional<CounterRow>> PgTables::find_counter(const std::string& ns,
                                                         const std::string& name) {
  const std::string k = row_key(ns, name);
  auto known = remembered(counters_, k);
  if (!known.ok()) return std::move(known).error();
  if (*known) return std::move(**known);
  auto row =
      first<CounterRow>(conn_.query(sql_.find_counter, Params().text(ns).text(name)), counter_from);
  if (batched_ && row.ok()) {
    if (*row) counter_names_[(*row)->id] = k;
    counters_[k] = {true, *row};
  }
  return row;
}

Result<std::int64_t> PgTables::insert_counter(const CounterRow& row) {
  ++writes_;
  const auto& c = row.config;
  auto r = conn_.query(
      sql_.insert_counter,
      Params()
          .text(row.ns)
          .text(row.name)
          .i64(c.start)
          .i64(c.max)
          .bytes(c.format)
          .text(core::to_string(c.period))
          .text(c.timezone)
          .boolean(c.require_key)
          .i64(row.created_at)
          .opt_i64(c.fiscal_year_start != 0 ? std::optional<std::int64_t>(c.fiscal_year_start)
                                            : std::nullopt));
  if (!r.ok()) return std::move(r).error();
  if (batched_) {
    CounterRow stored = row;
    stored.id = r->i64(0, 0);
    const std::string k = row_key(row.ns, row.name);
    counter_names_[stored.id] = k;
    counters_[k] = {true, std::move(stored)};
  }
  return r->i64(0, 0);
}

Result<std::vector<CounterRow>> PgTables::list_counters(const std::string& ns) {
  return all<CounterRow>(conn_.query(sql_.list_counters, Params().text(ns)), counter_from);
}

Result<std::optional<PeriodRow>> PgTables::find_period(std::int64_t id, const std::string& period) {
  const std::string pk = row_key(std::to_string(id), period);
  if (batched_) {
    if (auto it = periods_.find(pk); it != periods_.end()) {
      return std::optional<PeriodRow>(it->second);
    }
    if (auto name = counter_names_.find(id); name != counter_names_.end()) {
      auto latest = remembered(latest_period_, name->second);
      if (!latest.ok()) return std::move(latest).error();
      if (*latest) {
        const auto& l = **latest;  // the counter's latest period row, if any
        if (!l) return std::optional<PeriodRow>();
        if (l->first == period) return std::optional<PeriodRow>(l->second);
        if (period > l->first) return std::optional<PeriodRow>();  // after the latest: none
      }
    }
  }
  auto row = first<PeriodRow>(
      conn_.query(sql_.find_period, Params().i64(id).text(period)),
      [](const PgResult& r, int i) { return PeriodRow{r.i64(i, 0), r.i64(i, 1), r.i64(i, 2)}; });
  if (batched_ && row.ok() && *row) periods_.insert_or_assign(pk, **row);
  return row;
}

Result<void> PgTables::save_period(std::int64_t id, const std::string& period,
                                   const PeriodRow& row) {
  if (batched_) {
    // Deferred to flush_writes(): a batch of `next` on one counter writes its period row once,
    // not once per command (fewer statements, and one row version instead of one per command).
    ++writes_;
    const std::string pk = row_key(std::to_string(id), period);
    periods_.insert_or_assign(pk, row);
    dirty_periods_.try_emplace(pk, id, period);
    return {};
  }
  return write(sql_.save_period, Params()
                                     .i64(id)
                                     .text(period)
                                     .i64(row.last_value)
                                     .i64(row.issued_count)
                                     .i64(row.voided_count));
}

Result<void> PgTables::flush_writes() {
  if (!batched_) return {};
  for (const auto& [pk, p] : dirty_periods_) {
    const auto& row = periods_.at(pk);
    ICHIDO_TRY(write(sql_.save_period, Params()
                                           .i64(p.first)
                                           .text(p.second)
                                           .i64(row.last_value)
                                           .i64(row.issued_count)
                                           .i64(row.voided_count)));
  }
  dirty_periods_.clear();
  return {};
}

Result<std::optional<core::IssuedNumber>> PgTables::find_issued_by_key(std::int64_t id,
                                                                       const std::string& key) {
  std::string k;
  if (batched_) {
    if (auto name = counter_names_.find(id); name != counter_names_.end()) {
      k = row_key(name->second, key);
      auto known = remembered(issued_, k);
      if (!known.ok()) return std::move(known).error();
      if (*known) return std::move(**known);
    }
  }
  auto rec = first<core::IssuedNumber>(
      conn_.query(sql_.find_issued_by_key, Params().i64(id).text(key)), issued_from);
  if (!k.empty() && rec.ok()) issued_[k] = {true, *rec};
  return rec;
}

Result<std::optional<core::IssuedNumber>> PgTables::find_issued(std::int64_t id,
                                                                const std::string& period,
                                                                std::int64_t value) {
  return first<core::IssuedNumber>(
      conn_.query(sql_.find_issued, Params().i64(id).text(period).i64(value)), issued_from);
}

Result<std::optional<std::int64_t>> PgTables::highest_issued(std::int64_t id,
                                                             const std::string& period) {
  auto r = conn_.query(sql_.highest_issued, Params().i64(id).text(period));
  if (!r.ok()) return std::move(r).error();
  return r->opt_i64(0, 0);
}

Result<void> PgTables::save_issued(std::int64_t id, const core::IssuedNumber& n) {
  if (batched_ && n.key) {
    if (auto name = counter_names_.find(id); name != counter_names_.end()) {
      issued_[row_key(name->second, *n.key)] = {true, n};
    }
  }
  return write(sql_.save_issued, Params()
                                     .i64(id)
                                     .text(n.period)
                                     .i64(n.value)
                                     .bytes(n.formatted)
                                     .opt_text(n.key)
                                     .bytes(n.note)
                                     .i64(n.issued_at)
                                     .opt_i64(n.voided_at)
                                     .bytes(n.void_reason));
}

Result<std::vector<core::IssuedNumber>> PgTables::list_issued(std::int64_t id,
                                                              const std::string& period,
                                                              std::int64_t after, int limit) {
  return all<core::IssuedNumber>(
      conn_.query(sql_.list_issued, Params().i64(id).text(period).i64(after).i64(limit)),
      issued_from);
}

Result<std::optional<core::OnceRecord>> PgTables::find_once(const std::string& ns,
                                                            const std::string& key) {
  const std::string k = row_key(ns, key);
  auto known = remembered(once_, k);
  if (!known.ok()) return std::move(known).error();
  if (*known) return std::move(**known);
  auto rec =
      first<core::OnceRecord>(conn_.query(sql_.find_once, Params().text(ns).text(key)), once_from);
  if (batched_ && rec.ok()) once_[k] = {true, *rec};
  return rec;
}

Result<void> PgTables::save_once(const std::string& ns, const core::OnceRecord& r) {
  if (batched_) once_[row_key(ns, r.key)] = {true, r};
  return write(sql_.save_once, Params()
                                   .text(ns)
                                   .text(r.key)
                                   .text(core::to_string(r.state))
                                   .bytes(r.owner)
                                   .opt_bytes(r.fingerprint)
                                   .i64(r.token)
                                   .i64(r.attempt)
                                   .i64(r.max_attempts)
                                   .i64(r.lease_expires_at)
                                   .opt_bytes(r.result)
                                   .bytes(r.last_error)
                                   .boolean(r.holder_done)
                                   .i64(r.created_at)
                                   .i64(r.updated_at)
                                   .opt_i64(r.finished_at)
                                   .opt_text(r.request_id)
                                   .boolean(r.replayed));
}

Result<bool> PgTables::delete_once(const std::string& ns, const std::string& key) {
  if (batched_) once_[row_key(ns, key)] = {true, std::nullopt};
  ++writes_;
  auto r = conn_.query(sql_.delete_once, Params().text(ns).text(key));
  if (!r.ok()) return std::move(r).error();
  return r->affected() > 0;
}

Result<std::vector<core::OnceRecord>> PgTables::list_once(const std::string& ns,
                                                          core::OnceFilter filter, TimeMs now,
                                                          const std::string& after, int limit) {
  Params p;
  p.text(ns).text(after);
  if (once_sql::uses_now(filter)) p.i64(now);
  p.i64(limit);
  return all<core::OnceRecord>(conn_.query(sql_.list_once[static_cast<std::size_t>(filter)], p),
                               once_from);
}

Result<std::int64_t> PgTables::purge_once_in(const std::string& ns, TimeMs older_than, int limit) {
  if (batched_) {
    // It may delete records this batch remembers: forget them all (after reading every
    // outstanding prefetch answer, so that none comes back in afterwards).
    ICHIDO_TRY(conn_.wait_results());
    once_.clear();
  }
  auto c = conn_.query(sql_.purge_candidates, Params().text(ns).i64(older_than).i64(limit));
  if (!c.ok()) return std::move(c).error();
  if (c->rows() == 0) return std::int64_t{0};
  std::vector<std::string> keys;
  std::vector<std::int64_t> hashes;
  for (int i = 0; i < c->rows(); ++i) {
    keys.push_back(c->str(i, 0));
    hashes.push_back(job_key("once", ns, keys.back()));
  }
  ++writes_;
  Params p;
  p.text(ns).text_array(keys).i64_array(hashes).i64(older_than);
  auto d = conn_.query(sql_.purge_delete, p);
  if (!d.ok()) return std::move(d).error();
  return d->affected();
}

Result<std::optional<NamespaceSettings>> PgTables::find_ns_settings(const std::string& ns) {
  auto r = conn_.query(sql_.find_ns_settings, Params().text(ns));
  if (!r.ok()) return std::move(r).error();
  if (r->rows() == 0) return std::optional<NamespaceSettings>();
  return std::optional<NamespaceSettings>(NamespaceSettings{r->opt_i64(0, 0)});
}

Result<void> PgTables::save_ns_settings(const std::string& ns, const NamespaceSettings& s) {
  if (s == NamespaceSettings{}) return write(sql_.delete_ns_settings, Params().text(ns));
  return write(sql_.save_ns_settings, Params().text(ns).opt_i64(s.once_retention_ms));
}

Result<std::vector<std::string>> PgTables::list_namespaces() {
  return all<std::string>(conn_.query(sql_.list_namespaces, Params()),
                          [](const PgResult& r, int i) { return r.str(i, 0); });
}

Result<OnceCounts> PgTables::count_once(const std::string& ns, TimeMs now, std::int64_t cap) {
  OnceCounts c;
  auto s = conn_.query(sql_.count_once_state, Params().text(ns).i64(cap));
  if (!s.ok()) return std::move(s).error();
  c.pending = s->i64(0, 0);
  c.completed = s->i64(0, 1);
  c.dead = s->i64(0, 2);
  auto p = conn_.query(sql_.count_once_processing, Params().text(ns).i64(now).i64(cap));
  if (!p.ok()) return std::move(p).error();
  const std::int64_t live_and_lapsed = p->i64(0, 0);
  c.expired = p->i64(0, 1);
  c.processing = live_and_lapsed - c.expired;
  c.oldest_expired_lease = p->opt_i64(0, 2);
  c.capped = c.pending >= cap || c.completed >= cap || c.dead >= cap || live_and_lapsed >= cap;
  return c;
}

Result<void> PgTables::insert_token(const core::TokenInfo& t) {
  return write(sql_.insert_token, Params()
                                      .text(t.id)
                                      .text(t.hash)
                                      .text(core::to_string(t.role))
                                      .text(t.scope)
                                      .bytes(t.label)
                                      .i64(t.created_at)
                                      .opt_i64(t.expires_at)
                                      .opt_i64(t.revoked_at));
}

Result<std::optional<core::TokenInfo>> PgTables::find_token(const std::string& id) {
  return first<core::TokenInfo>(conn_.query(sql_.find_token, Params().text(id)), token_from);
}

Result<std::optional<core::TokenInfo>> PgTables::find_token_by_hash(const std::string& hash) {
  return first<core::TokenInfo>(conn_.query(sql_.find_token_by_hash, Params().text(hash)),
                                token_from);
}

Result<void> PgTables::save_token(const core::TokenInfo& t) {
  return write(sql_.save_token, Params()
                                    .text(core::to_string(t.role))
                                    .text(t.scope)
                                    .bytes(t.label)
                                    .opt_i64(t.expires_at)
                                    .opt_i64(t.revoked_at)
                                    .text(t.id));
}

Result<std::vector<core::TokenInfo>> PgTables::list_tokens() {
  return all<core::TokenInfo>(conn_.query(sql_.list_tokens, Params()), token_from);
}

Result<std::int64_t> PgTables::count_tokens() {
  auto r = conn_.query(sql_.count_tokens, Params());
  if (!r.ok()) return std::move(r).error();
  return r->i64(0, 0);
}

Result<std::int64_t> PgTables::insert_audit(const core::AuditEntry& e) {
  ++writes_;
  auto r = conn_.query(sql_.insert_audit, Params()
                                              .i64(e.at)
                                              .bytes(e.actor)
                                              .bytes(e.action)
                                              .bytes(e.ns)
                                              .i64(e.status)
                                              .bytes(e.remote)
                                              .bytes(e.detail));
  if (!r.ok()) return std::move(r).error();
  return r->i64(0, 0);
}

Result<std::vector<core::AuditEntry>> PgTables::list_audit(const AuditQuery& q) {
  Params p;
  p.i64(q.after)
      .i64(q.before.value_or(std::numeric_limits<std::int64_t>::max()))
      .bytes(q.actor)
      .bytes(q.action)
      .opt_bytes(q.ns)
      .i64(q.limit);
  return all<core::AuditEntry>(
      conn_.query(q.newest_first ? sql_.list_audit_newest : sql_.list_audit, p), audit_from);
}

Result<std::optional<core::LockRecord>> PgTables::find_lock(const std::string& ns,
                                                            const std::string& name) {
  const std::string k = row_key(ns, name);
  auto known = remembered(locks_, k);
  if (!known.ok()) return std::move(known).error();
  if (*known) return std::move(**known);
  auto rec =
      first<core::LockRecord>(conn_.query(sql_.find_lock, Params().text(ns).text(name)), lock_from);
  if (batched_ && rec.ok()) locks_[k] = {true, *rec};
  return rec;
}

Result<void> PgTables::save_lock(const std::string& ns, const core::LockRecord& r) {
  if (batched_) locks_[row_key(ns, r.name)] = {true, r};
  return write(sql_.save_lock, Params()
                                   .text(ns)
                                   .text(r.name)
                                   .bytes(r.owner)
                                   .i64(r.token)
                                   .i64(r.acquired_at)
                                   .i64(r.lease_expires_at)
                                   .opt_text(r.request_id)
                                   .opt_text(r.waiter)
                                   .boolean(r.replayed));
}

Result<void> PgTables::delete_lock(const std::string& ns, const std::string& name) {
  if (batched_) locks_[row_key(ns, name)] = {true, std::nullopt};
  return write(sql_.delete_lock, Params().text(ns).text(name));
}

Result<std::vector<core::LockRecord>> PgTables::list_live_locks(const std::string& ns, TimeMs now) {
  return all<core::LockRecord>(conn_.query(sql_.list_live_locks, Params().text(ns).i64(now)),
                               lock_from);
}

void PgTables::prefetch_lock_queue(const std::string& ns, const std::string& name,
                                   const std::string& waiter_id) {
  if (!batched_) return;
  const std::string lock = row_key(ns, name);
  if (queue_written_.count(lock)) return;
  const std::string k = row_key(lock, waiter_id);
  if (!queues_.try_emplace(k).second) return;
  conn_.send_read(sql_.find_lock_queue, Params().text(ns).text(name).text(waiter_id),
                  [this, k](const PgResult& r) { queues_[k] = {true, lock_queue_from(r)}; });
}

Result<LockQueueView> PgTables::find_lock_queue(const std::string& ns, const std::string& name,
                                                const std::string& waiter_id) {
  const std::string lock = row_key(ns, name);
  if (!queue_written_.count(lock)) {
    auto known = remembered(queues_, row_key(lock, waiter_id));
    if (!known.ok()) return std::move(known).error();
    if (*known && **known) return std::move(***known);
  }
  // Not remembered, or changed by this transaction: asked again (after the writes it sent).
  auto r = conn_.query(sql_.find_lock_queue, Params().text(ns).text(name).text(waiter_id));
  if (!r.ok()) return std::move(r).error();
  return lock_queue_from(*r);
}

Result<void> PgTables::enqueue_lock_waiter(const std::string& ns, const std::string& name,
                                           const LockWaiterRow& row, std::int64_t wait_ms) {
  if (node_id_.empty()) return Error(errc::internal, "This connection queues no lock waiters.");
  if (batched_) queue_written_.insert(row_key(ns, name));
  return write(sql_.enqueue_lock_waiter, Params()
                                             .text(ns)
                                             .text(name)
                                             .text(row.waiter_id)
                                             .text(node_id_)
                                             .bytes(row.owner)
                                             .i64(row.lease_ms)
                                             .opt_text(row.request_id)
                                             .i64(wait_ms));
}

Result<void> PgTables::delete_lock_waiter(const std::string& ns, const std::string& name,
                                          const std::string& waiter_id) {
  if (batched_) queue_written_.insert(row_key(ns, name));
  return write(sql_.delete_lock_waiter, Params().text(ns).text(name).text(waiter_id));
}

Result<void> PgTables::bump_token_epoch() { return write(sql_.bump_token_epoch, Params()); }

Result<std::vector<std::string>> wait_for_token_acks(PgConn& conn, const Sql& sql,
                                                     const std::string& self,
                                                     std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto r = conn.query(sql.token_acks_pending, Params().text(self));
    ICHIDO_TRY(conn.sync());
    if (!r.ok()) return std::move(r).error();
    std::vector<std::string> pending;
    for (int i = 0; i < r->rows(); ++i) pending.push_back(r->str(i, 0));
    if (pending.empty() || std::chrono::steady_clock::now() >= until) return pending;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

Result<std::optional<std::int64_t>> PgTables::count_lock_waiters(const std::string& ns,
                                                                 const std::string& name) {
  auto r = conn_.query(sql_.count_lock_waiters, Params().text(ns).text(name));
  if (!r.ok()) return std::move(r).error();
  return std::optional<std::int64_t>(r->i64(0, 0));
}

Result<std::optional<std::map<std::string, std::int64_t>>> PgTables::count_lock_waiters_in(
    const std::string& ns) {
  auto r = conn_.query(sql_.count_lock_waiters_in, Params().text(ns));
  if (!r.ok()) return std::move(r).error();
  std::map<std::string, std::int64_t> out;
  for (int i = 0; i < r->rows(); ++i) out.emplace(r->str(i, 0), r->i64(i, 1));
  return std::optional<std::map<std::string, std::int64_t>>(std::move(out));
}

}  // namespace ichido::store::postgres
