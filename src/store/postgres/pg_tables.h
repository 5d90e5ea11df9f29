// PgTables: the Tables interface over one PgConn, inside a transaction the caller (PgStore, or the
// token CLI) opened. Finds and saves rows; never decides anything (that is core/ and the shared
// *_ops.cc, exactly as over SQLite).
//
// Round trips are what a batch costs, so in a write batch (`set_batch_mode(true)`):
// - Writes whose only answer is "done" (save_period, save_issued, save_once, save_lock,
//   delete_lock, insert_token, save_token) are pipelined: sent and not waited for; a failure shows
//   up at the next read or at COMMIT — which then fails the whole batch, so PgStore re-runs it
//   with batch mode off (every statement waited for) and a savepoint per job.
// - The rows the jobs announce (Tables::prefetch_*) are fetched together, pipelined, right after
//   the key locks: the batch's first lookup waits for all of them in one round trip.
// - Rows looked up or written (counters, periods, issued numbers by key, once records, locks)
//   are remembered until the transaction ends, and every write of this transaction updates what
//   is remembered: the batch holds the key lock of each of these rows, so no other transaction
//   can change them meanwhile. A batch of `next` on one counter reads the counter and its period
//   once instead of once per command.
// - Fencing tokens are drawn `token_batch` at a time (after the key locks, like one at a time
//   would be): every key of the batch is locked until COMMIT, so the tokens still increase per
//   key in grant order across nodes; the unused ones are left as gaps.
// Outside batch mode every statement is waited for and nothing is remembered.
//
// Thread-safety: none (like the connection it uses).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "store/postgres/pg_conn.h"
#include "store/tables.h"

namespace ichido::store::postgres {

// Every statement the store runs, with the schema name filled in. Built once per store.
struct Sql {
  explicit Sql(const std::string& schema);

  // Transactions.
  Stmt begin_write, begin_read, tx_settings, lock_keys_now, now, commit, rollback, savepoint,
      rollback_to_savepoint, release_savepoint;
  // Tokens sequence, counters.
  Stmt next_token, find_counter, insert_counter, list_counters, find_period, latest_period,
      save_period, find_issued_by_key, find_issued_by_counter_key, find_issued, highest_issued,
      save_issued, list_issued;
  // Once records.
  Stmt find_once, save_once, delete_once, purge_candidates, purge_delete;
  std::array<Stmt, std::size(core::kOnceFilters)> list_once;  // by core::OnceFilter's value
  // Namespace settings; namespaces and counts (the dashboard's overview).
  Stmt find_ns_settings, save_ns_settings, delete_ns_settings, list_namespaces, count_once_state,
      count_once_processing;
  // Tokens, audit.
  Stmt insert_token, find_token, find_token_by_hash, save_token, list_tokens, count_tokens,
      insert_audit, list_audit, list_audit_newest;
  // Locks.
  Stmt find_lock, save_lock, delete_lock, list_live_locks;
  // The lock waiter queue and the nodes' heartbeat leases (docs/decisions/076).
  Stmt find_lock_queue, enqueue_lock_waiter, delete_lock_waiter, count_lock_waiters,
      count_lock_waiters_in, node_heartbeat, node_cleanup, node_leave;
  // Token epoch (decision 077): bumped by a revoke, applied by each node, awaited by the revoker.
  Stmt bump_token_epoch, token_epoch, node_tokens_applied, token_acks_pending;
  // Health, identity.
  Stmt probe, find_store_id;
  // The change feed (change_feed.h): SELECT pg_notify(channel, payload).
  Stmt notify;
};

class PgTables final : public Tables {
 public:
  // `node_id`: the process whose waiters this transaction queues (empty: none, e.g. the CLI).
  PgTables(PgConn& conn, const Sql& sql, std::string node_id = std::string())
      : conn_(conn), sql_(sql), node_id_(std::move(node_id)) {}

