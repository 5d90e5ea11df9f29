// For tests only: lets a test queue a hand-made job (one no command would make, e.g. one that
// writes and then fails, or throws).
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>

#include "store/sqlite/sqlite_store.h"

namespace ichido::store::sqlite {

class SqliteStoreTestPeer {
 public:
  static void submit_write(SqliteStore& s, Job job) { s.submit_write(std::move(job)); }
  // Who did the checkpoints (stats() has their sum and the failures).
  struct Checkpoints {
    std::uint64_t by_checkpointer, by_writer;
    // Of the writer's: the frames it copied that the checkpointer had not, in all; and how many
    // times the checkpointer was half a WAL behind, so that the writer copied the rest.
    std::uint64_t writer_copied_frames, writer_catch_ups;
  };
  // How many times the writer appended zeros to the WAL (decision 151).
  static std::uint64_t wal_zero_fills(const SqliteStore& s) { return s.wal_zero_fills_.load(); }
  // That count, once it is not 0 or 30 s have passed: the writer fills when it is quiet, on its
  // own thread.
  static std::uint64_t await_wal_zero_fill(const SqliteStore& s) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (wal_zero_fills(s) == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return wal_zero_fills(s);
  }
  static Checkpoints checkpoints(const SqliteStore& s) {
    return {s.checkpoints_.load(), s.writer_checkpoints_.load(), s.writer_copied_frames_.load(),
            s.writer_catch_ups_.load()};
  }
};

}  // namespace ichido::store::sqlite
