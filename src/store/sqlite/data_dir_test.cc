// The data directory's identity (data_dir.h D1-D4) through SqliteStore: a new directory just
// works, a lost or emptied database is refused (and --init starts over on purpose), tokens never
// go below the high-water mark — also after a restore of an older database — and damage is found
// at open.
#include "store/sqlite/data_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "store/sqlite/sqlite_store.h"
#include "store/testing/sync_store.h"

namespace ichido::store::sqlite {
namespace {

using store_testing::SyncStore;
using store_testing::TempDir;

class DataDirTest : public ::testing::Test {
 protected:
  std::string dir() const { return tmp_.path() + "/data"; }
  Result<std::unique_ptr<SqliteStore>> Open(bool init = false) {
    Options o;
    o.dir = dir();
    o.init = init;
    o.clock = &clock_;
    return SqliteStore::open(std::move(o));
  }
  std::unique_ptr<SqliteStore> MustOpen(bool init = false) {
    auto s = Open(init);
    EXPECT_TRUE(s.ok()) << s.error().message;
    return s.ok() ? std::move(*s) : nullptr;
  }
  // Grants a lock (a fresh token) and returns the token.
  std::int64_t Grant(SqliteStore& s, const std::string& name) {
    auto r = SyncStore(s).acquire_lock({{"ns", name}, "o", 1000});
    EXPECT_TRUE(r.ok() && r->acquired);
    return r.ok() ? r->record.token : -1;
  }
  void MakeCounterAndIssue(SqliteStore& s, int n) {
    core::CounterConfig c;
    c.max = 1000;
    ASSERT_TRUE(SyncStore(s).create_counter({{"ns", "c"}, c}).ok());
    for (int i = 0; i < n; ++i) {
      ASSERT_TRUE(SyncStore(s).next({{"ns", "c"}, {"k" + std::to_string(i), ""}}).ok());
    }
  }

