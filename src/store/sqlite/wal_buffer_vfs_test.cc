// The WAL write buffer (decision 132) through Db, as the store uses it: large commits, a second
// connection that must see every committed frame, a reopen, and the write counts.
#include "store/sqlite/wal_buffer_vfs.h"

#include <gtest/gtest.h>

#include <string>

#include "store/sqlite/db.h"
#include "store/testing/sync_store.h"

namespace ichido::store::sqlite {
namespace {

std::int64_t Scalar(Db& db, const char* sql) {
  auto q = db.query(sql);
  EXPECT_TRUE(q.ok());
  if (!q.ok() || q->step() != SQLITE_ROW) return -1;
  return q->int64(0);
}

// One transaction far larger than one write of the wrapped VFS (which cannot write 128 KiB or
// more at once): 64 rows of 32 KiB, ≈ 2 MiB of WAL frames in one commit.
TEST(WalBufferVfs, ALargeCommitReachesTheFileWhole) {
  store_testing::TempDir dir;
  const std::string path = dir.path() + "/t.db";
  Db writer;
  ASSERT_TRUE(writer.open(path, /*create=*/true).ok());
  ASSERT_TRUE(
      writer.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, x BLOB NOT NULL)", "create").ok());
  const WalBufferStats before = wal_buffer_stats();
  ASSERT_TRUE(writer.exec("BEGIN IMMEDIATE", "begin").ok());
  for (int i = 0; i < 64; ++i) {
    ASSERT_TRUE(writer.exec("INSERT INTO t (x) VALUES (randomblob(32768))", "insert").ok())
        << writer.describe();
  }
  ASSERT_TRUE(writer.exec("COMMIT", "commit").ok()) << writer.describe();
  const WalBufferStats after = wal_buffer_stats();
  const auto out = after.writes_out - before.writes_out;
  const auto buffered = after.writes_buffered - before.writes_buffered;
  // ≈ 530 pages: ≈ 1,060 writes from SQLite, ≈ 33 writes of 64 KiB out.
  EXPECT_GE(buffered, 1000u);
  EXPECT_GE(out, 30u);
  EXPECT_LE(out, 40u);

  // Another connection reads what the commit published: every frame is in the file.
  Db reader;
  ASSERT_TRUE(reader.open(path, /*create=*/false).ok());
  EXPECT_EQ(Scalar(reader, "SELECT count(*) FROM t"), 64);
  EXPECT_EQ(Scalar(reader, "SELECT sum(length(x)) FROM t"), 64 * 32768);

  // A second large commit after a checkpoint restarted the WAL from its start, then a reopen.
  ASSERT_TRUE(writer.exec("PRAGMA wal_checkpoint(RESTART)", "checkpoint").ok());
  ASSERT_TRUE(writer.exec("UPDATE t SET x = randomblob(32768) WHERE id % 2 = 0", "update").ok());
  EXPECT_EQ(Scalar(reader, "SELECT count(*) FROM t WHERE length(x) = 32768"), 64);
  reader.close();
  writer.close();
  Db again;
  ASSERT_TRUE(again.open(path, /*create=*/false).ok());
  EXPECT_EQ(Scalar(again, "SELECT sum(length(x)) FROM t"), 64 * 32768);
  EXPECT_EQ(Scalar(again,
                   "SELECT count(*) FROM pragma_integrity_check WHERE "
                   "integrity_check = 'ok'"),
            1);
}

}  // namespace
}  // namespace ichido::store::sqlite
