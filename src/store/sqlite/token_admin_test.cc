// TokensRevision and bump_tokens_revision: the revision a running server reads before every
// authenticated request follows what the token CLI does to DIR/tokens.seq — increments through
// its own mapping, from several processes at once — and a file removed or replaced under it is
// mapped again at the next recheck. Servers from before tokens.seq still see DIR/tokens.rev grow.
#include "store/sqlite/token_admin.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "store/testing/sync_store.h"

namespace ichido::store::sqlite {
namespace {

using store_testing::TempDir;

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string counter_bytes(std::uint64_t v) {
  std::string s(sizeof v, '\0');
  std::memcpy(s.data(), &v, sizeof v);
  return s;
}

TEST(TokensRevision, FollowsEveryIncrementThroughItsMapping) {
  TempDir tmp;
  const std::string seq = tmp.path() + "/tokens.seq";
  TokensRevision r(tmp.path());
  EXPECT_EQ(r(), 0u);
  ASSERT_TRUE(std::filesystem::exists(seq)) << "created, so that it can be mapped";
  EXPECT_EQ(std::filesystem::file_size(seq), 8u);
  ASSERT_TRUE(bump_tokens_revision(tmp.path()).ok());
  EXPECT_EQ(r(), 1u);
  EXPECT_EQ(r(), tokens_revision(tmp.path()));
  ASSERT_TRUE(bump_tokens_revision(tmp.path()).ok());
  ASSERT_TRUE(bump_tokens_revision(tmp.path()).ok());
  EXPECT_EQ(r(), 3u);
  r.recheck();  // the same file: nothing changes
  EXPECT_EQ(r(), 3u);
}

TEST(TokensRevision, IncrementsFromSeveralProcessesAtOnceAreNeverLost) {
  TempDir tmp;
  TokensRevision r(tmp.path());
  constexpr int kEach = 300;
  std::vector<std::thread> bumpers;  // each bump maps the file anew, as a separate CLI would
  for (int t = 0; t < 4; ++t) {
    bumpers.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) ASSERT_TRUE(bump_tokens_revision(tmp.path()).ok());
    });
  }
  for (auto& t : bumpers) t.join();
  EXPECT_EQ(r(), 4u * kEach);
}

// For a server from before tokens.seq, which reads the size of DIR/tokens.rev.
TEST(TokensRevision, EachIncrementAlsoGrowsTheOldRevisionFile) {
  TempDir tmp;
  ASSERT_TRUE(bump_tokens_revision(tmp.path()).ok());
  ASSERT_TRUE(bump_tokens_revision(tmp.path()).ok());
  EXPECT_EQ(std::filesystem::file_size(tmp.path() + "/tokens.rev"), 2u);
  EXPECT_EQ(tokens_revision(tmp.path()), 2u);
}

TEST(TokensRevision, AFileRemovedOrReplacedUnderItIsMappedAgainAtTheRecheck) {
  TempDir tmp;
  const std::string seq = tmp.path() + "/tokens.seq";
  TokensRevision r(tmp.path());
  ASSERT_TRUE(bump_tokens_revision(tmp.path()).ok());
  EXPECT_EQ(r(), 1u);

  std::filesystem::remove(seq);
  r.recheck();  // made again, and mapped
  EXPECT_TRUE(std::filesystem::exists(seq));
  ASSERT_TRUE(bump_tokens_revision(tmp.path()).ok());
  EXPECT_EQ(r(), 1u) << "the new file's counter";
  ASSERT_TRUE(bump_tokens_revision(tmp.path()).ok());
  EXPECT_EQ(r(), 2u);

  // Removed and made again by the CLI between two rechecks: the mapping still shows the removed
  // file (one system call per request would be needed to see more) until the recheck.
  std::filesystem::remove(seq);
  ASSERT_TRUE(bump_tokens_revision(tmp.path()).ok());
  EXPECT_EQ(r(), 2u);
  r.recheck();
  EXPECT_EQ(r(), 1u);

  // Replaced by a rename, as an editor would.
  write_file(tmp.path() + "/other", counter_bytes(7));
  std::filesystem::rename(tmp.path() + "/other", seq);
  r.recheck();
  EXPECT_EQ(r(), 7u);
  ASSERT_TRUE(bump_tokens_revision(tmp.path()).ok());
  EXPECT_EQ(r(), 8u);
}

TEST(TokensRevision, AfterTooManyReplacementsItReadsThePathOnEveryCall) {
  TempDir tmp;
  const std::string seq = tmp.path() + "/tokens.seq";
  TokensRevision r(tmp.path());
  for (int i = 0; i < TokensRevision::kMaxMappings + 2; ++i) {
    std::filesystem::remove(seq);
    r.recheck();
  }
  ASSERT_TRUE(bump_tokens_revision(tmp.path()).ok());
  EXPECT_EQ(r(), 1u);
  std::filesystem::remove(seq);
  ASSERT_TRUE(bump_tokens_revision(tmp.path()).ok());
  ASSERT_TRUE(bump_tokens_revision(tmp.path()).ok());
  EXPECT_EQ(r(), 2u) << "the path's file, without a recheck";
}

// A short file (written by hand, or cut short) is extended with zeros, never shortened: a mapped
// page past the end of the file would be SIGBUS.
TEST(TokensRevision, AShortFileIsExtendedKeepingItsBytes) {
  TempDir tmp;
  const std::string seq = tmp.path() + "/tokens.seq";
  write_file(seq, std::string("\x05", 1));
  EXPECT_EQ(tokens_revision(tmp.path()), 0u) << "fewer than 8 bytes: no counter yet";
  TokensRevision r(tmp.path());
  EXPECT_EQ(std::filesystem::file_size(seq), 8u);
  const std::uint64_t before = r();
  ASSERT_TRUE(bump_tokens_revision(tmp.path()).ok());
  EXPECT_EQ(r(), before + 1);
}

TEST(TokensRevision, ADirectoryItCannotWriteFallsBackToThePath) {
  TempDir tmp;
  const std::string missing = tmp.path() + "/no-such-dir";
  TokensRevision r(missing);
  EXPECT_EQ(r(), 0u);
  std::filesystem::create_directory(missing);
  ASSERT_TRUE(bump_tokens_revision(missing).ok());
  EXPECT_EQ(r(), 1u) << "read through the path";
  r.recheck();
  ASSERT_TRUE(bump_tokens_revision(missing).ok());
  EXPECT_EQ(r(), 2u) << "mapped since the recheck";
}

TEST(TokensRevision, ACounterThatCannotBeWrittenIsAnError) {
  TempDir tmp;
  std::filesystem::create_directory(tmp.path() + "/tokens.seq");  // a directory in its place
  auto r = bump_tokens_revision(tmp.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, errc::internal);
  EXPECT_NE(r.error().message.find("within a second"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace ichido::store::sqlite