  ManualClock clock_{1'775'000'000'000};
  TempDir tmp_;
};

TEST_F(DataDirTest, ANewDirectoryGetsAStoreAndAnIdentity) {
  auto s = MustOpen();
  ASSERT_TRUE(s);
  auto id = read_identity(dir());
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(id->has_value());
  EXPECT_EQ((*id)->store_id, s->identity().store_id);
  EXPECT_EQ((*id)->store_id.size(), 32u);
  EXPECT_GE((*id)->token_high_water, kTokenBlock);
}

// D2 for both ways a database goes: emptied and deleted. The message names the file and both
// ways out; nothing is created.
TEST_F(DataDirTest, ALostDatabaseIsRefusedNotStartedAgainFromZero) {
  {
    auto s = MustOpen();
    ASSERT_TRUE(s);
    MakeCounterAndIssue(*s, 3);
    s->close();
  }
  const std::string db = db_path_of(dir());
  for (bool emptied : {true, false}) {
    if (emptied) {
      std::ofstream(db, std::ios::trunc).close();  // `: > ichido.db`
    } else {
      std::filesystem::remove(db);
    }
    std::filesystem::remove(db + "-wal");
    auto r = Open();
    ASSERT_FALSE(r.ok()) << (emptied ? "emptied" : "deleted");
    EXPECT_NE(r.error().message.find(db), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(emptied ? "is empty" : "is missing"), std::string::npos)
        << r.error().message;
    EXPECT_NE(r.error().message.find("restore"), std::string::npos);
    EXPECT_NE(r.error().message.find("--init"), std::string::npos);
    EXPECT_EQ(r.error().details.count("needs_operator"), 1u);
  }
  EXPECT_FALSE(std::filesystem::exists(db)) << "a refused open must not create the database";
}

// --init starts a new store on purpose: empty, a new store id, tokens above every old one.
TEST_F(DataDirTest, InitStartsANewStoreWhoseTokensContinueAboveTheOldOnes) {
  std::int64_t old_token = 0;
  std::string old_id;
  {
    auto s = MustOpen();
    ASSERT_TRUE(s);
    old_token = Grant(*s, "l");
    old_id = s->identity().store_id;
    s->close();
  }
  std::filesystem::remove(db_path_of(dir()));
  std::filesystem::remove(db_path_of(dir()) + "-wal");
  auto s = MustOpen(/*init=*/true);
  ASSERT_TRUE(s);
  EXPECT_NE(s->identity().store_id, old_id);
  EXPECT_FALSE(SyncStore(*s).get_counter({"ns", "c"}).ok()) << "a new, empty store";
  EXPECT_GT(Grant(*s, "l"), old_token);
  s->close();
  // --init where a database exists is refused (it would discard it).
  auto again = Open(/*init=*/true);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().message.find("exists"), std::string::npos);
}

// D4: a restored older database (a copy taken before more tokens were handed out) never hands
// out a token it already handed out.
TEST_F(DataDirTest, TokensNeverGoBackwardsAfterAnOlderDatabaseIsPutBack) {
  const std::string db = db_path_of(dir());
  const std::string copy = tmp_.path() + "/old.db";
  std::int64_t last = 0;
  {
    auto s = MustOpen();
    ASSERT_TRUE(s);
    Grant(*s, "a");
    s->close();  // checkpointed: the file alone is the database
    std::filesystem::copy_file(db, copy);
  }
  {
    auto s = MustOpen();
    ASSERT_TRUE(s);
    for (int i = 0; i < 5; ++i) last = Grant(*s, "b" + std::to_string(i));
    s->close();
  }
  std::filesystem::copy_file(copy, db, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::remove(db + "-wal");
  auto s = MustOpen();
  ASSERT_TRUE(s);
  EXPECT_GT(Grant(*s, "c"), last);
}

// D4 while serving: handing out tokens past the reserved block raises the durable mark first.
TEST_F(DataDirTest, TheHighWaterMarkIsRaisedBeforeATokenPassesIt) {
  auto s = MustOpen();
  ASSERT_TRUE(s);
  const std::int64_t mark = s->identity().token_high_water;
  // Jump the sequence to just below the mark, as many grants would.
  {
    Db raw;
    ASSERT_TRUE(raw.open(db_path_of(dir()), false).ok());
    ASSERT_TRUE(raw.exec(("INSERT OR REPLACE INTO sequences (name, value) VALUES ('token', " +
                          std::to_string(mark - 1) + ")")
                             .c_str(),
                         "jump")
                    .ok());
  }
  EXPECT_EQ(Grant(*s, "x"), mark);
  EXPECT_EQ((*read_identity(dir()))->token_high_water, mark);
  const auto beyond = Grant(*s, "y");
  EXPECT_EQ(beyond, mark + 1);
  EXPECT_GE((*read_identity(dir()))->token_high_water, beyond) << "raised before answering";
}

// D3: a database without ichido.id (made before identities existed, or copied in) is adopted.
TEST_F(DataDirTest, ADatabaseWithoutAnIdentityIsAdopted) {
  std::int64_t token = 0;
  {
    auto s = MustOpen();
    ASSERT_TRUE(s);
    token = Grant(*s, "l");
    s->close();
  }
  std::filesystem::remove(identity_path_of(dir()));
  auto s = MustOpen();
  ASSERT_TRUE(s);
  EXPECT_TRUE(std::filesystem::exists(identity_path_of(dir())));
  EXPECT_GT(Grant(*s, "m"), token);
}

// Damage in a small database is found at open (quick_check) and refused as store_corrupt.
TEST_F(DataDirTest, ADamagedDatabaseIsRefusedAtOpen) {
  {
    auto s = MustOpen();
    ASSERT_TRUE(s);
    MakeCounterAndIssue(*s, 200);
    s->close();
  }
  const std::string db = db_path_of(dir());
  const auto size = std::filesystem::file_size(db);
  ASSERT_GT(size, 3u * 4096);
  {
    // Pages 2-4 are b-tree pages: junk over their headers (a page type SQLite knows is gone).
    std::fstream f(db, std::ios::in | std::ios::out | std::ios::binary);
    const std::string junk(64, '\x5a');
    for (int page = 1; page <= 3; ++page) {
      f.seekp(static_cast<std::streamoff>(page) * 4096);
      f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
    }
  }
  auto r = Open();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, errc::store_corrupt) << r.error().message;
  EXPECT_NE(r.error().message.find("restore"), std::string::npos);
}

TEST_F(DataDirTest, AFileThatIsNotADatabaseIsRefusedAsDamaged) {
  std::filesystem::create_directories(dir());
  std::ofstream(db_path_of(dir())) << std::string(8192, 'x');
  auto r = Open();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, errc::store_corrupt) << r.error().message;
}

}  // namespace
}  // namespace ichido::store::sqlite
