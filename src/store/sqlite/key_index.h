// key_index: the key table as the embedded store's threads share it (decision 143 §4–§7): the
// locking, the snapshot copy and the load at start-up. SqliteStore holds one (sqlite_store.h,
// "Keys").
//
// The writer looks keys up, inserts the slots of its batch and removes them again when the
// batch rolls back, and removes a deleted row's slot after its commit. Readers look keys up.
// A snapshot thread copies the table to its file (key_table_file.h) while the writer goes on.
//
// The snapshot's promise: the file holds the slot of every row with kseq ≤ last_kseq that
// still exists when the copy ends, where last_kseq is a kseq the caller saw committed before it
// called write_snapshot() (every slot is inserted before its row commits). It holds because no
// slot moves while a copy runs: inserts only fill empty slots; removals (a deletion's or a
// rollback's) wait in a list until the copy ends; growth waits too while the load stays ≤ 7/8,
// and beyond that the table grows and the copy starts over. A slot left in place meanwhile —
// a rolled-back or deleted row's — is only a candidate that its row refuses (key_table.h).
//
// Locking: one SharedMutex. Lookups hold its shared side while they probe and confirm (a
// confirmation reads a row); the writer holds the exclusive side for each insert or removal,
// not for a whole batch; a copy holds the shared side for one chunk at a time (1 MiB of slots).
// Thread-safety: lookups from any thread; the writer's calls from one thread at a time;
// write_snapshot() from one thread at a time (a second call waits).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/mutex.h"
#include "ichido/result.h"
#include "store/sqlite/key_table.h"
#include "store/sqlite/key_table_file.h"

namespace ichido::store::sqlite {

class KeyIndex {
 public:
  KeyIndex(KeyTable table, KeySecret secret) : table_(std::move(table)), secret_(secret) {}

  const KeySecret& secret() const { return secret_; }
  std::uint64_t hash(KeyKind kind, std::string_view scope, std::string_view key) const {
    return key_hash(secret_, kind, scope, key);
  }

  // KeyTable::find under the shared lock: `confirm(kseq)` reads the row and compares.
  template <class Confirm>
  std::uint64_t find(std::uint64_t hash, Confirm&& confirm) const EXCLUDES(mu_) {
    ReaderLock lock(mu_);
    return table_.find(hash, confirm);
  }

  // The writer's calls (KeyTable's, with the copy's rules above; insert() throws as
  // KeyTable::insert does, leaving the table as it was).
  void begin_batch() EXCLUDES(mu_);
  void insert(std::uint64_t hash, std::uint64_t kseq) EXCLUDES(mu_);
  void commit_batch() EXCLUDES(mu_);
  void rollback_batch() EXCLUDES(mu_);
  // A savepoint's mark and its rollback (KeyTable::undo_mark, rollback_to); during a copy the
  // slots stay until it ends, as a rolled-back batch's do.
  std::size_t undo_mark() const EXCLUDES(mu_);
  void rollback_to(std::size_t mark) EXCLUDES(mu_);
  void erase(std::uint64_t hash, std::uint64_t kseq) EXCLUDES(mu_);

  // Writes the table to `path` (key_table_file.h) with `last_kseq` and `snapshot_id`, a chunk
  // of `chunk_slots` at a time. `between_chunks`, when given, runs after each chunk with no
  // lock held (tests use it to change the table in the middle of a copy). Errors: the file's
  // (store_unavailable); the table is then as the writer left it, its waiting removals done.
  Result<void> write_snapshot(const std::string& path, std::uint64_t last_kseq,
                              std::uint64_t snapshot_id,
                              std::uint32_t chunk_slots = kKeyTableChunkSlots,
                              const std::function<void()>& between_chunks = {}) EXCLUDES(mu_);

  struct Stats {
    std::uint64_t snapshots = 0;          // written whole
    std::uint64_t restarts = 0;           // copies started over after a growth
    std::uint64_t deferred_removals = 0;  // removals that waited for a copy
    std::size_t keys = 0;                 // slots in the table now
    std::size_t capacity = 0;
  };
  Stats stats() const EXCLUDES(mu_);

 private:
  void end_copy() EXCLUDES(mu_);

  mutable SharedMutex mu_;
  KeyTable table_ GUARDED_BY(mu_);
  const KeySecret secret_;
  bool copying_ GUARDED_BY(mu_) = false;
  std::uint64_t generation_ GUARDED_BY(mu_) = 0;         // +1 whenever slots move (growth)
  std::vector<std::uint64_t> deferred_ GUARDED_BY(mu_);  // slot values to remove after the copy
  Stats stats_ GUARDED_BY(mu_);
  Mutex snapshot_mu_;  // one copy at a time
};

// Start-up (decision 143 §7). `scan(after, add)` calls add(kind, scope, key, kseq) for every
// row with a key whose kseq is above `after` (in any order) and returns its error.
using KeyRowSink = std::function<void(KeyKind kind, std::string_view scope, std::string_view key,
                                      std::uint64_t kseq)>;
using KeyScan = std::function<Result<void>(std::uint64_t after, const KeyRowSink& add)>;

struct OpenedKeyIndex {
  std::unique_ptr<KeyIndex> index;
  bool from_snapshot = false;       // the file was loaded and caught up; else rebuilt from the rows
  std::string rebuilt_because;      // why the file was not used (empty when it was)
  std::uint64_t rows_scanned = 0;   // rows added after the snapshot, or all rows on a rebuild
  std::uint64_t slots_dropped = 0;  // slots above the snapshot's last_kseq, removed before catch-up
  std::uint64_t snapshot_last_kseq = 0;  // the loaded file's last_kseq (0 when rebuilt)
};

// The key index of a store whose database names snapshot `db_snapshot_id` (0: none) and whose
// key sequence stands at `db_last_kseq`. The file at `path` is used when it reads whole, is
// that snapshot, and its last_kseq is ≤ db_last_kseq; its slots with a kseq above last_kseq are
// dropped (rows of that time are added again by the scan, and a batch that never committed
// leaves none behind), then the rows above last_kseq are added. Otherwise the table is rebuilt
// from every row, under a new secret, sized for `expected_keys`. Errors: the scan's.
Result<OpenedKeyIndex> open_key_index(const std::string& path, std::uint64_t db_snapshot_id,
                                      std::uint64_t db_last_kseq, std::size_t expected_keys,
                                      const KeyScan& scan);

}  // namespace ichido::store::sqlite
