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
    // Of the writer's: the frames it copied that the checkpointer had not, in all; and how many
    // times the checkpointer was half a WAL behind, so that the writer copied the rest.
    std::uint64_t writer_copied_frames, writer_catch_ups;
  };
  static Checkpoints checkpoints(const SqliteStore& s) {
    return {s.checkpoints_.load(), s.writer_checkpoints_.load(), s.writer_copied_frames_.load(),
            s.writer_catch_ups_.load()};
  }
};

}  // namespace ichido::store::sqlite
