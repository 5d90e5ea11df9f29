// For tests only: lets a test queue a hand-made job (one no command would make, e.g. one that
// writes and then fails, or throws).
#pragma once

#include "store/sqlite/sqlite_store.h"

namespace ichido::store::sqlite {

class SqliteStoreTestPeer {
 public:
  static void submit_write(SqliteStore& s, Job job) { s.submit_write(std::move(job)); }
  // Who did the checkpoints (stats() has their sum and the failures).
  struct Checkpoints {
    std::uint64_t by_checkpointer, by_writer;
  };
  static Checkpoints checkpoints(const SqliteStore& s) {
    return {s.checkpoints_.load(), s.writer_checkpoints_.load()};
  }
};

}  // namespace ichido::store::sqlite
