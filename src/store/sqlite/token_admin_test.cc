// TokensRevision: the revision a running server reads before every authenticated request follows
// what the token CLI does to DIR/tokens.rev — appends, and a file removed or replaced under it.
#include "store/sqlite/token_admin.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "store/testing/sync_store.h"

namespace ichido::store::sqlite {
namespace {

using store_testing::TempDir;

void append(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::app) << bytes;
}

TEST(TokensRevision, FollowsAppendsToTheFileItKeepsOpen) {
  TempDir tmp;
  const std::string rev = tmp.path() + "/tokens.rev";
  TokensRevision r(tmp.path());
  EXPECT_EQ(r(), 0u);
  EXPECT_TRUE(std::filesystem::exists(rev)) << "created empty, so it can be kept open";
  append(rev, "+");
  EXPECT_EQ(r(), 1u);
  EXPECT_EQ(r(), tokens_revision(tmp.path()));
  append(rev, "++");
  EXPECT_EQ(r(), 3u);
}

TEST(TokensRevision, AFileRemovedOrReplacedUnderItIsOpenedAgain) {
  TempDir tmp;
  const std::string rev = tmp.path() + "/tokens.rev";
  append(rev, "+++");
  TokensRevision r(tmp.path());
  EXPECT_EQ(r(), 3u);
  std::filesystem::remove(rev);
  append(rev, "+");  // a new file at the path: its size is the revision from now on
  EXPECT_EQ(r(), 1u);
  append(rev, "+");
  EXPECT_EQ(r(), 2u);
  // Replaced by a rename, as an editor or a restore would.
  append(tmp.path() + "/other", "+++++");
  std::filesystem::rename(tmp.path() + "/other", rev);
  EXPECT_EQ(r(), 5u);
}

TEST(TokensRevision, ADirectoryItCannotWriteFallsBackToThePath) {
  TempDir tmp;
  const std::string missing = tmp.path() + "/no-such-dir";
  TokensRevision r(missing);
  EXPECT_EQ(r(), 0u);
  std::filesystem::create_directory(missing);
  append(missing + "/tokens.rev", "++");
  EXPECT_EQ(r(), 2u);
}

}  // namespace
}  // namespace ichido::store::sqlite
