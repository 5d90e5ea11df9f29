// Tables: the rows one store transaction can read and write, as plain C++ calls.
//
// Each store backend implements Tables over its own medium (SQLite statements, in-memory maps,
// PostgreSQL queries); the command logic in table_store.cc is written once against this
// interface and calls the core rulebook for every decision. That is how two (or three) stores
// share one rulebook: they differ only in how rows are found and saved.
//
// All calls happen inside a transaction opened by the backend; errors are store errors
// (store_unavailable) and abort the command.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/auth.h"
#include "core/counter.h"
#include "core/lock.h"
#include "core/once.h"
#include "ichido/result.h"
#include "ichido/store.h"

namespace ichido::store {

// The key under which a backend caches a row named by two strings (namespace and name, counter
// id and period, ...): both joined by a '\0', which neither can hold.
inline std::string row_key(std::string_view a, std::string_view b) {
  std::string k;
  k.reserve(a.size() + b.size() + 1);
  k.append(a).push_back('\0');
  k.append(b);
  return k;
}

struct CounterRow {
  std::int64_t id = 0;
  std::string ns;
  std::string name;
  core::CounterConfig config;
  TimeMs created_at = 0;
};

// One place in a lock's durable waiter queue (core/lock.h Q1).
struct LockWaiterRow {
  std::int64_t seq = 0;  // order of arrival (assigned by the store when queued)
  std::string waiter_id;
  std::string owner;
  std::int64_t lease_ms = 0;
  std::optional<std::string> request_id;
};
// What a lock command needs to know of the queue: the head live waiter, and the caller's own
// place (looked up by waiter id; live or not).
struct LockQueueView {
  std::optional<LockWaiterRow> head;
  std::optional<std::int64_t> mine;  // the caller's seq
};

struct PeriodRow {
  std::int64_t last_value = 0;
  std::int64_t issued_count = 0;
  std::int64_t voided_count = 0;
};

class Tables {
 public:
  virtual ~Tables() = default;

  // --- prefetch hints (optional) ---
  // A write batch announces, before its jobs run, the rows they will look up, so that a store
  // whose every statement is a network round trip (PostgreSQL) can fetch them all at once. The
  // lookups themselves (find_*) still happen and must answer exactly as without the hint. A
  // store may ignore hints (the default).
  virtual void prefetch_counter(const std::string& /*ns*/, const std::string& /*name*/) {}
  virtual void prefetch_issued_by_key(const std::string& /*ns*/, const std::string& /*name*/,
                                      const std::string& /*key*/) {}
  virtual void prefetch_once(const std::string& /*ns*/, const std::string& /*key*/) {}
  virtual void prefetch_lock(const std::string& /*ns*/, const std::string& /*name*/) {}
  // The job may draw one token (next_token) when its decision grants.
  virtual void prefetch_token() {}

  // --- the store's one durable token sequence (fencing tokens of locks and once records) ---
  // Returns the next value: unique and strictly increasing across restarts (it is written in
  // the same transaction as the record that carries it).
  virtual Result<std::int64_t> next_token() = 0;

