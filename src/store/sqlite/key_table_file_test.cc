// The key table's snapshot file (decision 143): what is written is read back slot for
// slot, and every damage a crash, a disk or a person can do to it — any length cut off, any bit
// flipped, bytes appended, another file in its place, slots that cannot form a table — is
// refused with its reason, never loaded as a table that could miss a key.
#include "store/sqlite/key_table_file.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "store/testing/sync_store.h"

namespace ichido::store::sqlite {
namespace {

using store_testing::TempDir;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

KeyTable random_table(std::size_t keys, std::uint32_t seed) {
  KeyTable t;
  std::mt19937_64 rng(seed);
  for (std::uint64_t k = 1; k <= keys; ++k) t.insert(rng(), k);
  return t;
}

class KeyTableFileTest : public ::testing::Test {
 protected:
  std::string path() const { return tmp_.path() + "/keys.idx"; }
  std::string refusal() {
    std::string why;
    EXPECT_FALSE(read_key_table_file(path(), &why).has_value());
    return why;
  }
  TempDir tmp_;
  const KeyTableFileInfo info_{KeySecret{0x1111, 0x2222}, 987654321, 42};
};

TEST_F(KeyTableFileTest, WhatIsWrittenIsReadBackSlotForSlot) {
  const KeyTable t = random_table(30'000, 1);
  ASSERT_TRUE(write_key_table_file(path(), t, info_).ok());
  std::string why;
  const auto read = read_key_table_file(path(), &why);
  ASSERT_TRUE(read.has_value()) << why;
  EXPECT_TRUE(std::equal(t.slots().begin(), t.slots().end(), read->table.slots().begin(),
                         read->table.slots().end()));
  EXPECT_EQ(read->table.size(), t.size());
  EXPECT_EQ(read->info.secret.k0, 0x1111u);
  EXPECT_EQ(read->info.secret.k1, 0x2222u);
  EXPECT_EQ(read->info.last_kseq, 987654321u);
  EXPECT_EQ(read->info.snapshot_id, 42u);
  // The table read back works: every key is found, a new one is not, and it grows.
  std::mt19937_64 rng(1);
  KeyTable loaded = read->table;
  for (std::uint64_t k = 1; k <= 30'000; ++k) {
    const std::uint64_t h = rng();
    ASSERT_EQ(loaded.find(h, [&](std::uint64_t kseq) { return kseq == k; }), k);
  }
  for (std::uint64_t k = 30'001; k <= 70'000; ++k) loaded.insert(rng(), k);
  EXPECT_EQ(loaded.size(), 70'000u);
  // The file is the size its format says: header, one checksum per 1 MiB chunk, the slots.
  EXPECT_EQ(std::filesystem::file_size(path()), 64 + 8 * 1 + 8 + 8 * t.capacity());
}

TEST_F(KeyTableFileTest, NoFileIsSaidSo) { EXPECT_EQ(refusal(), path() + ": no file"); }

// A small table in 4 chunks of 16 slots, so that every byte of the file can be tried.
class SmallFile : public KeyTableFileTest {
 protected:
  void SetUp() override {
    KeyTable t(0, 6);
    std::mt19937_64 rng(5);
    for (std::uint64_t k = 1; k <= 40; ++k) t.insert(rng(), k);
    ASSERT_EQ(t.capacity(), 64u);
    ASSERT_TRUE(write_key_table_file(path(), t, info_, 16).ok());
    good_ = slurp(path());
    ASSERT_EQ(good_.size(), 64 + 8 * 4 + 8 + 8 * 64);
    std::string why;
    ASSERT_TRUE(read_key_table_file(path(), &why).has_value()) << why;
  }
  std::string good_;
};

TEST_F(SmallFile, EveryLengthCutOffIsRefused) {
  for (std::size_t n = 0; n < good_.size(); ++n) {
    spit(path(), good_.substr(0, n));
    const std::string why = refusal();
    ASSERT_FALSE(why.empty()) << n;
    if (n >= 64) {
      ASSERT_NE(why.find("truncated"), std::string::npos) << n << ": " << why;
    }
  }
  spit(path(), good_ + "x");
  EXPECT_NE(refusal().find("bytes where its header says"), std::string::npos);
}

TEST_F(SmallFile, EveryFlippedBitIsRefused) {
  int refused = 0;
  for (std::size_t i = 0; i < good_.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = good_;
      bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
      spit(path(), bad);
      std::string why;
      ASSERT_FALSE(read_key_table_file(path(), &why).has_value()) << "byte " << i << " bit " << bit;
      ++refused;
    }
  }
  EXPECT_EQ(refused, static_cast<int>(good_.size()) * 8);
  // Which check caught it, for a few places.
  std::string bad = good_;
  bad[64 + 8 * 4 + 8 + 8 * 20] ^= 1;  // a slot of chunk 1
  spit(path(), bad);
  EXPECT_NE(refusal().find("chunk 1 (slots 16 to 31) does not match its checksum"),
            std::string::npos);
  bad = good_;
  bad[40] ^= 1;  // last_kseq
  spit(path(), bad);
  EXPECT_NE(refusal().find("the header's checksum does not match"), std::string::npos);
}

TEST_F(SmallFile, AnotherFileInItsPlaceIsRefused) {
  spit(path(), std::string("SQLite format 3") + std::string(600, '\0'));
  EXPECT_NE(refusal().find("not a key table file"), std::string::npos);
  std::string newer = good_;
  newer[8] = 2;  // format 2
  spit(path(), newer);
  EXPECT_NE(refusal().find("format 2, this ichido reads 1"), std::string::npos);
  std::filesystem::remove(path());
  std::filesystem::create_directory(path());
  EXPECT_FALSE(refusal().empty());
}

// Checksums recomputed over slots that cannot be a table: the slot check still refuses them.
TEST_F(SmallFile, SlotsThatCannotFormATableAreRefusedEvenWithGoodChecksums) {
  const auto rewrite = [&](auto&& change) {
    std::vector<std::uint64_t> slots(64);
    std::memcpy(slots.data(), good_.data() + 64 + 8 * 4 + 8, 8 * 64);
    change(slots);
    // Through from_slots' own refusal first, then through the file with fresh checksums.
    std::string why;
    EXPECT_FALSE(KeyTable::from_slots(SlotArray::copy_of(slots), &why).has_value());
    std::string bytes = good_.substr(0, 64);
    for (int c = 0; c < 4; ++c) {
      const std::uint64_t sum =
          SipHasher13(0, 0)
              .update(std::string_view(reinterpret_cast<const char*>(slots.data() + 16 * c), 128))
              .finish();
      for (int b = 0; b < 8; ++b) bytes.push_back(static_cast<char>((sum >> (8 * b)) & 0xff));
    }
    const std::uint64_t head = SipHasher13(0, 0).update(bytes).finish();
    for (int b = 0; b < 8; ++b) bytes.push_back(static_cast<char>((head >> (8 * b)) & 0xff));
    bytes.append(reinterpret_cast<const char*>(slots.data()), 8 * 64);
    spit(path(), bytes);
    return refusal();
  };
  // An empty slot inside a run: the slot after it is cut off from its home.
  EXPECT_NE(rewrite([](std::vector<std::uint64_t>& s) {
              for (std::size_t i = 0; i + 1 < s.size(); ++i) {
                const std::size_t home =
                    (s[i + 1] >> KeyTable::kKseqBits) >> (KeyTable::kTagBits - 6);
                if (s[i] != 0 && s[i + 1] != 0 && home != i + 1) {
                  s[i] = 0;
                  return;
                }
              }
              FAIL() << "no displaced slot in the test table";
            }).find("is cut off from its home slot"),
            std::string::npos);
  EXPECT_NE(rewrite([](std::vector<std::uint64_t>& s) {
              for (auto& v : s) {
                if (v != 0) {
                  v &= ~KeyTable::kMaxKseq;  // kseq 0
                  return;
                }
              }
            }).find("has kseq 0"),
            std::string::npos);
  EXPECT_NE(rewrite([](std::vector<std::uint64_t>& s) {
              for (std::size_t i = 0; i < s.size(); ++i)
                s[i] = i < 60 ? ((i << 22) << 36) | (i + 1) : 0;
            }).find("60 keys in 64 slots"),
            std::string::npos);
  EXPECT_NE(rewrite([](std::vector<std::uint64_t>& s) {
              for (std::size_t i = 0; i < s.size(); ++i) s[i] = ((i << 22) << 36) | (i + 1);
            }).find("no empty slot"),
            std::string::npos);
}

TEST_F(KeyTableFileTest, ANewSnapshotReplacesTheOldOneWholeAndALeftoverTemporaryFileIsHarmless) {
  ASSERT_TRUE(write_key_table_file(path(), random_table(100, 1), info_).ok());
  // A crash while the next snapshot was written leaves its temporary file: the old one stands.
  spit(path() + ".tmp", "half a snapshot");
  std::string why;
  auto read = read_key_table_file(path(), &why);
  ASSERT_TRUE(read.has_value()) << why;
  EXPECT_EQ(read->table.size(), 100u);
  KeyTableFileInfo next = info_;
  next.snapshot_id = 43;
  ASSERT_TRUE(write_key_table_file(path(), random_table(5000, 2), next).ok());
  read = read_key_table_file(path(), &why);
  ASSERT_TRUE(read.has_value()) << why;
  EXPECT_EQ(read->table.size(), 5000u);
  EXPECT_EQ(read->info.snapshot_id, 43u);
  EXPECT_FALSE(std::filesystem::exists(path() + ".tmp"));
}

TEST_F(KeyTableFileTest, TheChunkWriterTakesChunksInOrderAndAllOfThemOrNothing) {
  const KeyTable t = random_table(20, 3);  // 32 slots: 2 chunks of 16
  auto w = KeyTableFileWriter::start(path(), t.log2_capacity(), 16);
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(w->chunk_count(), 2u);
  EXPECT_FALSE(w->add_chunk(t.slots().subspan(0, 8)).ok()) << "a chunk of the wrong length";
  ASSERT_TRUE(w->add_chunk(t.slots().subspan(0, 16)).ok());
  EXPECT_FALSE(w->finish(info_).ok()) << "a chunk missing";
  EXPECT_FALSE(std::filesystem::exists(path()));
  ASSERT_TRUE(w->add_chunk(t.slots().subspan(16, 16)).ok());
  EXPECT_FALSE(w->add_chunk(t.slots().subspan(16, 16)).ok()) << "one chunk too many";
  ASSERT_TRUE(w->finish(info_).ok());
  std::string why;
  const auto read = read_key_table_file(path(), &why);
  ASSERT_TRUE(read.has_value()) << why;
  EXPECT_EQ(read->table.size(), 20u);
}

TEST_F(KeyTableFileTest, AWriteThatCannotBeMadeSaysSoAndLeavesNothing) {
  const std::string nowhere = tmp_.path() + "/missing/keys.idx";
  const auto r = write_key_table_file(nowhere, random_table(10, 1), info_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, errc::store_unavailable);
  EXPECT_NE(r.error().message.find(nowhere + ".tmp"), std::string::npos) << r.error().message;
  EXPECT_FALSE(std::filesystem::exists(tmp_.path() + "/missing"));
}

}  // namespace
}  // namespace ichido::store::sqlite
