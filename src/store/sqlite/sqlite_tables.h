// SqliteTables: the Tables interface over one SQLite connection. The caller owns the transaction.
#pragma once

#include "store/sqlite/db.h"
#include "store/tables.h"

namespace ichido::store::sqlite {

class SqliteTables final : public Tables {
 public:
  explicit SqliteTables(Db& db) : db_(db) {}

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
                                                      const std::string& period,
                                                      std::int64_t after, int limit) override;

  // Once records: defined in sqlite_once_tables.cc.
  Result<std::optional<core::OnceRecord>> find_once(const std::string& ns,
                                                    const std::string& key) override;
  Result<void> save_once(const std::string& ns, const core::OnceRecord& rec) override;
  Result<bool> delete_once(const std::string& ns, const std::string& key) override;
  Result<std::vector<core::OnceRecord>> list_once(const std::string& ns, core::OnceFilter filter,
                                                  TimeMs now, const std::string& after,
                                                  int limit) override;
  Result<std::int64_t> purge_once(TimeMs older_than, int limit) override;
  // sqlite_admin_tables.cc
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
  Result<std::vector<core::LockRecord>> list_live_locks(const std::string& ns,
                                                        TimeMs now) override;

 private:
  Db& db_;
};

}  // namespace ichido::store::sqlite