  // --- counters ---
  virtual Result<std::optional<CounterRow>> find_counter(const std::string& ns,
                                                         const std::string& name) = 0;
  // Returns the new counter's id.
  virtual Result<std::int64_t> insert_counter(const CounterRow& row) = 0;
  virtual Result<std::vector<CounterRow>> list_counters(const std::string& ns) = 0;
  virtual Result<std::optional<PeriodRow>> find_period(std::int64_t counter_id,
                                                       const std::string& period) = 0;
  virtual Result<void> save_period(std::int64_t counter_id, const std::string& period,
                                   const PeriodRow& row) = 0;
  virtual Result<std::optional<core::IssuedNumber>> find_issued_by_key(std::int64_t counter_id,
                                                                       const std::string& key) = 0;
  virtual Result<std::optional<core::IssuedNumber>> find_issued(std::int64_t counter_id,
                                                                const std::string& period,
                                                                std::int64_t value) = 0;
  // Largest value present in the audit trail of that period (issued or voided).
  virtual Result<std::optional<std::int64_t>> highest_issued(std::int64_t counter_id,
                                                             const std::string& period) = 0;
  // Inserts the row or replaces the one with the same (period, value).
  virtual Result<void> save_issued(std::int64_t counter_id, const core::IssuedNumber& rec) = 0;
  // Inserts `rec`, whose key is set and whose (period, value) is new, unless this counter has
  // issued a number to that key: then writes nothing and returns false. The default is
  // find_issued_by_key then save_issued; a store whose insert checks the key index anyway
  // (SQLite) does it in one statement, one search of that index instead of two.
  virtual Result<bool> insert_issued_unless_key(std::int64_t counter_id,
                                                const core::IssuedNumber& rec) {
    auto found = find_issued_by_key(counter_id, *rec.key);
    if (!found.ok()) return std::move(found).error();
    if (*found) return false;
    ICHIDO_TRY(save_issued(counter_id, rec));
    return true;
  }
  // Up to `limit` rows with value > after, in increasing value order.
  virtual Result<std::vector<core::IssuedNumber>> list_issued(std::int64_t counter_id,
                                                              const std::string& period,
                                                              std::int64_t after, int limit) = 0;

  // --- once records (definitions: sqlite/sqlite_once_tables.cc, memory/memory_store.cc) ---
  virtual Result<std::optional<core::OnceRecord>> find_once(const std::string& ns,
                                                            const std::string& key) = 0;
  // Inserts the record or replaces the one with the same (ns, key).
  virtual Result<void> save_once(const std::string& ns, const core::OnceRecord& rec) = 0;
  // The record a begin makes of a key it may be the first to see (TableStore::begin_once): when
  // no record of `ns` has rec.key, gives `rec` the next token (next_token), checks it
  // (core::check_invariants), inserts it and returns nullopt; when one has, returns that record
  // and writes and draws nothing. The default is find_once, then next_token and save_once; a
  // store whose insert searches the key's index anyway (SQLite) inserts first and reads the
  // record only when the insert finds its key taken: one search of that index instead of two.
  virtual Result<std::optional<core::OnceRecord>> insert_once_unless_found(const std::string& ns,
                                                                           core::OnceRecord& rec) {
    auto found = find_once(ns, rec.key);
    if (!found.ok() || *found) return found;
    auto token = next_token();
    if (!token.ok()) return std::move(token).error();
    rec.token = *token;
    ICHIDO_TRY(core::check_invariants(rec));
    ICHIDO_TRY(save_once(ns, rec));
    return std::optional<core::OnceRecord>();
  }
  // Returns whether a record was deleted.
  virtual Result<bool> delete_once(const std::string& ns, const std::string& key) = 0;
  // Up to `limit` records of `ns` with key > after that match `filter` at `now`, in key order.
  virtual Result<std::vector<core::OnceRecord>> list_once(const std::string& ns,
                                                          core::OnceFilter filter, TimeMs now,
                                                          const std::string& after, int limit) = 0;
  // Deletes up to `limit` completed or dead records of `ns` with finished_at < older_than, oldest
  // first; returns how many. Should use an index on (ns, finished_at).
  virtual Result<std::int64_t> purge_once_in(const std::string& ns, TimeMs older_than,
                                             int limit) = 0;
  // --- namespace settings ---
  virtual Result<std::optional<NamespaceSettings>> find_ns_settings(const std::string& ns) = 0;
  // Inserts or replaces the row of `ns` (a row with every field unset may be deleted).
  virtual Result<void> save_ns_settings(const std::string& ns, const NamespaceSettings& s) = 0;
  // --- tokens and audit ---
  virtual Result<void> insert_token(const core::TokenInfo& t) = 0;
  virtual Result<std::optional<core::TokenInfo>> find_token(const std::string& id) = 0;
  virtual Result<std::optional<core::TokenInfo>> find_token_by_hash(const std::string& hash) = 0;
  // Replaces the stored token with the same id.
  virtual Result<void> save_token(const core::TokenInfo& t) = 0;
  virtual Result<std::vector<core::TokenInfo>> list_tokens() = 0;
  // A revocation happened in this transaction: stores whose processes cache tokens and must
  // confirm they dropped it (PostgreSQL's token epoch, decision 077) count it; others ignore it.
  virtual Result<void> bump_token_epoch() { return {}; }
  // Returns the new record's id.
  virtual Result<std::int64_t> insert_audit(const core::AuditEntry& e) = 0;
  // Up to q.limit records matching q (see AuditQuery), in q's order.
  virtual Result<std::vector<core::AuditEntry>> list_audit(const AuditQuery& q) = 0;
  // --- namespaces (the dashboard's overview and the /metrics once gauges) ---
  // Every namespace with a counter, a once record or a lock row (held or lapsed), distinct, in
  // byte order. Should cost one index probe per namespace, not a scan of the records.
  virtual Result<std::vector<std::string>> list_namespaces() = 0;
  // The once records of `ns` counted by state at `now`, each count stopping at `cap` (an index
  // range count bounded by the cap, never a full scan).
  virtual Result<OnceCounts> count_once(const std::string& ns, TimeMs now, std::int64_t cap) = 0;
  // --- locks: one row per lock that has a holder (held or lapsed) ---
  virtual Result<std::optional<core::LockRecord>> find_lock(const std::string& ns,
                                                            const std::string& name) = 0;
  // Inserts or replaces the row of (ns, rec.name).
  virtual Result<void> save_lock(const std::string& ns, const core::LockRecord& rec) = 0;
  virtual Result<void> delete_lock(const std::string& ns, const std::string& name) = 0;
  // The rows of `ns` held at `now` (core::is_held, L3: the lease is live; the SQL stores select
  // them with store/lease_sql.h's live term), by name. Also gives the overview's held count.
  virtual Result<std::vector<core::LockRecord>> list_live_locks(const std::string& ns,
                                                                TimeMs now) = 0;

