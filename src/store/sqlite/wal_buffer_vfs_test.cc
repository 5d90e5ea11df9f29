// The WAL write buffer (decision 132) through Db, as the store uses it: large commits, a second
// connection that must see every committed frame, a reopen, and the write counts.
#include "store/sqlite/wal_buffer_vfs.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

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

bool IntegrityOk(Db& db) {
  return Scalar(db, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'") ==
         1;
}

// A new database at `path` with table t, its WAL never checkpointed by SQLite on its own (so that
// every commit stays in the WAL, as the zero-fill tests need).
void CreateWithoutCheckpoints(Db& db, const std::string& path) {
  ASSERT_TRUE(db.open(path, /*create=*/true).ok());
  ASSERT_TRUE(db.exec("PRAGMA wal_autocheckpoint = 0", "no checkpoints").ok());
  ASSERT_TRUE(db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, x BLOB NOT NULL)", "create").ok());
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
  EXPECT_TRUE(IntegrityOk(again));
}

std::int64_t FileSize(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::int64_t>(st.st_size) : -1;
}

// Zeros past the WAL's last frame (decision 132): appended and synced on request, written over
// by the commits after them (the file does not lengthen), and where SQLite's recovery stops when
// it finds them: a copy of the files as a crash would leave them (nothing checkpointed, zeros
// after the frames) opens with every committed row.
TEST(WalBufferVfs, ZerosPastTheLastFrameAreWrittenOverAndRecoveryStopsAtThem) {
  store_testing::TempDir dir;
  const std::string path = dir.path() + "/t.db";
  Db writer;
  ASSERT_NO_FATAL_FAILURE(CreateWithoutCheckpoints(writer, path));
  ASSERT_TRUE(writer.exec("INSERT INTO t (x) VALUES (randomblob(100))", "insert").ok());

  auto e = wal_extent(writer.raw());
  ASSERT_TRUE(e.has_value());
  EXPECT_GT(e->written_end, 0);
  EXPECT_EQ(e->file_end, e->written_end);
  EXPECT_EQ(FileSize(path + "-wal"), e->file_end);

  const std::int64_t until = e->written_end + (1 << 20);
  const auto zeroed_before = wal_buffer_stats().bytes_zeroed;
  ASSERT_TRUE(writer.exec("BEGIN IMMEDIATE", "lock the WAL").ok());
  ASSERT_EQ(wal_zero_fill(writer.raw(), until), SQLITE_OK);
  EXPECT_EQ(wal_buffer_stats().bytes_zeroed - zeroed_before,
            static_cast<std::uint64_t>(until - e->written_end));
  EXPECT_EQ(FileSize(path + "-wal"), until);
  {
    std::ifstream in(path + "-wal", std::ios::binary);
    in.seekg(e->written_end);
    std::vector<char> tail(static_cast<std::size_t>(until - e->written_end), 'x');
    ASSERT_TRUE(in.read(tail.data(), static_cast<std::streamsize>(tail.size())));
    EXPECT_EQ(std::count(tail.begin(), tail.end(), 0), static_cast<long>(tail.size()));
  }
  ASSERT_EQ(wal_zero_fill(writer.raw(), until - 4096), SQLITE_OK);  // long enough: nothing
  EXPECT_EQ(FileSize(path + "-wal"), until);
  ASSERT_TRUE(writer.exec("ROLLBACK", "unlock the WAL").ok());

  // Twenty commits after it write over the zeros.
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(writer.exec("INSERT INTO t (x) VALUES (randomblob(100))", "insert").ok());
  }
  e = wal_extent(writer.raw());
  ASSERT_TRUE(e.has_value());
  EXPECT_GT(e->written_end, until - (1 << 20));
  EXPECT_LT(e->written_end, until);
  EXPECT_EQ(e->file_end, until);
  EXPECT_EQ(FileSize(path + "-wal"), until);

  // Another connection sees every commit; so does a copy of the files as a crash leaves them.
  Db reader;
  ASSERT_TRUE(reader.open(path, /*create=*/false).ok());
  EXPECT_EQ(Scalar(reader, "SELECT count(*) FROM t"), 21);
  reader.close();
  const std::string copy = dir.path() + "/crash.db";
  std::filesystem::copy_file(path, copy);
  std::filesystem::copy_file(path + "-wal", copy + "-wal");
  Db after;
  ASSERT_TRUE(after.open(copy, /*create=*/false).ok());
  EXPECT_EQ(Scalar(after, "SELECT count(*) FROM t"), 21);
  EXPECT_TRUE(IntegrityOk(after));
}

// Another connection — here in this process, in ichido's case also another process's (the CLI's
// token commands on a running server's directory) — lengthened the WAL after this handle last
// wrote it: the zeros start at the file's real end, never over that connection's frames.
TEST(WalBufferVfs, ZerosGoOnlyPastTheFilesRealEnd) {
  store_testing::TempDir dir;
  const std::string path = dir.path() + "/t.db";
  Db a;
  ASSERT_NO_FATAL_FAILURE(CreateWithoutCheckpoints(a, path));
  const auto e = wal_extent(a.raw());
  ASSERT_TRUE(e.has_value());

  Db b;
  ASSERT_TRUE(b.open(path, /*create=*/false).ok());
  ASSERT_TRUE(b.exec("PRAGMA wal_autocheckpoint = 0", "no checkpoints").ok());
  for (int i = 0; i < 64; ++i) {  // ≈ 2 MiB of frames, past where `a` last wrote
    ASSERT_TRUE(b.exec("INSERT INTO t (x) VALUES (randomblob(32768))", "insert").ok());
  }
  const std::int64_t after_b = FileSize(path + "-wal");
  ASSERT_GT(after_b, e->file_end + (2 << 20) - (64 << 10));

  ASSERT_TRUE(a.exec("BEGIN IMMEDIATE", "lock the WAL").ok());
  ASSERT_EQ(wal_zero_fill(a.raw(), e->written_end + (1 << 20)), SQLITE_OK);  // within b's frames
  EXPECT_EQ(FileSize(path + "-wal"), after_b);
  ASSERT_EQ(wal_zero_fill(a.raw(), after_b + (64 << 10)), SQLITE_OK);
  EXPECT_EQ(FileSize(path + "-wal"), after_b + (64 << 10));
  ASSERT_TRUE(a.exec("ROLLBACK", "unlock the WAL").ok());

  for (Db* db : {&a, &b}) {
    EXPECT_EQ(Scalar(*db, "SELECT count(*) FROM t"), 64);
    EXPECT_EQ(Scalar(*db, "SELECT sum(length(x)) FROM t"), 64 * 32768);
  }
  EXPECT_TRUE(IntegrityOk(a));
}

}  // namespace
}  // namespace ichido::store::sqlite
