// For tests only: lets a test queue a hand-made job (one no command would make, e.g. one that
// writes and then fails, or throws).
#pragma once

#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "base/mutex.h"
#include "store/sqlite/db.h"
#include "store/sqlite/sqlite_store.h"

namespace ichido::store::sqlite {

// The tests' stand-in for the HTTP server's answer to Options::caller_may_commit
// (http::this_thread_serves_one_client): what the calling thread said of itself.
inline bool& test_serves_one_client() {
  static thread_local bool one = false;
  return one;
}
inline bool test_caller_may_commit() { return test_serves_one_client(); }

class SqliteStoreTestPeer {
 public:
  static void submit_write(SqliteStore& s, Job job) { s.submit_write(std::move(job)); }
  // Who did the checkpoints (stats() has their sum and the failures).
  struct Checkpoints {
    std::uint64_t by_checkpointer, by_writer;
  };
  // How many times the writer appended zeros to the WAL (decision 132), and how many times it
  // skipped that because another connection held the WAL's write lock.
  static std::uint64_t wal_zero_fills(const SqliteStore& s) { return s.wal_zero_fills_.load(); }
  static std::uint64_t wal_zero_fill_skips(const SqliteStore& s) {
    return s.wal_zero_fill_skips_.load();
  }
  // That count, once it is not 0 or 30 s have passed: the writer fills when it is quiet, on its
  // own thread.
  static std::uint64_t await_wal_zero_fill(const SqliteStore& s) {
    return await_nonzero(s.wal_zero_fills_);
  }
  static std::uint64_t await_wal_zero_fill_skip(const SqliteStore& s) {
    return await_nonzero(s.wal_zero_fill_skips_);
  }
  // Sets the write connection's busy timeout (5 s as opened). False when a batch or a fill holds
  // the connection: only an idle writer's connection is changed (under the store's mutex, as the
  // writer takes it), so that the test never touches it beside the writer.
  static bool set_write_busy_timeout(SqliteStore& s, int ms) {
    MutexLock lk(s.mu_);
    if (s.batch_running_) return false;
    return sqlite3_busy_timeout(s.write_db_->raw(), ms) == SQLITE_OK;
  }
  static Checkpoints checkpoints(const SqliteStore& s) {
    return {s.checkpoints_.load(), s.writer_checkpoints_.load()};
  }

 private:
  static std::uint64_t await_nonzero(const std::atomic<std::uint64_t>& n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (n.load() == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return n.load();
  }
};

}  // namespace ichido::store::sqlite