  // --- the durable lock waiter queue (core/lock.h Q1–Q4; decision 076) ---
  // Stores whose processes share nothing but the database keep one; the others keep none and
  // answer "no queue" (the defaults below), so their lock decisions are exactly L1–L8.
  // Liveness (the process's heartbeat, the waiter's deadline) is judged on the store's own clock.
  virtual bool keeps_lock_queue() const { return false; }
  virtual void prefetch_lock_queue(const std::string& /*ns*/, const std::string& /*name*/,
                                   const std::string& /*waiter_id*/) {}
  // `waiter_id` may be empty (no own place to look up).
  virtual Result<LockQueueView> find_lock_queue(const std::string& /*ns*/,
                                                const std::string& /*name*/,
                                                const std::string& /*waiter_id*/) {
    return LockQueueView{};
  }
  // Queues `row` (its seq is assigned) for this process, live until now + wait_ms.
  virtual Result<void> enqueue_lock_waiter(const std::string& /*ns*/, const std::string& /*name*/,
                                           const LockWaiterRow& /*row*/, std::int64_t /*wait_ms*/) {
    return {};
  }
  virtual Result<void> delete_lock_waiter(const std::string& /*ns*/, const std::string& /*name*/,
                                          const std::string& /*waiter_id*/) {
    return {};
  }
  // Live queued waiters of the lock; nullopt without a queue.
  virtual Result<std::optional<std::int64_t>> count_lock_waiters(const std::string& /*ns*/,
                                                                 const std::string& /*name*/) {
    return std::optional<std::int64_t>();
  }
  // Live queued waiters of every lock of the namespace that has any, by name (one query for a
  // whole list); nullopt without a queue.
  virtual Result<std::optional<std::map<std::string, std::int64_t>>> count_lock_waiters_in(
      const std::string& /*ns*/) {
    return std::optional<std::map<std::string, std::int64_t>>();
  }
};

}  // namespace ichido::store
