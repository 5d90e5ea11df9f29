// What only the embedded store promises, beyond the conformance suite: durability across
// close/reopen, one process per data directory, group commit under concurrency, and schema
// versions that survive restarts.
#include "store/sqlite/sqlite_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include "store/sqlite/data_dir.h"
#include "store/sqlite/schema.h"
#include "store/sqlite/sqlite_tables.h"
#include "store/sqlite/test_peer.h"
#include "store/sqlite/wal_buffer_vfs.h"
#include "store/testing/sync_store.h"

// GCC 13 and 14 warn that a Result<NextReply>'s value "may be used uninitialized" where a callback
// reads it after r.ok() (a known false positive of -Wmaybe-uninitialized through std::variant);
// GCC 12 and clang do not. Only this file trips it.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace ichido::store::sqlite {

namespace {

using store_testing::SyncStore;
using store_testing::TempDir;

constexpr TimeMs kNow = 1'775'000'000'000;  // 2026-03-31, any fixed instant will do

// The SQLite the store runs on (third_party/sqlite unless ICHIDO_SYSTEM_SQLITE). Versions 3.7.0
// to 3.51.2 have the WAL-reset bug (sqlite.org/wal.html#walresetbug): a checkpoint on one
// connection racing a WAL reset by another can corrupt the database or lose committed writes.
// The store checkpoints on its own connection beside the writer, which resets the WAL (decision
// 136): that race. Debian 12's libsqlite3 (3.40.1-2+deb12u2) has the bug.
TEST(SqliteLibrary, HasTheWalResetFix) {
  EXPECT_TRUE(has_wal_reset_fix(sqlite3_libversion_number()))
      << "linked SQLite " << sqlite3_libversion();
  EXPECT_EQ(sqlite3_libversion_number(), SQLITE_VERSION_NUMBER)
      << "compiled against sqlite3.h " SQLITE_VERSION ", linked " << sqlite3_libversion();
  EXPECT_NE(sqlite3_threadsafe(), 0) << "the store uses SQLite from several threads";
}

// The releases with the fix: 3.51.3 on, and the backports 3.50.7 and 3.44.6 on their lines.
TEST(SqliteLibrary, WalResetFixReleases) {
  for (int v : {3051003, 3051004, 3053004, 3054001, 4000000, 3050007, 3050009, 3044006, 3044007}) {
    EXPECT_TRUE(has_wal_reset_fix(v)) << v;
  }
  for (int v : {3040001, 3044005, 3045000, 3046001, 3050006, 3051000, 3051002, 3007000}) {
    EXPECT_FALSE(has_wal_reset_fix(v)) << v;
  }
}

// A store does not open on a library with the bug (a shared library swapped after the build).
TEST(SqliteLibrary, AStoreRefusesALibraryWithoutTheFix) {
  EXPECT_TRUE(check_sqlite_library(3053004, "3.53.4").ok());
  auto r = check_sqlite_library(3040001, "3.40.1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, errc::store_unavailable);
  EXPECT_NE(r.error().message.find("(3.40.1) has the WAL-reset bug"), std::string::npos)
      << r.error().message;
  EXPECT_EQ(r.error().details.count("needs_operator"), 1u) << "a restart would not help";
}

// Deleted content is overwritten whatever the library's compile-time default (db.cc).
TEST(SqliteLibrary, DeletedContentIsOverwritten) {
  TempDir dir;
  Db db;
  ASSERT_TRUE(db.open(dir.path() + "/x.db", /*create=*/true).ok());
  auto q = db.query("PRAGMA secure_delete");
  ASSERT_TRUE(q.ok());
  ASSERT_EQ(q->step(), SQLITE_ROW);
  EXPECT_EQ(q->int64(0), 1);
}

// Records the statements that connection `db` runs and that mention `table`
// (SQLITE_TRACE_STMT), from construction until destruction.
class StatementsOn {
 public:
  StatementsOn(Db& db, std::string table) : db_(db), table_(std::move(table)) {
    sqlite3_trace_v2(
        db_.raw(), SQLITE_TRACE_STMT,
        [](unsigned, void* ctx, void*, void* x) {
          auto* self = static_cast<StatementsOn*>(ctx);
          std::string sql = static_cast<const char*>(x);
          if (sql.find(self->table_) != std::string::npos) self->ran.push_back(std::move(sql));
          return 0;
        },
        this);
  }
  StatementsOn(const StatementsOn&) = delete;
  StatementsOn& operator=(const StatementsOn&) = delete;
  ~StatementsOn() { sqlite3_trace_v2(db_.raw(), 0, nullptr, nullptr); }

  std::vector<std::string> ran;

 private:
  Db& db_;
  const std::string table_;
};

class SqliteStoreTest : public ::testing::Test {
 protected:
  Options Opts() {
    Options o;
    o.dir = dir_.path() + "/data";
    o.clock = &clock_;
    o.caller_may_commit = &test_caller_may_commit;
    return o;
  }
  std::unique_ptr<SqliteStore> MustOpen(Options o) {
    auto s = SqliteStore::open(std::move(o));
    EXPECT_TRUE(s.ok()) << s.error().message;
    return s.ok() ? std::move(*s) : nullptr;
  }
  std::unique_ptr<SqliteStore> MustOpen() { return MustOpen(Opts()); }
  // The database file of a new store, closed again (its schema migrated), for a test that reads
  // or writes its tables on a connection of its own; "" when the store did not open.
  std::string NewDatabasePath() {
    auto store = MustOpen();
    return store ? store->db_path() : std::string();
  }

  static CounterRef Ref(const std::string& name) { return {"acme", name}; }
  static core::CounterConfig Config() {
    core::CounterConfig c;
    c.max = 1'000'000;
    c.format = "N{seq:6}";
    return c;
  }

  // Reads schema_version straight from the database file: (rows, max version).
  std::pair<int, int> SchemaVersionRows(const std::string& db_path) {
    sqlite3* db = nullptr;
    std::pair<int, int> out{-1, -1};
    if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
      sqlite3_stmt* st = nullptr;
      if (sqlite3_prepare_v2(db, "SELECT COUNT(*), MAX(version) FROM schema_version", -1, &st,
                             nullptr) == SQLITE_OK &&
          sqlite3_step(st) == SQLITE_ROW) {
        out = {sqlite3_column_int(st, 0), sqlite3_column_int(st, 1)};
      }
      sqlite3_finalize(st);
    }
    sqlite3_close_v2(db);
    return out;
  }

  // `threads` threads each issue `per_thread` numbers of counter "c" one after the other (keys
  // "t<thread>-<i>"), each thread first telling test_serves_one_client() `serves_one(thread)`;
  // returns every thread's values in its order (-1 for a failure).
  static std::vector<std::vector<std::int64_t>> IssueFromThreads(
      SqliteStore& store, int threads, int per_thread,
      const std::function<bool(int)>& serves_one = [](int) { return false; }) {
    std::vector<std::vector<std::int64_t>> got(threads);
    std::vector<std::thread> running;
    for (int t = 0; t < threads; ++t) {
      running.emplace_back([&, t] {
        test_serves_one_client() = serves_one(t);
        SyncStore s(store);
        for (int i = 0; i < per_thread; ++i) {
          auto r = s.next({Ref("c"), {"t" + std::to_string(t) + "-" + std::to_string(i), ""}});
          got[t].push_back(r.ok() ? r->record.value : -1);
        }
      });
    }
    for (auto& th : running) th.join();
    return got;
  }
  // The store opened again (with Opts()): counter "c" stands at `last`, and `key` replays `value`.
  void ExpectAfterReopen(std::int64_t last, const std::string& key, std::int64_t value) {
    auto store = MustOpen();
    ASSERT_TRUE(store);
    SyncStore s(*store);
    auto info = s.get_counter(Ref("c"));
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->last_value, last);
    EXPECT_EQ(info->issued_count, last);
    ExpectReplays(s, key, value);
  }
  // `key` of counter "c" replays `value` (it was issued and kept).
  static void ExpectReplays(SyncStore& s, const std::string& key, std::int64_t value) {
    auto replay = s.next({Ref("c"), {key, ""}});
    ASSERT_TRUE(replay.ok()) << replay.error().message;
    EXPECT_TRUE(replay->replayed) << key;
    EXPECT_EQ(replay->record.value, value) << key;
  }
  // Every thread's values increase (each waited for each answer), and all of them together are
  // 1..N, each once.
  static void ExpectUniqueConsecutive(const std::vector<std::vector<std::int64_t>>& got) {
    std::vector<std::int64_t> all;
    for (const auto& g : got) {
      EXPECT_TRUE(std::is_sorted(g.begin(), g.end()));
      all.insert(all.end(), g.begin(), g.end());
    }
    std::sort(all.begin(), all.end());
    std::vector<std::int64_t> want(all.size());
    for (std::size_t i = 0; i < want.size(); ++i) want[i] = static_cast<std::int64_t>(i + 1);
    EXPECT_EQ(all, want);
  }

