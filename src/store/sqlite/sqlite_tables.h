// SqliteTables: the Tables interface over one SQLite connection. The caller owns the transaction.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "store/sqlite/db.h"
#include "store/sqlite/key_index.h"
#include "store/tables.h"

namespace ichido::store::sqlite {

// Counter rows and period rows as the writer last read or wrote them, so that a counter `next`
// runs three statements instead of five. Only for the writer connection (the one writer of these
// tables: counters are never changed after creation, periods only through save_period), and
// write-through: a row enters only after the statement that read or wrote it succeeded. Any
// rollback may undo cached rows, so whoever rolls back must clear() it.
//
// Deferred writes (decision 130): while `defer_writes` is set (the writer's optimistic batch,
// sqlite_store.cc), save_period only records the row as pending, next_kseq and next_token draw
// from their sequence's value read once per batch, and SqliteTables::flush_writes() writes every
// pending row and each sequence that moved once, before COMMIT. A batch of `next` on one counter
// so writes its period row once instead of once per command, a batch of keyed numbers the key
// sequence once, and a batch of grants the token sequence once. Pending writes are part of the
// transaction: clear() (every rollback) drops them with everything else, and `deferred_writes`
// counts them so that "did this failed job write?" still sees them. An isolated batch writes
// through, so that a job's savepoint rolled back takes its draws with it. start_batch() forgets
// the sequences' values, so every batch reads them again (nothing else can change them between
// batches unseen). The token row thus holds the last token of a committed transaction.
class WriterCache {
 public:
  void clear() {
    counters_.clear();
    periods_.clear();
    pending_periods_.clear();
    absent_once_.clear();
    start_batch();
  }
  void start_batch() {
    token_ = Sequence{};
    kseq_ = Sequence{};
  }
  // The largest token drawn since the writer last reset it (data_dir.h D4). Not a cache: a
  // rollback makes it an over-estimate, which only reserves tokens early.
  std::int64_t drawn_token = 0;
  // Set when a key stamp (kseq, decision 143) was drawn since the writer last reset it: the
  // writer then reads the committed sequence before COMMIT (a rollback makes it a false alarm).
  bool drew_kseq = false;
  bool defer_writes = false;          // set by the writer around an optimistic batch
  std::uint64_t deferred_writes = 0;  // period saves and token draws deferred (never reset)

 private:
  friend class SqliteTables;
  static constexpr std::size_t kMaxRows = 10000;  // then start over (a clear is always safe)
  template <class Map, class Row>
  static void put(Map& m, std::string key, Row row) {
    if (m.size() >= kMaxRows) m.clear();
    m.insert_or_assign(std::move(key), std::move(row));
  }
  std::unordered_map<std::string, CounterRow> counters_;  // by ns '\0' name
  std::unordered_map<std::string, PeriodRow> periods_;    // by counter id '\0' period
  struct PendingPeriod {
    std::int64_t counter_id;
    std::string period;
    PeriodRow row;
  };
  // Not bounded by kMaxRows: it holds at most one row per counter period the batch touched,
  // and is emptied at every flush or rollback.
  std::unordered_map<std::string, PendingPeriod> pending_periods_;  // same keys as periods_
  // ns '\0' key of the once record the writer's last find_once found absent, until the next
  // find_once or save_once (which then inserts without trying an UPDATE first). One job finds
  // and saves its record one after the other on the one writer thread, so the hint cannot be
  // stale when its save reads it; a rollback clears it.
  std::string absent_once_;
  // A sequence drawn from in an optimistic batch: its value once read, and whether the table is
  // behind it (written by flush_writes).
  struct Sequence {
    std::optional<std::int64_t> value;
    bool dirty = false;
  };
  Sequence token_;  // 'token': fencing tokens
  Sequence kseq_;   // 'key': key stamps (decision 143)
};

// The condition of the partial index once_open (schema migration 11, decision 131). SQLite uses
// a partial index only for a query that has the index's condition word for word as one of its
// WHERE terms (`state = 'pending'` alone does not qualify), so every query meant for once_open
// adds this term. Completed records are found through the (ns, key) unique index.
#define ICHIDO_ONCE_OPEN "state <> 'completed'"

// Issued numbers' keys (decision 143): with a KeyIndex, find_issued_by_key probes it and
// confirms each candidate by reading the row with that kseq through issued_by_kseq, and
// insert_issued_unless_key stamps the row with the next kseq and inserts its slot (inside the
// writer's batch: removed again if the batch or the job's savepoint rolls back). Without one
// (tools, tests of other tables) a lookup reads the counter's rows, and a keyed number cannot be
// inserted (internal): a row without its slot would break the key's uniqueness.
class SqliteTables final : public Tables {
 public:
  explicit SqliteTables(Db& db, WriterCache* cache = nullptr, KeyIndex* keys = nullptr)
      : db_(db), cache_(cache), keys_(keys) {}
  Db& db() { return db_; }  // the connection these rows are read and written on

