// SqliteStore: the embedded store (the default). One file, DIR/ichido.db, in WAL mode.
//
// Writes: one writer thread owns the only write connection and does group commit (after
// LevelDB's DBImpl::Write): it takes every job queued so far (up to max_batch), runs them one
// after another in one transaction, commits once — one fsync of the WAL for the whole batch
// (synchronous=FULL) — and only then calls every job's `finish`. So an answer is never sent
// before its change is on disk, and the fsync cost is shared by everyone who queued while the
// previous batch was being synced. A job that fails has normally written nothing (the rules
// decide before they write); when one did write, the batch is rolled back and run again with a
// SAVEPOINT around each job, so the failed job's writes are undone alone (commit_batch).
//
// If a commit fails with an I/O error, the store stops accepting writes for good (every later
// write gets store_unavailable, /readyz fails): after a failed fsync the state of the file is not
// known, and carrying on could acknowledge writes that are not durable. Disk-full errors roll back
// the batch and the store keeps serving (space may come back).
//
// Reads: `readers` threads, each with its own connection, run read jobs in a deferred
// transaction (a consistent WAL snapshot that sees every acknowledged commit).
//
// Lifecycle: open() → use → close() (drains queued jobs). A DIR/LOCK file held with flock keeps
// a second process from opening the same data directory.
// Thread-safety: all public methods are safe from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "ichido/clock.h"
#include "store/sqlite/db.h"
#include "store/sqlite/sqlite_tables.h"
#include "store/table_store.h"

namespace ichido::store::sqlite {

struct Options {
  std::string dir;                 // data directory; created (mode 0700) when missing
  int readers = 2;                 // read threads / connections
  std::size_t max_batch = 1024;    // jobs per commit at most
  std::size_t max_queue = 100000;  // queued jobs beyond this are refused (store_unavailable)
  Clock* clock = &SystemClock::instance();
};

class SqliteStore final : public TableStore {
  friend class SqliteStoreTestPeer;  // tests submit hand-made jobs

 public:
  static Result<std::unique_ptr<SqliteStore>> open(Options options);
  ~SqliteStore() override;

  Result<void> check_ready() override;
  StoreStats stats() const override;
  void close() override;

  const std::string& db_path() const { return db_path_; }

 protected:
  void submit_write(Job job) override;
  void submit_read(Job job) override;

 private:
  explicit SqliteStore(Options options);
  Result<void> start();
  void writer_loop();
  void reader_loop(int index);
  void commit_batch(std::vector<Job>& batch);
  enum class Attempt { applied, dirty_failure, failed };
  Attempt apply_batch(std::vector<Job>& batch, TimeMs now, bool isolate);

  // Constant after construction.
  const Options opt_;
  std::string db_path_;
  int lock_fd_ = -1;

  Mutex mu_;
  CondVar write_cv_;  // the writer waits here (with mu_)
  CondVar read_cv_;   // readers wait here (with mu_)
  std::deque<Job> write_queue_ GUARDED_BY(mu_);
  std::deque<Job> read_queue_ GUARDED_BY(mu_);
  bool closing_ GUARDED_BY(mu_) = false;

  std::atomic<bool> failed_{false};  // a commit failed with an I/O error: no more writes
  std::atomic<std::uint64_t> commits_{0};
  std::atomic<std::uint64_t> committed_commands_{0};
  std::atomic<std::uint64_t> failed_commits_{0};
  std::atomic<std::uint64_t> isolated_batches_{0};  // batches re-run with a savepoint per job

  std::unique_ptr<Db> write_db_;               // owned by the writer thread once started
  WriterCache cache_;                          // the writer thread's; cleared on every rollback
  std::vector<std::unique_ptr<Db>> read_dbs_;  // one per reader thread
  std::thread writer_;
  std::vector<std::thread> readers_;
  std::once_flag close_once_;
};

}  // namespace ichido::store::sqlite
