// How the SQLite the store is built with makes a commit durable: with fdatasync(), as Debian's
// libsqlite3 does (its configure detects it), not fsync(), which the amalgamation falls back to
// unless HAVE_FDATASYNC is defined and which also writes the file's changed mtime through the
// filesystem's journal whenever a commit changed it (decision 138).
//
// This executable defines fsync() and fdatasync() itself: SQLite's calls (static library or
// shared) resolve to these, which count the call and make the system call. It is a binary of
// its own so that no other test runs with them.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

namespace {
std::atomic<int> fsyncs{0};
std::atomic<int> fdatasyncs{0};
}  // namespace

extern "C" int fsync(int fd) {
  fsyncs.fetch_add(1);
  return static_cast<int>(::syscall(SYS_fsync, fd));
}

extern "C" int fdatasync(int fd) {
  fdatasyncs.fetch_add(1);
  return static_cast<int>(::syscall(SYS_fdatasync, fd));
}

namespace {

void exec(sqlite3* db, const char* sql) {
  char* msg = nullptr;
  ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, &msg), SQLITE_OK) << (msg ? msg : "");
}

TEST(SqliteSync, ACommitInWalModeWithFullSyncIsMadeDurableWithFdatasyncNotFsync) {
  char tmpl[] = "/tmp/ichido-sync-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  struct RemoveDir {
    std::string path;
    ~RemoveDir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  } remove_dir{dir};  // however the test ends
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir + "/t.db").c_str(), &db), SQLITE_OK);
  exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; CREATE TABLE t (v INTEGER)");
  const int fsyncs_before = fsyncs.load();
  const int fdatasyncs_before = fdatasyncs.load();
  for (int i = 0; i < 5; ++i) exec(db, "INSERT INTO t VALUES (1)");
  // Each commit syncs the WAL once; a checkpoint at close syncs the WAL and the database file.
  EXPECT_GE(fdatasyncs.load() - fdatasyncs_before, 5) << "every commit syncs the WAL";
  EXPECT_EQ(fsyncs.load() - fsyncs_before, 0)
      << "SQLite syncs with fsync(): built without HAVE_FDATASYNC (third_party/sqlite)";
  sqlite3_close(db);
  EXPECT_EQ(fsyncs.load() - fsyncs_before, 0) << "the checkpoint at close synced with fsync()";
}

}  // namespace