  // Holds the store's writer inside a `next` of counter `counter` (its answer's callback waits)
  // until the returned promise is set, at most 60 s, so that everything submitted meanwhile
  // lands in one batch. nullptr when the writer did not get there within 60 s.
  static std::shared_ptr<std::promise<void>> HoldWriter(SqliteStore& store,
                                                        const std::string& counter) {
    auto release = std::make_shared<std::promise<void>>();
    auto held = std::make_shared<std::promise<void>>();
    auto got_there = held->get_future();
    store.next({Ref(counter), {"gate", ""}},
               [held, released = release->get_future().share()](Result<NextReply>) {
                 held->set_value();
                 released.wait_for(std::chrono::seconds(60));
               });
    if (got_there.wait_for(std::chrono::seconds(60)) != std::future_status::ready) return nullptr;
    return release;
  }

  // The database of a new data directory, opened directly once the store that created it is
  // closed again (nullptr on failure; the caller closes it).
  sqlite3* FreshDatabase() {
    const std::string path = NewDatabasePath();
    if (path.empty()) return nullptr;
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
      sqlite3_close_v2(db);
      return nullptr;
    }
    return db;
  }

  // Every row of `sql`: its columns joined by '|', each row followed by ';' (an error: what it
  // says).
  // Takes a store's database back to schema 11, as the releases before decision 143 left it:
  // migration 12 undone statement by statement, so its keyed numbers have no kseq any more.
  // Undoes migration 13 (a counter's fiscal_year_start), as a store the previous release left.
  static void DowngradeTo12(const std::string& db_path) {
    ASSERT_EQ(current_schema_version(), 13) << "this helper undoes migration 13 only";
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
    char* err = nullptr;
    const int rc = sqlite3_exec(db,
                                "ALTER TABLE counters DROP COLUMN fiscal_year_start; "
                                "DELETE FROM schema_version WHERE version = 13;",
                                nullptr, nullptr, &err);
    EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "");
    sqlite3_free(err);
    sqlite3_close_v2(db);
  }

  static void DowngradeTo11(const std::string& db_path) {
    ASSERT_NO_FATAL_FAILURE(DowngradeTo12(db_path));
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
    char* err = nullptr;
    const int rc = sqlite3_exec(
        db,
        "DROP INDEX issued_by_kseq; ALTER TABLE issued DROP COLUMN kseq; "
        "CREATE UNIQUE INDEX issued_by_key ON issued (counter_id, key) WHERE key IS NOT NULL; "
        "DROP TABLE key_index_snapshot; DELETE FROM sequences WHERE name = 'key'; "
        "DELETE FROM schema_version WHERE version = 12;",
        nullptr, nullptr, &err);
    EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "");
    sqlite3_free(err);
    sqlite3_close_v2(db);
  }

  static std::string Rows(sqlite3* db, const char* sql) {
    std::string out;
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) != SQLITE_OK) return sqlite3_errmsg(db);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      for (int i = 0; i < sqlite3_column_count(st); ++i) {
        const auto* text = sqlite3_column_text(st, i);
        if (i > 0) out += "|";
        out += text ? reinterpret_cast<const char*>(text) : "NULL";
      }
      out += ";";
    }
    if (rc != SQLITE_DONE) out += sqlite3_errmsg(db);
    sqlite3_finalize(st);
    return out;
  }

  ManualClock clock_{kNow};
  TempDir dir_;
};

TEST_F(SqliteStoreTest, DataSurvivesCloseAndReopen) {
  core::IssuedNumber first;
  {
    auto store = MustOpen();
    ASSERT_TRUE(store);
    SyncStore s(*store);
    ASSERT_TRUE(s.create_counter({Ref("receipts"), Config()}).ok());
    auto r = s.next({Ref("receipts"), {"<a/b@example.com>", "first"}});
    ASSERT_TRUE(r.ok()) << r.error().message;
    first = r->record;
    ASSERT_TRUE(s.next({Ref("receipts"), {"k2", ""}}).ok());
    ASSERT_TRUE(s.next({Ref("receipts"), {"k3", ""}}).ok());
    ASSERT_TRUE(s.void_number({Ref("receipts"), 3, std::nullopt, "cancelled"}).ok());
    store->close();
  }
  clock_.advance(86'400'000);
  auto store = MustOpen();
  ASSERT_TRUE(store);
  SyncStore s(*store);
  auto info = s.get_counter(Ref("receipts"));
  ASSERT_TRUE(info.ok()) << info.error().message;
  EXPECT_EQ(info->config, Config());
  EXPECT_EQ(info->last_value, 3);
  EXPECT_EQ(info->issued_count, 3);
  EXPECT_EQ(info->voided_count, 1);
  EXPECT_EQ(info->created_at, kNow);

  auto replay = s.next({Ref("receipts"), {"<a/b@example.com>", "after restart"}});
  ASSERT_TRUE(replay.ok()) << replay.error().message;
  EXPECT_TRUE(replay->replayed);
  EXPECT_EQ(replay->record.value, first.value);
  EXPECT_EQ(replay->record.formatted, "N000001");
  EXPECT_EQ(replay->record.note, "first");
  EXPECT_EQ(replay->record.issued_at, kNow);

  auto next = s.next({Ref("receipts"), {"k4", ""}});
  ASSERT_TRUE(next.ok());
  EXPECT_FALSE(next->replayed);
  EXPECT_EQ(next->record.value, 4);  // no restart from 0, no reuse of the voided 3
}

// SQLite keeps no memory statistics in the server (db.cc, configure_library): the setting only
// takes effect before the library is first used, so this runs in a fresh process (a death test
// re-runs the binary for this test alone) whose first SQLite call is the store's: after writes,
// SQLite has counted no memory. With the statistics on (SQLite's default) it counts every
// allocation and the child exits 1.
TEST_F(SqliteStoreTest, SqliteKeepsNoMemoryStatistics) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        int code = 2;
        if (auto store = MustOpen()) {
          SyncStore s(*store);
          bool ok = s.create_counter({Ref("c"), Config()}).ok();
          for (int i = 0; ok && i < 20; ++i) ok = s.next({Ref("c"), {std::to_string(i), ""}}).ok();
          if (ok) code = sqlite3_memory_used() == 0 ? 0 : 1;
        }
        std::error_code ec;
        std::filesystem::remove_all(dir_.path(), ec);  // _Exit runs no destructor
        std::_Exit(code);
      },
      ::testing::ExitedWithCode(0), "");
}

