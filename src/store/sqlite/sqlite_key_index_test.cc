// The embedded store's key index in use (decision 143): issued numbers' keys found through
// KeyIndex and confirmed by their rows, its snapshot written at a clean close and by the snapshot
// thread, start-up from the snapshot the database names (or a rebuild that says why), a crash
// (a child process killed with SIGKILL) losing no key, and rollbacks leaving no slot.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "store/sqlite/maintenance.h"
#include "store/sqlite/sqlite_store.h"
#include "store/sqlite/sqlite_tables.h"
#include "store/sqlite/test_peer.h"
#include "store/testing/sync_store.h"

namespace ichido::store::sqlite {
namespace {

using store_testing::SyncStore;
using store_testing::TempDir;

class SqliteKeyIndexTest : public ::testing::Test {
 protected:
  Options Opts() {
    Options o;
    o.dir = dir();
    o.on_notice = [this](const std::string& line) {
      std::lock_guard<std::mutex> l(mu_);
      notices_.push_back(line);
    };
    return o;
  }
  std::string dir() const { return tmp_.path() + "/data"; }
  std::string keys_file() const { return dir() + "/keys.idx"; }
  std::unique_ptr<SqliteStore> MustOpen(Options o) {
    {
      std::lock_guard<std::mutex> l(mu_);
      notices_.clear();
    }
    auto s = SqliteStore::open(std::move(o));
    EXPECT_TRUE(s.ok()) << s.error().message;
    return s.ok() ? std::move(*s) : nullptr;
  }
  std::unique_ptr<SqliteStore> MustOpen() { return MustOpen(Opts()); }
  std::string Notices() {
    std::lock_guard<std::mutex> l(mu_);
    std::string out;
    for (const auto& n : notices_) out += n + "\n";
    return out;
  }

  static CounterRef Ref() { return {"acme", "c"}; }
  static void MakeCounter(SqliteStore& s) {
    core::CounterConfig c;
    c.max = 1'000'000;
    c.format = "N{seq:6}";
    ASSERT_TRUE(SyncStore(s).create_counter({Ref(), c}).ok());
  }
  // Issues a number to each key; returns key → value.
  static std::map<std::string, std::int64_t> Issue(SqliteStore& s, const std::string& prefix,
                                                   int n) {
    std::map<std::string, std::int64_t> out;
    for (int i = 0; i < n; ++i) {
      const std::string key = prefix + std::to_string(i);
      auto r = SyncStore(s).next({Ref(), {key, ""}});
      EXPECT_TRUE(r.ok()) << key << ": " << (r.ok() ? "" : r.error().message);
      if (r.ok()) {
        EXPECT_FALSE(r->replayed) << key;
        out[key] = r->record.value;
      }
    }
    return out;
  }
  // Every key is answered its number again (the writer's lookup) and found by a read (a reader's
  // lookup); a new key gets a number none of them has (and is held from then on).
  static void ExpectKeysHeld(SqliteStore& s, const std::map<std::string, std::int64_t>& issued) {
    std::set<std::int64_t> values;
    for (const auto& [key, value] : issued) {
      values.insert(value);
      auto again = SyncStore(s).next({Ref(), {key, ""}});
      ASSERT_TRUE(again.ok()) << key;
      EXPECT_TRUE(again->replayed) << key;
      EXPECT_EQ(again->record.value, value) << key;
      IssuedQuery q;
      q.ref = Ref();
      q.key = key;
      auto read = SyncStore(s).list_issued(q);
      ASSERT_TRUE(read.ok()) << key;
      ASSERT_EQ(read->items.size(), 1u) << key;
      EXPECT_EQ(read->items[0].value, value) << key;
    }
    static int fresh_keys = 0;
    const std::string fresh_key = "never-seen-before-" + std::to_string(++fresh_keys);
    auto fresh = SyncStore(s).next({Ref(), {fresh_key, ""}});
    ASSERT_TRUE(fresh.ok());
    EXPECT_FALSE(fresh->replayed);
    EXPECT_EQ(values.count(fresh->record.value), 0u);
  }
  static std::uint64_t Keys(SqliteStore& s) { return s.own_stats().keys; }