  void set_batch_mode(bool on) { batched_ = on; }
  // Tokens drawn per nextval round trip in batch mode (1..1000).
  void set_token_batch(int n) { token_batch_ = n < 1 ? 1 : n > 1000 ? 1000 : n; }
  // Writes issued so far (a failed job that wrote must be undone: see PgStore).
  std::uint64_t writes() const { return writes_; }

  void prefetch_counter(const std::string& ns, const std::string& name) override;
  void prefetch_issued_by_key(const std::string& ns, const std::string& name,
                              const std::string& key) override;
  void prefetch_once(const std::string& ns, const std::string& key) override;
  void prefetch_lock(const std::string& ns, const std::string& name) override;
  void prefetch_token() override { ++tokens_wanted_; }
  // After the prefetch_* calls of a batch: draws the tokens they announced (in the same
  // pipeline, so after the batch's key locks).
  void end_prefetch();
  // Before COMMIT: sends the writes batch mode defers (each period row once, with its last value).
  Result<void> flush_writes();

  Result<std::int64_t> next_token() override;

  Result<std::optional<CounterRow>> find_counter(const std::string& ns,
                                                 const std::string& name) override;
  Result<std::int64_t> insert_counter(const CounterRow& row) override;
  Result<std::vector<CounterRow>> list_counters(const std::string& ns) override;
  Result<std::optional<PeriodRow>> find_period(std::int64_t counter_id,
                                               const std::string& period) override;
  Result<void> save_period(std::int64_t counter_id, const std::string& period,
                           const PeriodRow& row) override;
  Result<std::optional<core::IssuedNumber>> find_issued_by_key(std::int64_t counter_id,
                                                               const std::string& key) override;
  Result<std::optional<core::IssuedNumber>> find_issued(std::int64_t counter_id,
                                                        const std::string& period,
                                                        std::int64_t value) override;
  Result<std::optional<std::int64_t>> highest_issued(std::int64_t counter_id,
                                                     const std::string& period) override;
  Result<void> save_issued(std::int64_t counter_id, const core::IssuedNumber& rec) override;
  Result<std::vector<core::IssuedNumber>> list_issued(std::int64_t counter_id,
                                                      const std::string& period, std::int64_t after,
                                                      int limit) override;

  Result<std::optional<core::OnceRecord>> find_once(const std::string& ns,
                                                    const std::string& key) override;
  Result<void> save_once(const std::string& ns, const core::OnceRecord& rec) override;
  Result<bool> delete_once(const std::string& ns, const std::string& key) override;
  Result<std::vector<core::OnceRecord>> list_once(const std::string& ns, core::OnceFilter filter,
                                                  TimeMs now, const std::string& after,
                                                  int limit) override;
  // Deletes only records whose key no other transaction holds (pg_try_advisory_xact_lock on the
  // record's job_key), so a purge never interleaves with a command on the same key.
  Result<std::int64_t> purge_once_in(const std::string& ns, TimeMs older_than, int limit) override;

  Result<std::optional<NamespaceSettings>> find_ns_settings(const std::string& ns) override;
  Result<void> save_ns_settings(const std::string& ns, const NamespaceSettings& s) override;

  Result<void> insert_token(const core::TokenInfo& t) override;
  Result<std::optional<core::TokenInfo>> find_token(const std::string& id) override;
  Result<std::optional<core::TokenInfo>> find_token_by_hash(const std::string& hash) override;
  Result<void> save_token(const core::TokenInfo& t) override;
  Result<std::vector<core::TokenInfo>> list_tokens() override;
  Result<std::int64_t> insert_audit(const core::AuditEntry& e) override;
  Result<std::vector<core::AuditEntry>> list_audit(const AuditQuery& q) override;
  Result<std::vector<std::string>> list_namespaces() override;
  Result<OnceCounts> count_once(const std::string& ns, TimeMs now, std::int64_t cap) override;