// Decision 136: the WAL is copied into the database file by the checkpointer, beside the
// writer, and the writer's own checkpoint at restart_frames lets the WAL start over under
// sustained writes. Small thresholds, so that a few thousand commits cross them many times; the
// WAL file (SQLite overwrites it from its start, never shrinks it) shows how large it ever got.
TEST_F(SqliteStoreTest, CheckpointsRunBesideTheWriterAndTheWalStartsOver) {
  constexpr int kNexts = 3000;
  constexpr int kRestartFrames = 300;
  Options o = Opts();
  o.checkpoint_frames = 40;
  o.restart_frames = kRestartFrames;
  const std::int64_t zeros = o.wal_zero_ahead;
  {
    auto store = MustOpen(o);
    ASSERT_TRUE(store);
    SyncStore s(*store);
    ASSERT_TRUE(s.create_counter({Ref("c"), Config()}).ok());
    for (int i = 0; i < kNexts; ++i) {
      auto n = s.next({Ref("c"), {"key-" + std::to_string(i), ""}});  // ≥ 3 pages each
      ASSERT_TRUE(n.ok()) << n.error().message;
    }
    // The checkpointer is a thread of its own: give it the time to run once, if it has not yet.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (SqliteStoreTestPeer::checkpoints(*store).by_checkpointer == 0 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const auto c = SqliteStoreTestPeer::checkpoints(*store);
    EXPECT_GE(c.by_checkpointer, 1u) << "the checkpointer never copied the WAL";
    EXPECT_GE(c.by_writer, 1u) << "the writer never let the WAL start over";
    // What /metrics shows of it.
    const auto stats = store->own_stats();
    EXPECT_GE(stats.checkpoints, c.by_checkpointer + c.by_writer);  // it may have run since
    EXPECT_EQ(stats.failed_checkpoints, 0u);
    // Without the WAL starting over it would hold every commit: ≈ 9,000 frames here.
    const std::uintmax_t frame = 4096 + 24;
    const auto wal = std::filesystem::file_size(store->db_path() + "-wal");
    EXPECT_EQ(stats.wal_bytes, wal);
    // (Plus the zeros a quiet writer may have appended past the furthest frame: decision 132.)
    EXPECT_LE(wal, 32 + 2 * kRestartFrames * frame + static_cast<std::uintmax_t>(zeros));
    store->close();
  }
  ExpectAfterReopen(kNexts, "key-1234", 1235);
}

// Decision 132: once the writer has seen no commit for wal_zero_fill_quiet, it appends zeros
// past the WAL's furthest frame, and the commits after that write over them instead of
// lengthening the file (each commit here writes a few 4 KiB frames, so 1 MiB of zeros holds them
// all).
TEST_F(SqliteStoreTest, AQuietWriterKeepsZerosAheadOfTheWal) {
  Options o = Opts();
  o.wal_zero_fill_quiet = std::chrono::milliseconds(20);
  auto store = MustOpen(o);
  ASSERT_TRUE(store);
  SyncStore s(*store);
  ASSERT_TRUE(s.create_counter({Ref("c"), Config()}).ok());
  ASSERT_TRUE(s.next({Ref("c"), {"key-0", ""}}).ok());
  const std::string wal = store->db_path() + "-wal";
  ASSERT_EQ(SqliteStoreTestPeer::await_wal_zero_fill(*store), 1u)
      << "the WAL was never filled ahead";
  // Two commits wrote a few dozen KiB of frames; the rest is zeros.
  const auto filled = std::filesystem::file_size(wal);
  EXPECT_GE(filled, std::uintmax_t{1} << 20);
  for (int i = 1; i <= 20; ++i) {
    auto n = s.next({Ref("c"), {"key-" + std::to_string(i), ""}});
    ASSERT_TRUE(n.ok()) << n.error().message;
  }
  EXPECT_EQ(std::filesystem::file_size(wal), filled) << "a commit lengthened the WAL";
  store->close();

  // Nothing of it shows after a restart (SQLite's recovery stops at the first zero frame).
  ExpectAfterReopen(21, "key-20", 21);
}

TEST_F(SqliteStoreTest, SecondOpenOfTheSameDirectoryFailsWhileTheFirstIsOpen) {
  auto first = MustOpen();
  ASSERT_TRUE(first);
  auto second = SqliteStore::open(Opts());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().code, errc::store_unavailable);
  EXPECT_NE(second.error().message.find("in use"), std::string::npos) << second.error().message;
  // The failed open must not have disturbed the first store.
  SyncStore s(*first);
  ASSERT_TRUE(s.create_counter({Ref("c"), Config()}).ok());
  ASSERT_TRUE(first->check_ready().ok());

  first->close();  // releases the LOCK
  auto third = MustOpen();
  ASSERT_TRUE(third);
  SyncStore t(*third);
  EXPECT_TRUE(t.get_counter(Ref("c")).ok());
}

TEST_F(SqliteStoreTest, ConcurrentNextFromManyThreadsGivesUniqueConsecutiveValues) {
  auto store = MustOpen();
  ASSERT_TRUE(store);
  ASSERT_TRUE(SyncStore(*store).create_counter({Ref("c"), Config()}).ok());
  constexpr int kThreads = 16;
  constexpr int kPerThread = 40;
  ExpectUniqueConsecutive(IssueFromThreads(*store, kThreads, kPerThread));
  auto info = SyncStore(*store).get_counter(Ref("c"));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->last_value, kThreads * kPerThread);
}

// Group commit: commands that queue while the writer is busy share one transaction (one fsync).
// To make this independent of timing, the writer is held busy on purpose: the callback of a
// first command (callbacks run on the writer thread) blocks until 2000 more commands have been
// queued from 16 threads. When it returns, the writer finds them all waiting and must commit them
// in at most ceil(2000 / max_batch) transactions. (Blocking in a callback breaks the Store
// contract deliberately; it is the test's way to freeze the writer between two batches.)
TEST_F(SqliteStoreTest, GroupCommitBatchesQueuedCommands) {
  Options o = Opts();
  o.max_batch = 1024;
  auto store = MustOpen(o);
  ASSERT_TRUE(store);
  ASSERT_TRUE(SyncStore(*store).create_counter({Ref("c"), Config()}).ok());
  const StoreStats before = store->stats();

  std::promise<void> writer_held, release;
  auto released = release.get_future().share();
  std::promise<std::int64_t> gate_value;
  store->next({Ref("c"), {"gate", ""}}, [&](Result<NextReply> r) {
    gate_value.set_value(r.ok() ? r->record.value : -1);
    writer_held.set_value();
    // Bounded, so a broken store fails the test instead of hanging it.
    released.wait_for(std::chrono::seconds(60));
  });
  ASSERT_EQ(writer_held.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready);

  constexpr int kThreads = 16;
  constexpr int kPerThread = 125;
  constexpr int kTotal = kThreads * kPerThread;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::int64_t> values;
  int answered = 0;
  int failed = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        store->next({Ref("c"), {"g" + std::to_string(t) + "-" + std::to_string(i), ""}},
                    [&](Result<NextReply> r) {
                      std::lock_guard lk(mu);
                      if (r.ok())
                        values.push_back(r->record.value);
                      else
                        ++failed;
                      ++answered;
                      cv.notify_all();
                    });
      }
    });
  }
  for (auto& th : threads) th.join();
  {
    std::lock_guard lk(mu);
    EXPECT_EQ(answered, 0) << "the writer was supposed to be held";
  }
  const WalBufferStats wal_before = wal_buffer_stats();
  release.set_value();
  {
    std::unique_lock lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(120), [&] { return answered == kTotal; }))
        << answered << " of " << kTotal << " answered";
  }
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(gate_value.get_future().get(), 1);
  std::sort(values.begin(), values.end());
  ASSERT_EQ(values.size(), static_cast<std::size_t>(kTotal));
  for (int i = 0; i < kTotal; ++i)
    ASSERT_EQ(values[i], i + 2) << "values are not 2.." << kTotal + 1;

  const StoreStats after = store->stats();
  const auto commits = after.commits - before.commits;
  const auto commands = after.committed_commands - before.committed_commands;
  EXPECT_EQ(commands, static_cast<std::uint64_t>(kTotal + 1));
  EXPECT_GT(commands, commits);
  // The gate's own commit, then the 2000 queued commands in batches of at most 1024.
  EXPECT_LE(commits, 3u);
  EXPECT_EQ(after.failed_commits, before.failed_commits);
  // Decision 132: the WAL frames of a commit (two writes per page) reach the file in writes of
  // up to 64 KiB at its fsync. Counters are process-wide; nothing else writes here meanwhile.
  const WalBufferStats wal_after = wal_buffer_stats();
  const auto out = wal_after.writes_out - wal_before.writes_out;
  const auto buffered = wal_after.writes_buffered - wal_before.writes_buffered;
  EXPECT_GE(out, commits) << "at least one write per commit";
  EXPECT_GE(buffered, 8 * out);
  // The period row was written once per batch (decision 130), with every command's effect: a
  // reader sees the last number and the count, and so does the store after a restart.
  auto info = SyncStore(*store).get_counter(Ref("c"));
  ASSERT_TRUE(info.ok()) << info.error().message;
  EXPECT_EQ(info->last_value, kTotal + 1);
  EXPECT_EQ(info->issued_count, kTotal + 1);
  store.reset();
  store = MustOpen(o);
  ASSERT_TRUE(store);
  auto again = SyncStore(*store).next({Ref("c"), {"after-restart", ""}});
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->record.value, kTotal + 2);
}