  TempDir tmp_;
  std::mutex mu_;
  std::vector<std::string> notices_;
};

TEST_F(SqliteKeyIndexTest, ACleanCloseLeavesASnapshotThatTheNextStartLoadsWhole) {
  std::map<std::string, std::int64_t> issued;
  {
    auto s = MustOpen();
    ASSERT_TRUE(s);
    EXPECT_NE(Notices().find("key index: built from 0 rows"), std::string::npos) << Notices();
    MakeCounter(*s);
    issued = Issue(*s, "k", 100);
    EXPECT_EQ(Keys(*s), 100u);
    s->close();
  }
  ASSERT_TRUE(std::filesystem::exists(keys_file()));
  auto s = MustOpen();
  ASSERT_TRUE(s);
  EXPECT_NE(Notices().find("key index: 100 keys from " + keys_file() + " and 0 newer rows"),
            std::string::npos)
      << Notices();
  ExpectKeysHeld(*s, issued);
  EXPECT_EQ(Keys(*s), 101u);
}

TEST_F(SqliteKeyIndexTest, AMissingDamagedOrOutdatedSnapshotIsRebuiltFromTheRowsAndSaysWhy) {
  std::map<std::string, std::int64_t> issued;
  {
    auto s = MustOpen();
    ASSERT_TRUE(s);
    MakeCounter(*s);
    issued = Issue(*s, "k", 50);
  }
  const std::string old_file = tmp_.path() + "/keys.idx.old";
  std::filesystem::copy_file(keys_file(), old_file);

  // Gone: rebuilt (and written again at the close).
  std::filesystem::remove(keys_file());
  {
    auto s = MustOpen();
    ASSERT_TRUE(s);
    EXPECT_NE(Notices().find("key index: built from 50 rows"), std::string::npos) << Notices();
    ExpectKeysHeld(*s, issued);  // adds a fresh key
    auto more = Issue(*s, "m", 19);
    issued.insert(more.begin(), more.end());
  }
  // One byte changed: refused by its checksum.
  {
    std::fstream f(keys_file(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x5a');
  }
  {
    auto s = MustOpen();
    ASSERT_TRUE(s);
    EXPECT_NE(Notices().find("key index: built from 70 rows"), std::string::npos) << Notices();
    ExpectKeysHeld(*s, issued);
  }
  // An older snapshot than the one the database names (e.g. the file copied back from a
  // backup): it would miss the keys issued since, so it is not used.
  std::filesystem::copy_file(old_file, keys_file(),
                             std::filesystem::copy_options::overwrite_existing);
  auto s = MustOpen();
  ASSERT_TRUE(s);
  EXPECT_NE(Notices().find("key index: built from 71 rows"), std::string::npos) << Notices();
  EXPECT_NE(Notices().find("the database names"), std::string::npos) << Notices();
  ExpectKeysHeld(*s, issued);
}

// A real crash: a child process issues keyed numbers and is killed with SIGKILL (no close, so
// no snapshot of its keys); every number it was answered is held after the restart, which loads
// the snapshot of the last clean close and adds the rows after it from the database.
TEST_F(SqliteKeyIndexTest, ACrashLosesNoKeyAndTheNextStartAddsTheRowsAfterTheLastSnapshot) {
  std::map<std::string, std::int64_t> issued;
  {
    auto s = MustOpen();
    ASSERT_TRUE(s);
    MakeCounter(*s);
    issued = Issue(*s, "before", 30);
  }
  const std::string answers = tmp_.path() + "/answers";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Options o = Opts();
    o.on_notice = {};
    auto opened = SqliteStore::open(o);
    if (!opened.ok()) ::_exit(2);
    std::FILE* out = std::fopen(answers.c_str(), "w");
    if (!out) ::_exit(3);
    for (int i = 0; i < 22; ++i) {
      const std::string key = "crash" + std::to_string(i);
      auto r = SyncStore(**opened).next({Ref(), {key, ""}});
      if (!r.ok()) ::_exit(4);
      std::fprintf(out, "%s %lld\n", key.c_str(), static_cast<long long>(r->record.value));
      std::fflush(out);
    }
    std::fclose(out);
    ::raise(SIGKILL);
    ::_exit(5);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "child status " << status;
  {
    std::ifstream in(answers);
    std::string key;
    long long value = 0;
    while (in >> key >> value) issued[key] = value;
  }
  ASSERT_EQ(issued.size(), 52u);
  auto s = MustOpen();
  ASSERT_TRUE(s);
  EXPECT_NE(Notices().find("key index: 52 keys from " + keys_file() + " and 22 newer rows"),
            std::string::npos)
      << Notices();
  ExpectKeysHeld(*s, issued);
  EXPECT_EQ(Keys(*s), 53u);
}

// A command that inserted its key and then failed: its batch runs again with a savepoint per
// command, and rolling the savepoint back removes the slot; the key is then free.
TEST_F(SqliteKeyIndexTest, ACommandRolledBackLeavesNoSlotAndItsKeyIsNew) {
  auto s = MustOpen();
  ASSERT_TRUE(s);
  MakeCounter(*s);
  auto issued = Issue(*s, "k", 3);
  std::promise<std::string> answered;
  Job job;
  job.apply = [](Tables& t, TimeMs) -> bool {
    core::IssuedNumber n;
    n.period = "";
    n.value = 999;
    n.formatted = "N000999";
    n.key = "doomed";
    auto inserted = t.insert_issued_unless_key(1, n);
    return !(inserted.ok() && *inserted);  // written, then failed
  };
  job.finish = [&answered](const Error* e) {
    answered.set_value(e ? std::string(to_string(e->code)) : "finished");
  };
  SqliteStoreTestPeer::submit_write(*s, std::move(job));
  EXPECT_EQ(answered.get_future().get(), "finished");
  EXPECT_EQ(s->stats().isolated_batches, 1u);
  EXPECT_EQ(Keys(*s), 3u) << "the savepoint's slot went with its row";
  auto doomed = SyncStore(*s).next({Ref(), {"doomed", ""}});
  ASSERT_TRUE(doomed.ok());
  EXPECT_FALSE(doomed->replayed);
  EXPECT_EQ(doomed->record.value, 4);
  ExpectKeysHeld(*s, issued);
}

// Snapshots are taken by the snapshot thread as keys come (here every 25), each named by the
// database only once its file is whole.
TEST_F(SqliteKeyIndexTest, TheSnapshotThreadWritesSnapshotsAsKeysCome) {
  Options o = Opts();
  o.key_snapshot_every = 25;
  auto s = MustOpen(o);
  ASSERT_TRUE(s);
  MakeCounter(*s);
  // Three rounds of 40 new keys, each waiting for its snapshot: requests that come while the
  // thread is writing one are answered by the next, so keys issued in one burst may give fewer.
  std::map<std::string, std::int64_t> issued;
  for (std::uint64_t round = 1; round <= 3; ++round) {
    issued.merge(Issue(*s, "k" + std::to_string(round) + "-", 40));
    for (int i = 0; i < 6000 && s->own_stats().key_snapshots < round; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_GE(s->own_stats().key_snapshots, round) << "no snapshot after 40 new keys";
  }
  const auto k = s->own_stats();
  EXPECT_EQ(k.failed_key_snapshots, 0u);
  EXPECT_EQ(k.keys, 120u);
  EXPECT_GE(k.key_memory_bytes, 120u * 8);
  // /metrics serves them under these names.
  const auto own = s->stats().own;
  auto served = [&](const std::string& name) {
    for (const auto& m : own)
      if (m.name == name) return std::optional<std::uint64_t>(m.value);
    return std::optional<std::uint64_t>();
  };
  EXPECT_EQ(served("ichido_store_key_index_keys"), k.keys);
  EXPECT_EQ(served("ichido_store_key_index_bytes"), k.key_memory_bytes);
  EXPECT_EQ(served("ichido_store_key_index_snapshots_total"), k.key_snapshots);
  EXPECT_EQ(served("ichido_store_key_index_failed_snapshots_total"), 0u);
  EXPECT_NE(Notices().find("key index: snapshot of "), std::string::npos) << Notices();
  ExpectKeysHeld(*s, issued);
}

// The refusals around the key index, each changing nothing: a key stamp past the 36 bits a slot
// holds (503, the cause named), a keyed number inserted where there is no index or through
// save_issued (internal: it would have no slot).
TEST_F(SqliteKeyIndexTest, AKeyStampPastItsLastAndAKeyedInsertWithoutASlotAreRefused) {
  std::string db_path;
  {
    auto s = MustOpen();
    ASSERT_TRUE(s);
    MakeCounter(*s);
    db_path = s->db_path();
  }
  Db db;
  ASSERT_TRUE(db.open(db_path, /*create=*/false).ok());
  KeyIndex index(KeyTable(), KeySecret{1, 2});
  core::IssuedNumber n;
  n.value = 1;
  n.formatted = "N000001";
  n.key = "k";
  auto begin = [&] { ASSERT_TRUE(db.exec("BEGIN IMMEDIATE", "begin").ok()); };
  auto rollback = [&] { ASSERT_TRUE(db.exec("ROLLBACK", "roll back").ok()); };
  begin();
  const std::string last = std::to_string(KeyTable::kMaxKseq);
  ASSERT_TRUE(db.exec(("INSERT INTO sequences (name, value) VALUES ('key', " + last +
                       ") ON CONFLICT (name) DO UPDATE SET value = excluded.value")
                          .c_str(),
                      "set the key sequence")
                  .ok());
  SqliteTables with_index(db, nullptr, &index);
  auto past = with_index.insert_issued_unless_key(1, n);
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.error().code, errc::store_unavailable);
  EXPECT_NE(past.error().message.find("last key stamp"), std::string::npos) << past.error().message;
  EXPECT_EQ(index.stats().keys, 0u);
  rollback();

  begin();
  SqliteTables without_index(db);
  auto no_index = without_index.insert_issued_unless_key(1, n);
  ASSERT_FALSE(no_index.ok());
  EXPECT_EQ(no_index.error().code, errc::internal);
  auto saved = without_index.save_issued(1, n);
  ASSERT_FALSE(saved.ok());
  EXPECT_EQ(saved.error().code, errc::internal);
  rollback();
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open_v2(db_path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(raw, "SELECT COUNT(*) FROM issued", -1, &st, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(st, 0), 0);
  sqlite3_finalize(st);
  sqlite3_close_v2(raw);
}

// With no unique index on the keys, `ichido check` (a full check) verifies what the writer keeps:
// a stamp on every keyed number, no stamp twice or beyond the sequence, no key twice.
TEST_F(SqliteKeyIndexTest, TheFullCheckFindsAKeyHeldTwiceAndNumbersWithoutOrWithTheSameStamp) {
  std::string db_path;
  {
    auto s = MustOpen();
    ASSERT_TRUE(s);
    MakeCounter(*s);
    Issue(*s, "k", 5);
    db_path = s->db_path();
  }
  auto clean = check_store(dir(), /*quick=*/false);
  ASSERT_TRUE(clean.ok()) << clean.error().message;
  EXPECT_TRUE(clean->problems.empty()) << clean->problems.front();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
  const char* damage =
      "INSERT INTO issued (counter_id, period, value, formatted, key, note, issued_at, "
      "void_reason, kseq) VALUES (1, '', 100, 'x', 'k1', '', 0, '', 3), "
      "(1, '', 101, 'y', 'lost', '', 0, '', NULL), (1, '', 102, 'z', 'far', '', 0, '', 99)";
  ASSERT_EQ(sqlite3_exec(db, damage, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close_v2(db);
  auto found = check_store(dir(), /*quick=*/false);
  ASSERT_TRUE(found.ok()) << found.error().message;
  std::string all;
  for (const auto& p : found->problems) all += p + "\n";
  EXPECT_NE(all.find("the number with key 'lost' of counter 1 has no key stamp (kseq)"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("the key stamp 3 is on 2 numbers"), std::string::npos) << all;
  EXPECT_NE(all.find("numbers with key stamps beyond the key sequence: 1 (up to 99)"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("the key 'k1' of counter 1 is held by 2 numbers"), std::string::npos) << all;
  EXPECT_EQ(found->problems.size(), 4u) << all;
  auto quick = check_store(dir(), /*quick=*/true);
  ASSERT_TRUE(quick.ok());
  EXPECT_TRUE(quick->problems.empty()) << "the quick check reads pages, not keys";
}

}  // namespace
}  // namespace ichido::store::sqlite