  Result<std::int64_t> next_token() override;
  // The value next_token will return, drawing nothing.
  Result<std::int64_t> peek_token();
  // The next key stamp (sequence 'key'), deferred like next_token.
  Result<std::int64_t> next_kseq();

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
  Result<bool> insert_issued_unless_key(std::int64_t counter_id,
                                        const core::IssuedNumber& rec) override;
  Result<std::vector<core::IssuedNumber>> list_issued(std::int64_t counter_id,
                                                      const std::string& period, std::int64_t after,
                                                      int limit) override;

  // Once records: defined in sqlite_once_tables.cc.
  Result<std::optional<core::OnceRecord>> find_once(const std::string& ns,
                                                    const std::string& key) override;
  Result<void> save_once(const std::string& ns, const core::OnceRecord& rec) override;
  Result<std::optional<core::OnceRecord>> insert_once_unless_found(const std::string& ns,
                                                                   core::OnceRecord& rec) override;
  Result<bool> delete_once(const std::string& ns, const std::string& key) override;
  Result<std::vector<core::OnceRecord>> list_once(const std::string& ns, core::OnceFilter filter,
                                                  TimeMs now, const std::string& after,
                                                  int limit) override;
  Result<std::int64_t> purge_once_in(const std::string& ns, TimeMs older_than, int limit) override;
  Result<std::optional<NamespaceSettings>> find_ns_settings(const std::string& ns) override;
  Result<void> save_ns_settings(const std::string& ns, const NamespaceSettings& s) override;
  // sqlite_admin_tables.cc
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

  // Writes the period rows save_period deferred (WriterCache::defer_writes), each once, and
  // each sequence row that a draw moved (the token row only when a draw passed its
  // reservation), and forgets them. Fails as a statement does (the transaction must then be
  // rolled back: which rows were written is unknown). Without a cache or anything pending:
  // nothing to do.
  Result<void> flush_writes();

  // The key index's place in the database (decision 143 §6–§7): the snapshot id that
  // key_index_snapshot names (0: none), the key sequence as committed, and every keyed row
  // with kseq above `after`, in kseq order (for open_key_index's scan).
  Result<std::uint64_t> key_snapshot_id();
  Result<void> save_key_snapshot_id(std::uint64_t id);
  Result<std::uint64_t> key_sequence();
  Result<void> scan_keys(std::uint64_t after, const KeyRowSink& add);

 private:
  Result<void> write_period(std::int64_t counter_id, const std::string& period,
                            const PeriodRow& row);
  Result<std::int64_t> draw(const char* name, WriterCache::Sequence* seq);
  // Writes a sequence's row when it is behind `seq` (dirty).
  Result<void> flush_sequence(const char* name, WriterCache::Sequence& seq);
  Result<std::int64_t> sequence_value(const char* name);  // 0 before its first draw
  // A deferred sequence's value in this batch (read from the table the first time).
  Result<std::int64_t> deferred_value(const char* name, WriterCache::Sequence* seq);
  // find_issued_by_key through the key index, the key's hash computed already.
  Result<std::optional<core::IssuedNumber>> find_issued_by_hash(std::int64_t counter_id,
                                                                const std::string& key,
                                                                std::uint64_t hash);
  Db& db_;
  WriterCache* cache_;  // the writer's; nullptr on readers
  KeyIndex* keys_;      // the store's (writer and readers); nullptr in tools
};

}  // namespace ichido::store::sqlite