// A batch runs without a savepoint per command; a failing command that had already written is
// the one case that needs them: the batch is rolled back and run again with savepoints, so the
// failed command's writes are undone and the others still commit, all answered after one commit.
TEST_F(SqliteStoreTest, AFailingCommandThatWroteIsUndoneAloneInItsBatch) {
  auto store = MustOpen();
  ASSERT_TRUE(store);
  SyncStore sync(*store);
  ASSERT_TRUE(sync.create_counter({Ref("c"), Config()}).ok());
  const StoreStats before = store->stats();

  // Hold the writer so that everything below lands in one batch.
  auto release = HoldWriter(*store, "c");
  ASSERT_TRUE(release);

  std::mutex mu;
  std::condition_variable cv;
  int answered = 0;
  std::vector<std::string> outcomes(5);
  auto record = [&](int i, std::string what) {
    std::lock_guard lk(mu);
    outcomes[i] = std::move(what);
    ++answered;
    cv.notify_all();
  };
  auto next = [&](int i, const std::string& key) {
    store->next({Ref("c"), {key, ""}}, [&, i](Result<NextReply> r) {
      record(i, r.ok() ? std::to_string(r->record.value) : std::string(to_string(r.error().code)));
    });
  };
  auto hand_made = [&](int i, bool writes) {
    Job job;
    job.apply = [&, writes](Tables& t, TimeMs) {
      if (writes) (void)t.save_period(1, "", PeriodRow{500, 9, 0});  // then fails: must vanish
      return false;
    };
    job.finish = [&, i](const Error* e) {
      record(i, e ? std::string(to_string(e->code)) : "rejected");
    };
    SqliteStoreTestPeer::submit_write(*store, std::move(job));
  };
  next(0, "a");
  hand_made(1, /*writes=*/false);
  next(2, "b");
  hand_made(3, /*writes=*/true);
  next(4, "c");
  release->set_value();
  {
    std::unique_lock lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(60), [&] { return answered == 5; }));
  }
  EXPECT_EQ(outcomes, (std::vector<std::string>{"2", "rejected", "3", "rejected", "4"}));
  const StoreStats after = store->stats();
  EXPECT_EQ(after.isolated_batches - before.isolated_batches, 1u);
  EXPECT_EQ(after.commits - before.commits, 2u);  // the gate's, then the batch's
  EXPECT_EQ(after.failed_commits, before.failed_commits);
  // The period row holds what the three `next` wrote, not the failed job's 500.
  auto info = sync.get_counter(Ref("c"));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->last_value, 4);
  EXPECT_EQ(info->issued_count, 4);
}

