// For tests only: lets a test queue a hand-made job (one no command would make, e.g. one that
// writes and then fails, or throws).
#pragma once

#include "store/sqlite/sqlite_store.h"

namespace ichido::store::sqlite {

class SqliteStoreTestPeer {
 public:
  static void submit_write(SqliteStore& s, Job job) { s.submit_write(std::move(job)); }
};

}  // namespace ichido::store::sqlite