  Result<std::optional<core::LockRecord>> find_lock(const std::string& ns,
                                                    const std::string& name) override;
  Result<void> save_lock(const std::string& ns, const core::LockRecord& rec) override;
  Result<void> delete_lock(const std::string& ns, const std::string& name) override;
  Result<std::vector<core::LockRecord>> list_live_locks(const std::string& ns, TimeMs now) override;
  // The waiter queue: liveness is judged on the database's clock (clock_timestamp()), like the
  // nodes' heartbeat leases it compares with.
  bool keeps_lock_queue() const override { return true; }
  Result<void> bump_token_epoch() override;
  void prefetch_lock_queue(const std::string& ns, const std::string& name,
                           const std::string& waiter_id) override;
  Result<LockQueueView> find_lock_queue(const std::string& ns, const std::string& name,
                                        const std::string& waiter_id) override;
  Result<void> enqueue_lock_waiter(const std::string& ns, const std::string& name,
                                   const LockWaiterRow& row, std::int64_t wait_ms) override;
  Result<void> delete_lock_waiter(const std::string& ns, const std::string& name,
                                  const std::string& waiter_id) override;
  Result<std::optional<std::int64_t>> count_lock_waiters(const std::string& ns,
                                                         const std::string& name) override;
  Result<std::optional<std::map<std::string, std::int64_t>>> count_lock_waiters_in(
      const std::string& ns) override;

  // Not in Tables: how many tokens exist (the first start's admin token is made only when none).
  Result<std::int64_t> count_tokens();

 private:
  // A write whose result is only "done": pipelined or waited for.
  Result<void> write(const Stmt& stmt, const Params& params);

  PgConn& conn_;
  const Sql& sql_;
  const std::string node_id_;
  bool batched_ = false;
  int token_batch_ = 1;
  std::uint64_t writes_ = 0;
  // A row remembered in batch mode. ready == false: its prefetch was sent, the answer not read
  // yet (PgConn::wait_results() reads it).
  template <class T>
  struct Slot {
    bool ready = false;
    std::optional<T> value;  // nullopt: there is no such row
  };
  template <class T>
  using Rows = std::unordered_map<std::string, Slot<T>>;
  // The remembered value of `key` in `rows` (reading outstanding prefetch answers first), or
  // nullopt when nothing is remembered (then look it up). Errors: the prefetch failed.
  template <class T>
  Result<std::optional<std::optional<T>>> remembered(Rows<T>& rows, const std::string& key);

  // Batch mode only; this transaction's (see the class comment). Keys: ns '\0' name, ns '\0' key,
  // counter id '\0' period, ns '\0' counter name '\0' key.
  Rows<CounterRow> counters_;
  std::unordered_map<std::int64_t, std::string> counter_names_;  // id -> ns '\0' name
  std::unordered_map<std::string, PeriodRow> periods_;
  Rows<core::IssuedNumber> issued_;
  Rows<core::OnceRecord> once_;
  Rows<core::LockRecord> locks_;
  // Queue views by ns '\0' name '\0' waiter id; a lock whose queue this transaction wrote
  // (queue_written_, by ns '\0' name) is looked up again instead.
  Rows<LockQueueView> queues_;
  std::unordered_set<std::string> queue_written_;
  std::vector<std::int64_t> tokens_;  // drawn, unused; largest first
  int tokens_wanted_ = 0;             // announced by prefetch_token, not drawn yet
  // The latest period row of each counter prefetched (by ns '\0' name): labels of one counter
  // sort in time order, so a period after it has no row yet. nullopt: the counter has no period
  // row at all.
  Rows<std::pair<std::string, PeriodRow>> latest_period_;
  // Period rows saved and not yet written (flush_writes): key of periods_ -> (id, period).
  std::map<std::string, std::pair<std::int64_t, std::string>> dirty_periods_;
};

// Decision 077: waits until every live node but `self` (empty: none is skipped) has applied
// every token revocation committed so far, polling every 2 ms, at most `timeout`. Returns the
// ids of the live nodes that had not confirmed by then (empty: all did). Blocks.
Result<std::vector<std::string>> wait_for_token_acks(PgConn& conn, const Sql& sql,
                                                     const std::string& self,
                                                     std::chrono::milliseconds timeout);

}  // namespace ichido::store::postgres