// The same re-run with once records: a begin, then a command that makes the record pending and
// fails, in one batch. The failed command's change is undone, in the table and in anything the
// writer keeps: the next owner is told the item is in progress (a kept "pending" would hand it
// out a second time).
TEST_F(SqliteStoreTest, AFailedCommandsChangeToAOnceRecordIsForgottenByTheWriter) {
  auto store = MustOpen();
  ASSERT_TRUE(store);
  SyncStore sync(*store);
  ASSERT_TRUE(sync.create_counter({Ref("c"), Config()}).ok());
  const StoreStats before = store->stats();
  const OnceRef item{"acme", "mail-1"};

  auto release = HoldWriter(*store, "c");
  ASSERT_TRUE(release);
  std::promise<Result<BeginOnceReply>> begun;
  store->begin_once({item, core::BeginCommand{"a", 600'000}},
                    [&](Result<BeginOnceReply> r) { begun.set_value(std::move(r)); });
  std::promise<bool> failed;
  Job job;
  job.apply = [&](Tables& t, TimeMs) {
    auto rec = t.find_once(item.ns, item.key);
    if (rec.ok() && *rec) {
      core::OnceRecord changed = **rec;
      changed.state = core::OnceState::pending;
      (void)t.save_once(item.ns, changed);
    }
    return false;  // fails after writing: the batch runs again with savepoints
  };
  job.finish = [&](const Error*) { failed.set_value(true); };
  SqliteStoreTestPeer::submit_write(*store, std::move(job));
  release->set_value();
  auto b = begun.get_future().get();
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(b->outcome, core::BeginOutcome::acquired);
  EXPECT_TRUE(failed.get_future().get());
  EXPECT_EQ(store->stats().isolated_batches - before.isolated_batches, 1u);

  auto other = sync.begin_once({item, core::BeginCommand{"b", 600'000}});
  ASSERT_TRUE(other.ok()) << other.error().message;
  EXPECT_EQ(other->outcome, core::BeginOutcome::in_progress);
  auto done = sync.complete_once({item, b->record.token, "{}"});
  ASSERT_TRUE(done.ok()) << done.error().message;
  EXPECT_EQ(done->state, core::OnceState::completed);
}

// And with locks: a command that hands a granted lock to someone else and fails is undone, and
// the real holder releases it.
TEST_F(SqliteStoreTest, AFailedCommandsChangeToALockIsForgottenByTheWriter) {
  auto store = MustOpen();
  ASSERT_TRUE(store);
  SyncStore sync(*store);
  ASSERT_TRUE(sync.create_counter({Ref("c"), Config()}).ok());
  const LockRef lock{"acme", "sheet"};

  auto release = HoldWriter(*store, "c");
  ASSERT_TRUE(release);
  std::promise<Result<AcquireLockReply>> got;
  store->acquire_lock({lock, "a", 600'000},
                      [&](Result<AcquireLockReply> r) { got.set_value(std::move(r)); });
  std::promise<bool> failed;
  Job job;
  job.apply = [&](Tables& t, TimeMs) {
    auto rec = t.find_lock(lock.ns, lock.name);
    if (rec.ok() && *rec) {
      core::LockRecord other = **rec;
      other.owner = "b";
      other.token += 1000;
      (void)t.save_lock(lock.ns, other);
    }
    return false;
  };
  job.finish = [&](const Error*) { failed.set_value(true); };
  SqliteStoreTestPeer::submit_write(*store, std::move(job));
  release->set_value();
  auto g = got.get_future().get();
  ASSERT_TRUE(g.ok()) << g.error().message;
  ASSERT_TRUE(g->acquired);
  EXPECT_TRUE(failed.get_future().get());

  auto released = sync.release_lock({lock, g->record.token});
  ASSERT_TRUE(released.ok()) << released.error().message;
  auto again = sync.acquire_lock({lock, "b", 600'000});
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_TRUE(again->acquired);
}

// Tokens drawn in one batch come from the sequence's value read once and written back once
// before COMMIT (decision 130): every grant still gets its own token, in the order the commands
// ran, a failed command's token vanishes with its other writes, and a restart continues above.
TEST_F(SqliteStoreTest, TokensDrawnInOneBatchAreDistinctIncreasingAndSurviveARestart) {
  Options o = Opts();
  auto store = MustOpen(o);
  ASSERT_TRUE(store);
  ASSERT_TRUE(SyncStore(*store).create_counter({Ref("c"), Config()}).ok());
  auto first = SyncStore(*store).acquire_lock({{"acme", "first"}, "me"});
  ASSERT_TRUE(first.ok() && first->acquired);
  const StoreStats before = store->stats();

  auto release = HoldWriter(*store, "c");
  ASSERT_TRUE(release);

  constexpr int kLocks = 40;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::int64_t> tokens(kLocks, -1);
  int answered = 0;
  for (int i = 0; i < kLocks; ++i) {
    if (i == kLocks / 2) {
      // A command that draws a token, then fails: the batch runs again isolated.
      Job job;
      job.apply = [](Tables& t, TimeMs) {
        (void)t.next_token();
        return false;
      };
      job.finish = [&](const Error*) {
        std::lock_guard lk(mu);
        ++answered;
        cv.notify_all();
      };
      SqliteStoreTestPeer::submit_write(*store, std::move(job));
    }
    store->acquire_lock({{"acme", "l" + std::to_string(i)}, "me"},
                        [&, i](Result<AcquireLockReply> r) {
                          std::lock_guard lk(mu);
                          tokens[i] = r.ok() && r->acquired ? r->record.token : -1;
                          ++answered;
                          cv.notify_all();
                        });
  }
  release->set_value();
  {
    std::unique_lock lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(60), [&] { return answered == kLocks + 1; }));
  }
  EXPECT_EQ(store->stats().isolated_batches - before.isolated_batches, 1u);
  // One after another from the token before the batch: the failed command's draw is undone.
  for (int i = 0; i < kLocks; ++i) EXPECT_EQ(tokens[i], first->record.token + 1 + i) << i;

  store.reset();
  store = MustOpen(o);
  ASSERT_TRUE(store);
  auto after = SyncStore(*store).acquire_lock({{"acme", "after"}, "me"});
  ASSERT_TRUE(after.ok() && after->acquired);
  EXPECT_GT(after->record.token, tokens.back());
}

// The token row holds the last token committed, so that without ichido.id (D3 then adopts the
// database's row as the mark) tokens still continue above every token handed out; a row behind
// them (or never written) would start them again at or below them.
TEST_F(SqliteStoreTest, TheTokenRowHoldsTheLastTokenAndTokensStayAboveItWithoutTheIdentityFile) {
  Options o = Opts();
  std::vector<std::int64_t> tokens;
  std::string db_path;
  {
    auto store = MustOpen(o);
    ASSERT_TRUE(store);
    db_path = store->db_path();
    SyncStore s(*store);
    for (int i = 0; i < 50; ++i) {  // one grant per batch
      auto g = s.acquire_lock({{"acme", "l" + std::to_string(i)}, "me"});
      ASSERT_TRUE(g.ok() && g->acquired);
      tokens.push_back(g->record.token);
    }
    for (int i = 1; i < 50; ++i) EXPECT_EQ(tokens[i], tokens[0] + i) << i;
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    EXPECT_EQ(Rows(db, "SELECT value FROM sequences WHERE name = 'token'"),
              std::to_string(tokens.back()) + ";");
    sqlite3_close_v2(db);
  }
  ASSERT_TRUE(std::filesystem::remove(identity_path_of(o.dir)));
  auto store = MustOpen(o);
  ASSERT_TRUE(store);
  auto after = SyncStore(*store).acquire_lock({{"acme", "after"}, "me"});
  ASSERT_TRUE(after.ok() && after->acquired);
  EXPECT_GT(after->record.token, tokens.back());
}

// A failing command that wrote nothing (the usual 4xx) needs no second run.
TEST_F(SqliteStoreTest, AFailingCommandThatWroteNothingCostsNoRerun) {
  auto store = MustOpen();
  ASSERT_TRUE(store);
  SyncStore sync(*store);
  ASSERT_TRUE(sync.create_counter({Ref("c"), Config()}).ok());
  const StoreStats before = store->stats();
  EXPECT_FALSE(sync.next({Ref("missing"), {"k", ""}}).ok());
  EXPECT_TRUE(sync.next({Ref("c"), {"k", ""}}).ok());
  EXPECT_EQ(store->stats().isolated_batches, before.isolated_batches);
}

TEST_F(SqliteStoreTest, CloseFinishesQueuedWrites) {
  auto store = MustOpen();
  ASSERT_TRUE(store);
  ASSERT_TRUE(SyncStore(*store).create_counter({Ref("c"), Config()}).ok());
  constexpr int kQueued = 200;
  std::atomic<int> ok{0}, answered{0};
  for (int i = 0; i < kQueued; ++i) {
    store->next({Ref("c"), {}}, [&](Result<NextReply> r) {
      if (r.ok()) ok.fetch_add(1);
      answered.fetch_add(1);
    });
  }
  store->close();  // blocks until every queued job was answered
  EXPECT_EQ(answered.load(), kQueued);
  EXPECT_EQ(ok.load(), kQueued);
  store.reset();

  auto reopened = MustOpen();
  ASSERT_TRUE(reopened);
  auto info = SyncStore(*reopened).get_counter(Ref("c"));
  ASSERT_TRUE(info.ok()) << info.error().message;
  EXPECT_EQ(info->last_value, kQueued);
}

// A lone write on the caller's thread (decision 141). Each case runs on a thread of its own, so
// that what it tells test_serves_one_client() stays there.
void OnThreadServingOneClient(bool one, const std::function<void()>& fn) {
  std::thread t([&] {
    test_serves_one_client() = one;
    fn();
  });
  t.join();
}

// With the writer idle and nothing queued, a caller that serves one client gets its write run
// and answered (after its commit) before the call returns, on its own thread; a caller that did
// not say so is answered by the writer thread. Both are durable the same way.
TEST_F(SqliteStoreTest, ALoneWriteRunsOnTheCallersThreadOnlyWhenItServesOneClient) {
  {
    auto store = MustOpen();
    ASSERT_TRUE(store);
    ASSERT_TRUE(SyncStore(*store).create_counter({Ref("c"), Config()}).ok());
    for (bool one : {true, false, true}) {
      OnThreadServingOneClient(one, [&] {
        const auto caller = std::this_thread::get_id();
        const StoreStats before = store->stats();
        const auto caller_before = store->own_stats().caller_commits;
        std::promise<std::pair<std::thread::id, std::int64_t>> answer;
        bool answered_before_return = false;
        store->next({Ref("c"), {one ? "here-" + std::to_string(before.commits) : "writer", ""}},
                    [&](Result<NextReply> r) {
                      answer.set_value({std::this_thread::get_id(), r.ok() ? r->record.value : -1});
                    });
        auto f = answer.get_future();
        answered_before_return = f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
        ASSERT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready);
        const auto [thread, value] = f.get();
        EXPECT_GT(value, 0);
        const StoreStats after = store->stats();
        const auto caller_after = store->own_stats().caller_commits;
        EXPECT_EQ(after.commits - before.commits, 1u);
        if (one) {
          EXPECT_TRUE(answered_before_return);
          EXPECT_EQ(thread, caller);
          EXPECT_EQ(caller_after - caller_before, 1u);
        } else {
          EXPECT_NE(thread, caller);
          EXPECT_EQ(caller_after, caller_before);
        }
      });
    }
    store->close();
  }
  ExpectAfterReopen(3, "writer", 2);
}

// A client is answered only once the write connection is free again (commit_batch finishes no
// job; the writer frees the connection, then answers): so the next write of a client the writer
// just answered can take the lone path at once. Seen deterministically from inside an answer,
// which runs on the writer thread: a write sent from there, by a thread that says it serves one
// client, is run and answered before the call returns.
TEST_F(SqliteStoreTest, AClientIsAnsweredOnlyOnceTheConnectionIsFree) {
  auto store = MustOpen();
  ASSERT_TRUE(store);
  ASSERT_TRUE(SyncStore(*store).create_counter({Ref("c"), Config()}).ok());
  std::promise<std::pair<bool, std::int64_t>> inner;
  store->next({Ref("c"), {"first", ""}}, [&](Result<NextReply> r) {
    if (!r.ok()) {
      inner.set_value({false, -1});
      return;
    }
    test_serves_one_client() = true;  // the writer thread, for this one call
    bool answered = false;
    std::int64_t value = -1;
    store->next({Ref("c"), {"second", ""}}, [&](Result<NextReply> r2) {
      answered = true;
      value = r2.ok() ? r2->record.value : -1;
    });
    test_serves_one_client() = false;
    inner.set_value({answered, value});
  });
  auto f = inner.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  const auto [answered, value] = f.get();
  EXPECT_TRUE(answered) << "the connection was still taken when the first client was answered";
  EXPECT_EQ(value, 2);
}

// While a lone write runs on a caller's thread, the writer does not touch the connection: what
// is queued meanwhile waits (no answer while the lone write is held), then goes to the writer in
// one batch, after it. That batch of several ends the lone mode (the next write, from a thread
// serving one client, goes to the writer); a later batch of one with nothing queued starts it
// again.
TEST_F(SqliteStoreTest, WritesQueuedDuringALoneWriteWaitForItAndEndTheLoneMode) {
  auto store = MustOpen();
  ASSERT_TRUE(store);
  ASSERT_TRUE(SyncStore(*store).create_counter({Ref("c"), Config()}).ok());
  std::promise<void> inside, release;
  auto released = release.get_future().share();
  std::thread lone([&] {
    test_serves_one_client() = true;
    Job job;
    job.apply = [&](Tables&, TimeMs) {
      inside.set_value();
      released.wait_for(std::chrono::seconds(60));
      return true;
    };
    job.finish = [](const Error*) {};
    SqliteStoreTestPeer::submit_write(*store, std::move(job));
  });
  ASSERT_EQ(inside.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready);

  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::int64_t> values;
  for (int i = 0; i < 3; ++i) {
    store->next({Ref("c"), {"q" + std::to_string(i), ""}}, [&](Result<NextReply> r) {
      std::lock_guard lk(mu);
      values.push_back(r.ok() ? r->record.value : -1);
      cv.notify_all();
    });
  }
  {
    // Nothing may be answered while the lone write holds the connection. (A bounded look: a
    // writer that ran beside it would answer within a commit, a few milliseconds.)
    std::unique_lock lk(mu);
    EXPECT_FALSE(cv.wait_for(lk, std::chrono::milliseconds(300), [&] { return !values.empty(); }))
        << "a queued write was answered while a lone write held the connection";
  }
  const std::uint64_t commits_before = store->stats().commits;
  release.set_value();
  lone.join();
  {
    std::unique_lock lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(60), [&] { return values.size() == 3; }));
  }
  std::sort(values.begin(), values.end());
  EXPECT_EQ(values, (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(store->stats().commits - commits_before, 2u) << "the lone write's, then one batch";

  auto answered_on = [&](const std::string& key) {
    std::thread::id on;
    OnThreadServingOneClient(true, [&] {
      std::promise<std::thread::id> p;
      store->next({Ref("c"), {key, ""}}, [&](Result<NextReply> r) {
        p.set_value(r.ok() ? std::this_thread::get_id() : std::thread::id());
      });
      on = p.get_future().get();
      if (on == std::this_thread::get_id()) on = std::thread::id();  // "here"
    });
    return on;
  };
  EXPECT_NE(answered_on("after-batch"), std::thread::id()) << "the batch of 3 ended the lone mode";
  EXPECT_EQ(answered_on("after-one"), std::thread::id()) << "a batch of one starts it again";
}

// close() waits for a lone write running on a caller's thread (the writer stops only when none
// runs), and that write is answered and kept.
TEST_F(SqliteStoreTest, CloseWaitsForALoneWrite) {
  auto store = MustOpen();
  ASSERT_TRUE(store);
  ASSERT_TRUE(SyncStore(*store).create_counter({Ref("c"), Config()}).ok());
  std::promise<void> inside, release;
  auto released = release.get_future().share();
  std::promise<std::string> answer;
  std::thread lone([&] {
    test_serves_one_client() = true;
    Job job;
    job.apply = [&](Tables& t, TimeMs) {
      inside.set_value();
      released.wait_for(std::chrono::seconds(60));
      auto c = t.find_counter("acme", "c");
      return c.ok() && *c && t.save_period((*c)->id, "", PeriodRow{7, 7, 0}).ok();
    };
    job.finish = [&](const Error* e) { answer.set_value(e ? e->message : "ok"); };
    SqliteStoreTestPeer::submit_write(*store, std::move(job));
  });
  ASSERT_EQ(inside.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready);
  auto closed = std::async(std::launch::async, [&] { store->close(); });
  EXPECT_EQ(closed.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout)
      << "close() returned while a lone write held the connection";
  release.set_value();
  lone.join();
  ASSERT_EQ(closed.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  EXPECT_EQ(answer.get_future().get(), "ok");
  store.reset();

  auto reopened = MustOpen();
  ASSERT_TRUE(reopened);
  auto info = SyncStore(*reopened).get_counter(Ref("c"));
  ASSERT_TRUE(info.ok()) << info.error().message;
  EXPECT_EQ(info->last_value, 7) << "the lone write's period row";
}

// Many threads that each serve one client, and some that do not, issuing at once: lone writes on
// callers' threads and the writer's batches take turns on one connection, and every number is
// given once, in order per thread, and kept across a restart.
TEST_F(SqliteStoreTest, LoneWritesAndBatchesFromManyThreadsGiveUniqueConsecutiveValues) {
  constexpr int kThreads = 12;
  constexpr int kPerThread = 40;
  std::vector<std::vector<std::int64_t>> got;
  {
    auto store = MustOpen();
    ASSERT_TRUE(store);
    ASSERT_TRUE(SyncStore(*store).create_counter({Ref("c"), Config()}).ok());
    got = IssueFromThreads(*store, kThreads, kPerThread, [](int t) { return t % 3 != 0; });
    store->close();
  }
  ExpectUniqueConsecutive(got);
  auto store = MustOpen();
  ASSERT_TRUE(store);
  SyncStore s(*store);
  for (int t = 0; t < kThreads; ++t) ExpectReplays(s, "t" + std::to_string(t) + "-7", got[t][7]);
}

TEST_F(SqliteStoreTest, ReopenKeepsTheSchemaVersion) {
  std::string db_path;
  {
    auto store = MustOpen();
    ASSERT_TRUE(store);
    db_path = store->db_path();
    ASSERT_TRUE(SyncStore(*store).create_counter({Ref("c"), Config()}).ok());
  }  // destructor closes
  const int v = current_schema_version();
  ASSERT_GE(v, 1);
  EXPECT_EQ(SchemaVersionRows(db_path), std::make_pair(v, v));

  for (int i = 0; i < 2; ++i) {
    auto store = MustOpen();
    ASSERT_TRUE(store);
    EXPECT_TRUE(SyncStore(*store).get_counter(Ref("c")).ok());
    store->close();
    // Each migration is applied once: reopening adds no rows and keeps the version.
    EXPECT_EQ(SchemaVersionRows(db_path), std::make_pair(v, v));
  }
}

// Migration 8: once_finished (no query has used it since the purge went namespace by namespace)
// is gone; the purge's index once_ns_finished stays and is what the purge's query uses.
TEST_F(SqliteStoreTest, FinishedOnceRecordsAreIndexedOnlyByNamespace) {
  sqlite3* db = FreshDatabase();
  ASSERT_NE(db, nullptr);
  auto column = [&](const char* sql) { return Rows(db, sql); };
  EXPECT_EQ(column("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = "
                   "'once_records' AND name NOT LIKE 'sqlite_%' ORDER BY name"),
            "once_ns_finished;once_open;");
  EXPECT_NE(column("EXPLAIN QUERY PLAN SELECT key FROM once_records WHERE ns = 'a' AND "
                   "finished_at IS NOT NULL AND finished_at < 5 ORDER BY finished_at LIMIT 10")
                .find("once_ns_finished"),
            std::string::npos);
  sqlite3_close_v2(db);
}

// Migration 11 (decision 131): once_open indexes the open records only, and every statement of
// the once list and count that filters an open state runs on it — the real statements, as the
// connection prepared them, so a query that lost its `state <> 'completed'` term (SQLite would
// then scan the namespace) fails here. Completed records are listed and paged through the
// (ns, key) unique index.
TEST_F(SqliteStoreTest, OpenOnceRecordsAreIndexedAndCompletedOnesAreNot) {
  const std::string path = NewDatabasePath();
  ASSERT_FALSE(path.empty());
  Db db;
  ASSERT_TRUE(db.open(path, false).ok());
  SqliteTables t(db);
  auto save = [&](const std::string& key, core::OnceState state) {
    core::OnceRecord r;
    r.key = key;
    r.state = state;
    r.owner = "o";
    r.token = 1;
    r.attempt = 1;
    r.lease_expires_at = key == "p-live" ? kNow + 60000 : 0;  // p-lapsed: lapsed long ago
    if (state == core::OnceState::completed || state == core::OnceState::dead) r.finished_at = kNow;
    ASSERT_TRUE(t.save_once("a", r).ok());
  };
  ASSERT_TRUE(db.exec("BEGIN", "begin").ok());
  for (int i = 0; i < 300; ++i) save("c" + std::to_string(1000 + i), core::OnceState::completed);
  save("p-live", core::OnceState::processing);
  save("p-lapsed", core::OnceState::processing);
  save("q", core::OnceState::pending);
  save("x", core::OnceState::dead);
  ASSERT_TRUE(db.exec("COMMIT", "commit").ok());
  EXPECT_EQ(Rows(db.raw(),
                 "SELECT COUNT(*) FROM once_records INDEXED BY once_open WHERE "
                 "state <> 'completed'"),
            "4;");

  using core::OnceFilter;
  auto keys = [&](OnceFilter f, const std::string& after, int limit) {
    std::string out;
    auto r = t.list_once("a", f, kNow, after, limit);
    EXPECT_TRUE(r.ok()) << r.error().message;
    if (r.ok())
      for (const auto& rec : *r) out += rec.key + ";";
    return out;
  };
  EXPECT_EQ(keys(OnceFilter::processing, "", 10), "p-live;");
  EXPECT_EQ(keys(OnceFilter::expired, "", 10), "p-lapsed;");
  EXPECT_EQ(keys(OnceFilter::pending, "", 10), "q;");
  EXPECT_EQ(keys(OnceFilter::dead, "", 10), "x;");
  EXPECT_EQ(keys(OnceFilter::completed, "", 2), "c1000;c1001;");
  EXPECT_EQ(keys(OnceFilter::completed, "c1298", 5), "c1299;");
  auto counts = t.count_once("a", kNow, 1000);
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->completed, 300);
  EXPECT_EQ(counts->processing, 1);
  EXPECT_EQ(counts->expired, 1);
  EXPECT_EQ(counts->pending, 1);
  EXPECT_EQ(counts->dead, 1);
  EXPECT_FALSE(counts->capped);

  // Every statement the connection prepared for them, and the index its plan uses.
  int open_statements = 0;
  bool completed_list = false;
  for (sqlite3_stmt* st = sqlite3_next_stmt(db.raw(), nullptr); st != nullptr;
       st = sqlite3_next_stmt(db.raw(), st)) {
    const std::string sql = sqlite3_sql(st);
    if (sql.find("FROM once_records WHERE ns") == std::string::npos) continue;
    const std::string plan = Rows(db.raw(), ("EXPLAIN QUERY PLAN " + sql).c_str());
    if (sql.find(ICHIDO_ONCE_OPEN) != std::string::npos) {
      ++open_statements;
      EXPECT_NE(plan.find("INDEX once_open"), std::string::npos) << sql << "\n" << plan;
    } else if (sql.find("state = 'completed' ORDER BY key") != std::string::npos) {
      completed_list = true;
      EXPECT_NE(plan.find("INDEX sqlite_autoindex_once_records_1"), std::string::npos)
          << sql << "\n"
          << plan;
    }
  }
  // The lists of processing, expired, pending and dead; the counts of pending, dead and
  // processing.
  EXPECT_EQ(open_statements, 7);
  EXPECT_TRUE(completed_list);
}

// A begin's record (Tables::insert_once_unless_found, used by TableStore::begin_once): a new
// key is inserted with the token next_token then draws, and nothing reads once_records before
// the insert (its own search of the (ns, key) index says whether the key is taken); a taken
// key is answered with the stored record, read after the insert found it, nothing written and no
// token drawn. Both in the writer's deferred mode and writing through.
TEST_F(SqliteStoreTest, ABeginInsertsANewKeyWithoutSearchingFirstAndDrawsNoTokenForATakenOne) {
  const std::string path = NewDatabasePath();
  ASSERT_FALSE(path.empty());
  Db db;
  ASSERT_TRUE(db.open(path, false).ok());
  StatementsOn log(db, "once_records");
  auto& ran = log.ran;
  for (const bool deferred : {false, true}) {
    SCOPED_TRACE(deferred ? "deferred writes" : "writing through");
    WriterCache cache;
    cache.defer_writes = deferred;
    SqliteTables t(db, &cache);
    ASSERT_TRUE(db.exec("BEGIN", "begin").ok());
    const auto before = t.peek_token();
    ASSERT_TRUE(before.ok());
    core::OnceRecord rec;
    rec.key = deferred ? "mail-2" : "mail-1";
    rec.state = core::OnceState::processing;
    rec.owner = "pc-1";
    rec.attempt = 1;
    rec.max_attempts = 3;
    rec.lease_expires_at = kNow + 60000;
    rec.created_at = rec.updated_at = kNow;
    ran.clear();
    auto inserted = t.insert_once_unless_found("shop", rec);
    ASSERT_TRUE(inserted.ok()) << inserted.error().message;
    EXPECT_FALSE(*inserted);
    EXPECT_EQ(rec.token, *before);
    ASSERT_EQ(ran.size(), 1u) << "only the insert, no search before it";
    EXPECT_EQ(ran[0].rfind("INSERT INTO once_records", 0), 0u) << ran[0];

    core::OnceRecord again = rec;
    again.owner = "pc-2";
    again.token = 0;
    // What a taken key answers: the stored record (pc-1's, with its token), `again` untouched.
    auto expect_stored = [&](const Result<std::optional<core::OnceRecord>>& r) {
      ASSERT_TRUE(r.ok()) << r.error().message;
      ASSERT_TRUE(*r);
      EXPECT_EQ((*r)->owner, "pc-1");
      EXPECT_EQ((*r)->token, rec.token);
      EXPECT_EQ(again.token, 0);
    };
    // Taken: the insert finds the key, then reads the record. Again after the writer's cache is
    // cleared, as after a rollback (the deferred sequence written first, as a batch's flush
    // does).
    for (const bool cleared : {false, true}) {
      SCOPED_TRACE(cleared ? "after a clear" : "as it is");
      if (cleared) {
        ASSERT_TRUE(t.flush_writes().ok());
        cache.clear();
      }
      ran.clear();
      expect_stored(t.insert_once_unless_found("shop", again));
      ASSERT_EQ(ran.size(), 2u);
      EXPECT_EQ(ran[0].rfind("INSERT INTO once_records", 0), 0u) << ran[0];
      EXPECT_EQ(ran[1].rfind("SELECT", 0), 0u) << ran[1];
    }
    EXPECT_EQ(Rows(db.raw(),
                   ("SELECT owner, token FROM once_records WHERE key = '" + rec.key + "'").c_str()),
              "pc-1|" + std::to_string(rec.token) + ";");
    // Neither taken key drew a token.
    auto next = t.next_token();
    ASSERT_TRUE(next.ok());
    EXPECT_EQ(*next, rec.token + 1);
    ASSERT_TRUE(db.exec("ROLLBACK", "roll back").ok());
  }
}

// Migration 9: the CHECK on once_records.state is written with equalities, so that checking it
// builds no ephemeral b-tree (as `IN (...)` with four values did on every save), and it still
// refuses a state that is not one of the four.
TEST_F(SqliteStoreTest, TheOnceStateCheckHoldsWithoutAnEphemeralTable) {
  sqlite3* db = FreshDatabase();
  ASSERT_NE(db, nullptr);
  const std::string sql = Rows(db, "SELECT sql FROM sqlite_schema WHERE name = 'once_records'");
  EXPECT_EQ(sql.find("state IN"), std::string::npos) << sql;
  EXPECT_NE(sql.find("CHECK (state = 'processing' OR state = 'pending' OR state = 'completed' OR "
                     "state = 'dead')"),
            std::string::npos)
      << sql;
  const std::string plan =
      Rows(db,
           "EXPLAIN UPDATE once_records SET state = 'dead', finished_at = 1 WHERE ns = 'a' AND "
           "key = 'b'");
  EXPECT_NE(plan.find("state = 'processing'"), std::string::npos) << plan;  // the check runs
  EXPECT_EQ(plan.find("OpenEphemeral"), std::string::npos) << plan;
  EXPECT_EQ(Rows(db, "PRAGMA integrity_check"), "ok;");
  const char* insert =
      "INSERT INTO once_records (ns, key, state, owner, token, attempt, max_attempts, "
      "lease_expires_at, last_error, holder_done, created_at, updated_at) VALUES "
      "('a', 'b', '%s', 'o', 1, 1, 1, 1, '', 0, 1, 1)";
  char bad[512], good[512];
  std::snprintf(bad, sizeof bad, insert, "done");
  std::snprintf(good, sizeof good, insert, "completed");
  EXPECT_NE(Rows(db, bad).find("CHECK constraint failed"), std::string::npos);
  EXPECT_EQ(Rows(db, good), "");
  sqlite3_close_v2(db);
}

// A start that upgrades an existing database's schema says so first (the server logs it: a
// long first start after an upgrade is not a silent one); a new database and a current one do
// not.
TEST_F(SqliteStoreTest, AnUpgradeOfTheSchemaIsAnnouncedFirst) {
  std::vector<std::pair<int, int>> told;
  Options o = Opts();
  o.on_upgrade = [&](int from, int to) { told.emplace_back(from, to); };
  std::string db_path;
  {
    auto store = MustOpen(o);
    ASSERT_TRUE(store);
    db_path = store->db_path();
  }
  EXPECT_TRUE(told.empty());  // a new store is created, not upgraded
  {
    auto store = MustOpen(o);
    ASSERT_TRUE(store);
  }
  EXPECT_TRUE(told.empty());  // already current
  // Back to the previous version, as a store the last release left.
  const int v = current_schema_version();
  ASSERT_NO_FATAL_FAILURE(DowngradeTo12(db_path));
  {
    auto store = MustOpen(o);
    ASSERT_TRUE(store);
  }
  EXPECT_EQ(told, (std::vector<std::pair<int, int>>{{v - 1, v}}));
  EXPECT_EQ(SchemaVersionRows(db_path), std::make_pair(v, v));
}

// Migration 12 (decision 143) on a store the previous release left with keyed and unkeyed
// numbers: every keyed number gets its own kseq, the key sequence stands at the last, the
// unique key index is gone, and every key is still answered its number — from a key index built
// from the rows, since such a store has no snapshot.
TEST_F(SqliteStoreTest, AnUpgradeStampsEveryKeyedNumberAndEveryKeyKeepsItsNumber) {
  std::map<std::string, std::int64_t> issued;
  std::string db_path;
  {
    auto store = MustOpen();
    ASSERT_TRUE(store);
    db_path = store->db_path();
    SyncStore s(*store);
    ASSERT_TRUE(s.create_counter({Ref("c"), Config()}).ok());
    for (int i = 0; i < 40; ++i) {
      const std::string key = "k" + std::to_string(i);
      auto r = s.next({Ref("c"), {key, ""}});
      ASSERT_TRUE(r.ok());
      issued[key] = r->record.value;
      if (i % 8 == 0) {
        ASSERT_TRUE(s.next({Ref("c"), {std::nullopt, ""}}).ok());  // unkeyed
      }
    }
  }
  ASSERT_NO_FATAL_FAILURE(DowngradeTo11(db_path));
  std::filesystem::remove(Opts().dir + "/keys.idx");
  std::vector<std::pair<int, int>> told;
  Options o = Opts();
  o.on_upgrade = [&](int from, int to) { told.emplace_back(from, to); };
  {
    auto store = MustOpen(o);
    ASSERT_TRUE(store);
    EXPECT_EQ(told, (std::vector<std::pair<int, int>>{{11, 13}}));
    SyncStore s(*store);
    for (const auto& [key, value] : issued) {
      auto again = s.next({Ref("c"), {key, ""}});
      ASSERT_TRUE(again.ok()) << key;
      EXPECT_TRUE(again->replayed) << key;
      EXPECT_EQ(again->record.value, value) << key;
    }
    auto fresh = s.next({Ref("c"), {"new", ""}});
    ASSERT_TRUE(fresh.ok());
    EXPECT_FALSE(fresh->replayed);
    EXPECT_EQ(fresh->record.value, 46);
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  EXPECT_EQ(Rows(db,
                 "SELECT COUNT(*), COUNT(kseq), COUNT(DISTINCT kseq), MIN(kseq), MAX(kseq) "
                 "FROM issued WHERE key IS NOT NULL"),
            "41|41|41|1|41;");
  EXPECT_EQ(Rows(db, "SELECT COUNT(kseq) FROM issued WHERE key IS NULL"), "0;");
  EXPECT_EQ(Rows(db, "SELECT value FROM sequences WHERE name = 'key'"), "41;");
  EXPECT_EQ(Rows(db,
                 "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = "
                 "'issued' ORDER BY name"),
            "issued_by_kseq;");
  EXPECT_EQ(Rows(db, "PRAGMA integrity_check"), "ok;");
  sqlite3_close_v2(db);
}

// Migration 13 on a store the previous release left: its counters keep their config (no fiscal
// year start) and numbering, and a fiscal-year counter can be created and read back.
TEST_F(SqliteStoreTest, AnUpgradeKeepsEveryCounterAndAddsFiscalYears) {
  std::string db_path;
  {
    auto store = MustOpen();
    ASSERT_TRUE(store);
    db_path = store->db_path();
    SyncStore s(*store);
    ASSERT_TRUE(s.create_counter(
                     {Ref("monthly"), core::CounterConfig{0, 99, "M{mm}-{seq}", core::Period::month,
                                                          "Asia/Tokyo", true}})
                    .ok());
    ASSERT_TRUE(s.next({Ref("monthly"), {"k", ""}}).ok());
  }
  ASSERT_NO_FATAL_FAILURE(DowngradeTo12(db_path));
  auto store = MustOpen();
  ASSERT_TRUE(store);
  SyncStore s(*store);
  auto monthly = s.get_counter(Ref("monthly"));
  ASSERT_TRUE(monthly.ok()) << monthly.error().message;
  EXPECT_EQ(monthly->config,
            (core::CounterConfig{0, 99, "M{mm}-{seq}", core::Period::month, "Asia/Tokyo", true}));
  EXPECT_EQ(monthly->last_value, 1);
  auto replay = s.next({Ref("monthly"), {"k", ""}});
  ASSERT_TRUE(replay.ok());
  EXPECT_TRUE(replay->replayed);
  core::CounterConfig fy{0, 99, "{fy}-{seq}", core::Period::fiscal_year, "Asia/Tokyo", false, 4};
  ASSERT_TRUE(s.create_counter({Ref("fy"), fy}).ok());
  auto got = s.get_counter(Ref("fy"));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->config, fy);
}

TEST_F(SqliteStoreTest, RefusesADatabaseFromANewerVersion) {
  const std::string db_path = NewDatabasePath();
  ASSERT_FALSE(db_path.empty());
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  const std::string sql = "INSERT INTO schema_version (version) VALUES (" +
                          std::to_string(current_schema_version() + 1) + ")";
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close_v2(db);

  auto store = SqliteStore::open(Opts());
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.error().code, errc::store_unavailable);
  // The refusal released the LOCK: after fixing the file, the directory opens again.
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db,
                         ("DELETE FROM schema_version WHERE version > " +
                          std::to_string(current_schema_version()))
                             .c_str(),
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close_v2(db);
  EXPECT_TRUE(MustOpen());
}

}  // namespace
}  // namespace ichido::store::sqlite

namespace ichido::store::sqlite {
namespace {

// The statement cache is keyed by the SQL text, not by where the text happens to live: two
// different statements built in the same buffer one after the other are two statements.
TEST(DbStatementCache, DifferentTextAtTheSameAddressIsADifferentStatement) {
  store_testing::TempDir dir;
  Db db;
  ASSERT_TRUE(db.open(dir.path() + "/t.db", /*create=*/true).ok());
  char sql[32];
  auto value_of = [&](const char* text) -> std::int64_t {
    std::snprintf(sql, sizeof sql, "%s", text);
    auto q = db.query(sql);
    EXPECT_TRUE(q.ok());
    if (!q.ok() || q->step() != SQLITE_ROW) return -1;
    return q->int64(0);
  };
  EXPECT_EQ(value_of("SELECT 1"), 1);
  EXPECT_EQ(value_of("SELECT 2"), 2);
  EXPECT_EQ(value_of("SELECT 1"), 1);
}

}  // namespace
}  // namespace ichido::store::sqlite
