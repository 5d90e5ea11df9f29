// PgTables: the Tables interface over one PgConn, inside a transaction the caller (PgStore, or the
// token CLI) opened. Finds and saves rows; never decides anything (that is core/ and the shared
// *_ops.cc, exactly as over SQLite).
//
// Writes whose only answer is "done" (save_period, save_issued, save_once, save_lock, delete_lock,
// insert_token, save_token) are pipelined when `pipelined_writes` is on: they are sent and not
// waited for, and a failure shows up at the next read or at COMMIT — which then fails the whole
// batch, so PgStore re-runs it with writes waited for one by one and a savepoint per job. Reads,
// and writes that return something (ids, counts, tokens), wait.
//
// Thread-safety: none (like the connection it uses).
#pragma once

#include <cstdint>
#include <string>

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
  Stmt next_token, find_counter, insert_counter, list_counters, find_period, save_period,
      find_issued_by_key, find_issued, highest_issued, save_issued, list_issued;
  // Once records.
  Stmt find_once, save_once, delete_once, list_once_all, list_once_processing, list_once_expired,
      list_once_state, purge_candidates, purge_delete;
  // Tokens, audit.
  Stmt insert_token, find_token, save_token, list_tokens, count_tokens, insert_audit, list_audit;
  // Locks.
  Stmt find_lock, save_lock, delete_lock, list_live_locks;
  // Health.
  Stmt probe;
};

class PgTables final : public Tables {
 public:
  PgTables(PgConn& conn, const Sql& sql) : conn_(conn), sql_(sql) {}

  void set_pipelined_writes(bool on) { pipelined_ = on; }
  // Writes issued so far (a failed job that wrote must be undone: see PgStore).
  std::uint64_t writes() const { return writes_; }

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
  Result<std::int64_t> purge_once(TimeMs older_than, int limit) override;

  Result<void> insert_token(const core::TokenInfo& t) override;
  Result<std::optional<core::TokenInfo>> find_token(const std::string& id) override;
  Result<void> save_token(const core::TokenInfo& t) override;
  Result<std::vector<core::TokenInfo>> list_tokens() override;
  Result<std::int64_t> insert_audit(const core::AuditEntry& e) override;
  Result<std::vector<core::AuditEntry>> list_audit(std::int64_t after, int limit) override;

  Result<std::optional<core::LockRecord>> find_lock(const std::string& ns,
                                                    const std::string& name) override;
  Result<void> save_lock(const std::string& ns, const core::LockRecord& rec) override;
  Result<void> delete_lock(const std::string& ns, const std::string& name) override;
  Result<std::vector<core::LockRecord>> list_live_locks(const std::string& ns, TimeMs now) override;

  // Not in Tables: how many tokens exist (the first start's admin token is made only when none).
  Result<std::int64_t> count_tokens();

 private:
  // A write whose result is only "done": pipelined or waited for.
  Result<void> write(const Stmt& stmt, const Params& params);

  PgConn& conn_;
  const Sql& sql_;
  bool pipelined_ = false;
  std::uint64_t writes_ = 0;
};

}  // namespace ichido::store::postgres
