// The key table of decision 143: SipHash against the reference vectors, and the table
// against a plain map under random inserts, lookups, deletions and rolled-back batches, with
// hashes forced to collide so that the confirmation, the probing past wrong candidates and the
// backward shift are exercised on long runs.
#include "store/sqlite/key_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace ichido::store::sqlite {
namespace {

// The reference implementation's vectors (github.com/veorq/SipHash, vectors.h): SipHash-2-4,
// key 00 01 … 0f, message 00 01 … (n − 1) for n = 0 … 63.
constexpr std::uint64_t kSip24Vectors[64] = {
    0x726fdb47dd0e0e31ULL, 0x74f839c593dc67fdULL, 0x0d6c8009d9a94f5aULL, 0x85676696d7fb7e2dULL,
    0xcf2794e0277187b7ULL, 0x18765564cd99a68dULL, 0xcbc9466e58fee3ceULL, 0xab0200f58b01d137ULL,
    0x93f5f5799a932462ULL, 0x9e0082df0ba9e4b0ULL, 0x7a5dbbc594ddb9f3ULL, 0xf4b32f46226bada7ULL,
    0x751e8fbc860ee5fbULL, 0x14ea5627c0843d90ULL, 0xf723ca908e7af2eeULL, 0xa129ca6149be45e5ULL,
    0x3f2acc7f57c29bdbULL, 0x699ae9f52cbe4794ULL, 0x4bc1b3f0968dd39cULL, 0xbb6dc91da77961bdULL,
    0xbed65cf21aa2ee98ULL, 0xd0f2cbb02e3b67c7ULL, 0x93536795e3a33e88ULL, 0xa80c038ccd5ccec8ULL,
    0xb8ad50c6f649af94ULL, 0xbce192de8a85b8eaULL, 0x17d835b85bbb15f3ULL, 0x2f2e6163076bcfadULL,
    0xde4daaaca71dc9a5ULL, 0xa6a2506687956571ULL, 0xad87a3535c49ef28ULL, 0x32d892fad841c342ULL,
    0x7127512f72f27cceULL, 0xa7f32346f95978e3ULL, 0x12e0b01abb051238ULL, 0x15e034d40fa197aeULL,
    0x314dffbe0815a3b4ULL, 0x027990f029623981ULL, 0xcadcd4e59ef40c4dULL, 0x9abfd8766a33735cULL,
    0x0e3ea96b5304a7d0ULL, 0xad0c42d6fc585992ULL, 0x187306c89bc215a9ULL, 0xd4a60abcf3792b95ULL,
    0xf935451de4f21df2ULL, 0xa9538f0419755787ULL, 0xdb9acddff56ca510ULL, 0xd06c98cd5c0975ebULL,
    0xe612a3cb9ecba951ULL, 0xc766e62cfcadaf96ULL, 0xee64435a9752fe72ULL, 0xa192d576b245165aULL,
    0x0a8787bf8ecb74b2ULL, 0x81b3e73d20b49b6fULL, 0x7fa8220ba3b2eceaULL, 0x245731c13ca42499ULL,
    0xb78dbfaf3a8d83bdULL, 0xea1ad565322a1a0bULL, 0x60e61c23a3795013ULL, 0x6606d7e446282b93ULL,
    0x6ca4ecb15c5f91e1ULL, 0x9f626da15c9625f3ULL, 0xe51b38608ef25f57ULL, 0x958a324ceb064572ULL,
};
// SipHash-1-3 with the same key and messages: the vectors of Rust's libcore
// (library/coretests/tests/hash/sip.rs, test_siphash_1_3), there written as 8 little-endian bytes.
constexpr std::uint64_t kSip13Vectors[64] = {
    0xabac0158050fc4dcULL, 0xc9f49bf37d57ca93ULL, 0x82cb9b024dc7d44dULL, 0x8bf80ab8e7ddf7fbULL,
    0xcf75576088d38328ULL, 0xdef9d52f49533b67ULL, 0xc50d2b50c59f22a7ULL, 0xd3927d989bb11140ULL,
    0x369095118d299a8eULL, 0x25a48eb36c063de4ULL, 0x79de85ee92ff097fULL, 0x70c118c1f94dc352ULL,
    0x78a384b157b4d9a2ULL, 0x306f760c1229ffa7ULL, 0x605aa111c0f95d34ULL, 0xd320d86d2a519956ULL,
    0xcc4fdd1a7d908b66ULL, 0x9cf2689063dbd80cULL, 0x8ffc389cb473e63eULL, 0xf21f9de58d297d1cULL,
    0xc0dc2f46a6cce040ULL, 0xb992abfe2b45f844ULL, 0x7ffe7b9ba320872eULL, 0x525a0e7fdae6c123ULL,
    0xf464aeb267349c8cULL, 0x45cd5928705b0979ULL, 0x3a3e35e3ca9913a5ULL, 0xa91dc74e4ade3b35ULL,
    0xfb0bed02ef6cd00dULL, 0x88d93cb44ab1e1f4ULL, 0x540f11d643c5e663ULL, 0x2370dd1f8c21d1bcULL,
    0x81157b6c16a7b60dULL, 0x4d54b9e57a8ff9bfULL, 0x759f12781f2a753eULL, 0xcea1a3bebf186b91ULL,
    0x2cf508d3ada26206ULL, 0xb6101c2da3c33057ULL, 0xb3f47496ae3a36a1ULL, 0x626b57547b108392ULL,
    0xc1d2363299e41531ULL, 0x667cc1923f1ad944ULL, 0x65704ffec8138825ULL, 0x24f280d1c28949a6ULL,
    0xc2ca1cedfaf8876bULL, 0xc2164bfc9f042196ULL, 0xa16e9c9368b1d623ULL, 0x49fb169c8b5114fdULL,
    0x9f3143f8df074c46ULL, 0xc6fdaf2412cc86b3ULL, 0x7eaf49d10a52098fULL, 0x1cf313559d292f9aULL,
    0xc44a30dda2f41f12ULL, 0x36fae98943a71ed0ULL, 0x318fb34c73f0bce6ULL, 0xa27abf3670a7e980ULL,
    0xb4bcc0db243c6d75ULL, 0x23f8d852fdb71513ULL, 0x8f035f4da67d8a08ULL, 0xd89cd0e5b7e8f148ULL,
    0xf6f4e6bcf7a644eeULL, 0xaec59ad80f1837f2ULL, 0xc3b2f6154b6694e0ULL, 0x9d199062b7bbb3a8ULL,
};
constexpr std::uint64_t kRefK0 = 0x0706050403020100ULL;  // key bytes 00 … 07, little-endian
constexpr std::uint64_t kRefK1 = 0x0f0e0d0c0b0a0908ULL;  // key bytes 08 … 0f

std::string ref_message(std::size_t n) {
  std::string m;
  for (std::size_t i = 0; i < n; ++i) m.push_back(static_cast<char>(i));
  return m;
}

// `Hasher` over the reference messages against `vectors`: fed whole, in every two pieces, and
// byte by byte.
template <class Hasher>
void expect_vectors(const std::uint64_t (&vectors)[64]) {
  for (std::size_t n = 0; n < 64; ++n) {
    const std::string m = ref_message(n);
    EXPECT_EQ(Hasher(kRefK0, kRefK1).update(m).finish(), vectors[n]) << n;
    for (std::size_t cut = 0; cut <= n; ++cut) {
      const std::string_view v(m);
      ASSERT_EQ(Hasher(kRefK0, kRefK1).update(v.substr(0, cut)).update(v.substr(cut)).finish(),
                vectors[n])
          << n << " cut at " << cut;
    }
    Hasher bytewise(kRefK0, kRefK1);
    for (const char c : m) bytewise.update(std::string_view(&c, 1));
    EXPECT_EQ(bytewise.finish(), vectors[n]) << n;
  }
}

TEST(SipHash, TwoFourMatchesTheReferenceVectorsWhateverThePiecesItIsFedIn) {
  expect_vectors<SipHasher24>(kSip24Vectors);
}

TEST(SipHash, OneThreeMatchesItsVectorsWhateverThePiecesItIsFedIn) {
  expect_vectors<SipHasher13>(kSip13Vectors);
  // finish() leaves the hasher as it was: more input may follow.
  SipHasher13 h(kRefK0, kRefK1);
  h.update(ref_message(5));
  EXPECT_EQ(h.finish(), kSip13Vectors[5]);
  h.update(ref_message(12).substr(5));
  EXPECT_EQ(h.finish(), kSip13Vectors[12]);
}

TEST(KeyHash, KindScopeAndKeyAreNeverConfusedAndTheSecretMatters) {
  const KeySecret s{1, 2};
  std::set<std::uint64_t> seen;
  // The boundary between scope and key is part of the input.
  for (const auto& [scope, key] : std::vector<std::pair<std::string, std::string>>{
           {"ab", "c"}, {"a", "bc"}, {"", "abc"}, {"abc", ""}, {"ab", std::string("c\0", 2)}}) {
    EXPECT_TRUE(seen.insert(key_hash(s, KeyKind::once, scope, key)).second) << scope << "|" << key;
  }
  EXPECT_NE(key_hash(s, KeyKind::once, "ns", "k"), key_hash(s, KeyKind::number, "ns", "k"));
  EXPECT_NE(key_hash(s, KeyKind::once, "ns", "k"),
            key_hash(KeySecret{1, 3}, KeyKind::once, "ns", "k"));
  EXPECT_EQ(key_hash(s, KeyKind::once, "ns", "k"), key_hash(s, KeyKind::once, "ns", "k"));
  char b1[8];
  char b2[8];
  EXPECT_EQ(counter_scope(0x0102030405060708, b1),
            std::string_view("\x08\x07\x06\x05\x04\x03\x02\x01", 8));
  EXPECT_NE(key_hash(s, KeyKind::number, counter_scope(1, b1), "k"),
            key_hash(s, KeyKind::number, counter_scope(2, b2), "k"));
  const KeySecret r1 = KeySecret::random();
  const KeySecret r2 = KeySecret::random();
  EXPECT_FALSE(r1.k0 == r2.k0 && r1.k1 == r2.k1);
}

// A table and the rows it indexes, with a hash that can be made to collide on purpose.
class Model {
 public:
  // `distinct_hashes` > 0: every key hashes to one of that many values (long runs, equal tags).
  explicit Model(std::size_t distinct_hashes, std::size_t expected = 0)
      : table(expected), distinct_(distinct_hashes) {}

  std::uint64_t hash(const std::string& key) const {
    const std::uint64_t h = key_hash(secret_, KeyKind::once, "ns", key);
    if (distinct_ == 0) return h;
    // Few values, spread over the whole tag range (homes across the table, wrap-around included).
    return (h % distinct_) * (~std::uint64_t{0} / distinct_);
  }

  std::uint64_t find(const std::string& key, std::size_t* candidates = nullptr) const {
    return table.find(hash(key), [&](std::uint64_t kseq) {
      if (candidates) ++*candidates;
      const auto it = rows.find(kseq);
      return it != rows.end() && it->second == key;
    });
  }

  // Checks every row is found with its kseq, nothing else is, and the layout holds.
  void check(const std::vector<std::string>& absent) const {
    for (const auto& [kseq, key] : rows) ASSERT_EQ(find(key), kseq) << key;
    for (const auto& key : absent) {
      if (std::none_of(rows.begin(), rows.end(), [&](const auto& r) { return r.second == key; })) {
        ASSERT_EQ(find(key), 0u) << key;
      }
    }
    // Every occupied slot is reachable from its home without crossing an empty slot, and the
    // count matches.
    const auto slots = table.slots();
    std::size_t occupied = 0;
    const int log2 = std::countr_zero(slots.size());
    for (std::size_t i = 0; i < slots.size(); ++i) {
      if (slots[i] == 0) continue;
      ++occupied;
      const std::size_t home = (slots[i] >> KeyTable::kKseqBits) >> (KeyTable::kTagBits - log2);
      for (std::size_t j = home; j != i; j = (j + 1) & (slots.size() - 1)) {
        ASSERT_NE(slots[j], 0u) << "slot " << i << " cut off from its home " << home;
      }
    }
    ASSERT_EQ(occupied, table.size());
    ASSERT_EQ(table.size(), rows.size()) << "a slot of no row (a rollback or deletion missed)";
    ASSERT_LE(table.size() * 4, table.capacity() * 3);
  }

  KeyTable table;
  std::map<std::uint64_t, std::string> rows;  // kseq → key, the committed rows

 private:
  KeySecret secret_{0x1234, 0x5678};
  std::size_t distinct_;
};

// Random operations as the writer will make them: batches of new keys (committed or rolled
// back, the sequence rolled back with them), deletions after commit, lookups of present,
// deleted and never-seen keys.
void run_random(std::size_t distinct_hashes, std::uint32_t seed, int steps) {
  Model m(distinct_hashes);
  std::mt19937_64 rng(seed);
  std::uint64_t next_kseq = 1;
  std::vector<std::string> gone;
  int rollbacks = 0;
  for (int step = 0; step < steps; ++step) {
    const int op = static_cast<int>(rng() % 10);
    if (op < 6) {  // a batch of 1–8 new keys
      const std::uint64_t start = next_kseq;
      std::map<std::uint64_t, std::string> batch;
      m.table.begin_batch();
      for (int n = 1 + static_cast<int>(rng() % 8); n > 0; --n) {
        const std::string key = "k" + std::to_string(rng() % 1'000'000'000);
        if (m.find(key) != 0 || std::any_of(batch.begin(), batch.end(),
                                            [&](const auto& b) { return b.second == key; })) {
          continue;  // a replay: no new row
        }
        m.table.insert(m.hash(key), next_kseq);
        batch[next_kseq++] = key;
      }
      if (rng() % 4 == 0) {
        m.table.rollback_batch();
        next_kseq = start;  // the sequence rolls back with the rows
        for (const auto& b : batch) gone.push_back(b.second);
        ++rollbacks;
      } else {
        m.table.commit_batch();
        m.rows.insert(batch.begin(), batch.end());
      }
    } else if (op < 8 && !m.rows.empty()) {  // a deletion, after its commit
      auto it = m.rows.begin();
      std::advance(it, static_cast<long>(rng() % m.rows.size()));
      ASSERT_TRUE(m.table.erase(m.hash(it->second), it->first));
      ASSERT_FALSE(m.table.erase(m.hash(it->second), it->first)) << "erased twice";
      gone.push_back(it->second);
      m.rows.erase(it);
    } else {  // lookups
      if (!m.rows.empty()) {
        auto it = m.rows.begin();
        std::advance(it, static_cast<long>(rng() % m.rows.size()));
        ASSERT_EQ(m.find(it->second), it->first);
      }
      ASSERT_EQ(m.find("never-" + std::to_string(rng())), 0u);
    }
    if (step % 97 == 0) {
      ASSERT_NO_FATAL_FAILURE(m.check(gone));
      if (gone.size() > 200) gone.erase(gone.begin(), gone.begin() + 100);
    }
  }
  ASSERT_NO_FATAL_FAILURE(m.check(gone));
  EXPECT_GT(rollbacks, steps / 50);
  EXPECT_GT(m.table.capacity(), std::size_t{16}) << "grew";
}

TEST(KeyTable, AgreesWithAMapUnderRandomBatchesRollbacksAndDeletions) {
  for (std::uint32_t seed = 1; seed <= 5; ++seed) {
    SCOPED_TRACE(seed);
    ASSERT_NO_FATAL_FAILURE(run_random(0, seed, 4000));
  }
}

TEST(KeyTable, AgreesWithAMapWhenEveryKeyHashesToOneOfFourValues) {
  // Equal tags everywhere: every lookup walks past candidates that the rows refuse, runs are as
  // long as the table allows, and they wrap around its end.
  for (std::uint32_t seed = 1; seed <= 3; ++seed) {
    SCOPED_TRACE(seed);
    ASSERT_NO_FATAL_FAILURE(run_random(4, seed, 1500));
  }
  ASSERT_NO_FATAL_FAILURE(run_random(1, 9, 1500));
}

TEST(KeyTable, ASlotWhoseRowIsGoneCostsACandidateNotAWrongAnswer) {
  Model m(1);  // one hash for every key: equal tags, one run
  m.table.insert(m.hash("a"), 1);
  m.rows[1] = "a";
  m.table.insert(m.hash("b"), 2);  // a slot whose row is not there (rolled back, not yet undone)
  m.table.insert(m.hash("c"), 3);
  m.rows[3] = "c";
  std::size_t candidates = 0;
  EXPECT_EQ(m.find("c", &candidates), 3u);
  EXPECT_EQ(candidates, 3u);
  EXPECT_EQ(m.find("b"), 0u);
  EXPECT_EQ(m.find("a"), 1u);
}

TEST(KeyTable, ADeletionShiftsTheRunBackAcrossTheEndOfTheArray) {
  KeyTable t;  // 16 slots
  ASSERT_EQ(t.capacity(), 16u);
  // Tags whose home is slot 14: the run fills 14, 15, 0, 1.
  const auto at = [](std::uint64_t home, std::uint64_t low) {
    return ((home << (KeyTable::kTagBits - 4)) | low) << KeyTable::kKseqBits;
  };
  for (std::uint64_t k = 1; k <= 4; ++k) t.insert(at(14, k), k);
  t.insert(at(1, 9), 5);  // home 1, pushed to 2 by the run
  const auto slot_of = [&](std::uint64_t kseq) {
    const auto s = t.slots();
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (s[i] != 0 && (s[i] & KeyTable::kMaxKseq) == kseq) return static_cast<int>(i);
    }
    return -1;
  };
  EXPECT_EQ(slot_of(1), 14);
  EXPECT_EQ(slot_of(4), 1);
  EXPECT_EQ(slot_of(5), 2);
  ASSERT_TRUE(t.erase(at(14, 1), 1));
  // 2, 3, 4 move back one slot (across the end); 5 moves to its home, 1.
  EXPECT_EQ(slot_of(2), 14);
  EXPECT_EQ(slot_of(3), 15);
  EXPECT_EQ(slot_of(4), 0);
  EXPECT_EQ(slot_of(5), 1);
  EXPECT_EQ(t.slots()[2], 0u);
  const auto found = [&](std::uint64_t hash) {
    return t.find(hash, [](std::uint64_t) { return true; });
  };
  EXPECT_EQ(found(at(1, 9)), 5u);
  EXPECT_EQ(found(at(14, 4)), 4u);
  EXPECT_FALSE(t.erase(at(14, 1), 1));
  EXPECT_EQ(t.size(), 4u);
}

TEST(KeyTable, RollbackRemovesTheBatchEvenAfterItMadeTheTableGrow) {
  Model m(0);
  for (std::uint64_t k = 1; k <= 10; ++k) {
    m.table.insert(m.hash("old" + std::to_string(k)), k);
    m.rows[k] = "old" + std::to_string(k);
  }
  const std::size_t before = m.table.capacity();
  m.table.begin_batch();
  EXPECT_THROW(m.table.begin_batch(), std::logic_error);
  for (std::uint64_t k = 11; k <= 200; ++k) m.table.insert(m.hash("new" + std::to_string(k)), k);
  EXPECT_GT(m.table.capacity(), before);
  m.table.rollback_batch();
  EXPECT_FALSE(m.table.in_batch());
  EXPECT_EQ(m.table.size(), 10u);
  for (std::uint64_t k = 11; k <= 200; ++k) {
    EXPECT_EQ(m.table.find(m.hash("new" + std::to_string(k)), [](std::uint64_t) { return true; }),
              0u);
  }
  ASSERT_NO_FATAL_FAILURE(m.check({}));
  // A committed batch stays; the next rollback undoes only its own.
  m.table.begin_batch();
  m.table.insert(m.hash("kept"), 11);
  m.table.commit_batch();
  m.rows[11] = "kept";
  m.table.begin_batch();
  m.table.insert(m.hash("dropped"), 12);
  m.table.rollback_batch();
  ASSERT_NO_FATAL_FAILURE(m.check({"dropped"}));
}

TEST(KeyTable, RollingBackToAMarkRemovesOnlyTheSlotsInsertedSinceAndKeepsTheBatchOpen) {
  Model m(0);
  m.table.begin_batch();
  m.table.insert(m.hash("first"), 1);
  m.rows[1] = "first";
  const std::size_t mark = m.table.undo_mark();
  for (std::uint64_t k = 2; k <= 100; ++k) m.table.insert(m.hash("gone" + std::to_string(k)), k);
  EXPECT_GT(m.table.capacity(), 16u) << "the savepoint's inserts made the table grow";
  m.table.rollback_to(mark);
  EXPECT_TRUE(m.table.in_batch());
  EXPECT_EQ(m.table.size(), 1u);
  EXPECT_THROW(m.table.rollback_to(mark + 1), std::logic_error);
  // The next savepoint's slot is kept, and the batch's rollback still removes everything.
  m.table.insert(m.hash("second"), 2);
  m.rows[2] = "second";
  ASSERT_NO_FATAL_FAILURE(m.check({"gone2", "gone50"}));
  const std::size_t mark2 = m.table.undo_mark();
  m.table.insert(m.hash("third"), 3);
  const std::vector<std::uint64_t> taken = m.table.take_since(mark2);
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0], KeyTable::slot_of(m.hash("third"), 3));
  EXPECT_EQ(m.table.size(), 3u) << "take_since leaves the slots in the table";
  EXPECT_TRUE(m.table.erase_slot(taken[0]));
  m.table.rollback_batch();
  EXPECT_EQ(m.table.size(), 0u);
}

TEST(KeyTable, RefusesAZeroOrTooLargeKseqAndGrowsNoFurtherThanItsMaximum) {
  KeyTable t;
  EXPECT_THROW(t.insert(1, 0), std::out_of_range);
  EXPECT_THROW(t.insert(1, KeyTable::kMaxKseq + 1), std::out_of_range);
  EXPECT_EQ(t.size(), 0u);
  t.insert(1, KeyTable::kMaxKseq);
  EXPECT_EQ(t.find(1, [](std::uint64_t k) { return k == KeyTable::kMaxKseq; }), KeyTable::kMaxKseq);
  EXPECT_FALSE(t.erase(1, 0));

  KeyTable small(0, /*max_log2=*/5);  // at most 32 slots: 24 keys
  std::mt19937_64 rng(7);
  for (std::uint64_t k = 1; k <= 24; ++k) small.insert(rng(), k);
  EXPECT_EQ(small.capacity(), 32u);
  EXPECT_THROW(small.insert(rng(), 25), std::length_error);
  EXPECT_EQ(small.size(), 24u) << "the refused key left nothing behind";
}

TEST(KeyTable, ExpectedKeysSizeTheTableAtThreeQuartersLoad) {
  EXPECT_EQ(KeyTable(0).capacity(), 16u);
  EXPECT_EQ(KeyTable(12).capacity(), 16u);
  EXPECT_EQ(KeyTable(13).capacity(), 32u);
  EXPECT_EQ(KeyTable(3'000'000).capacity(), std::size_t{1} << 22);
  KeyTable t(100);
  const std::size_t cap = t.capacity();
  std::mt19937_64 rng(3);
  for (std::uint64_t k = 1; k <= 100; ++k) t.insert(rng(), k);
  EXPECT_EQ(t.capacity(), cap) << "no growth before the expected count";
}

TEST(KeyTable, AtFullLoadAMissReadsAboutEightSlotsAndAlmostNoRows) {
  // Linear probing at load α reads (1 + 1/(1 − α)²) / 2 slots per miss: 8.5 at 3/4. The tag's
  // bits below the home (28 − 20 = 8 here) leave 3/4 · 2^-8 ≈ 0.3 % false candidates per miss.
  // Counts, not times: the same for every run of this seed.
  KeyTable t;
  const KeySecret secret{11, 13};
  const std::size_t keys = (std::size_t{1} << 20) / 4 * 3;
  for (std::uint64_t k = 1; k <= keys; ++k) {
    t.insert(key_hash(secret, KeyKind::number, "c", "key-" + std::to_string(k)), k);
  }
  ASSERT_EQ(t.capacity(), std::size_t{1} << 20);
  std::size_t probes = 0;
  std::size_t candidates = 0;
  const std::size_t misses = 200'000;
  for (std::size_t i = 0; i < misses; ++i) {
    const std::uint64_t h = key_hash(secret, KeyKind::number, "c", "new-" + std::to_string(i));
    probes += t.probe_length(h);
    EXPECT_EQ(t.find(h,
                     [&](std::uint64_t) {
                       ++candidates;
                       return false;  // no row has a new key
                     }),
              0u);
  }
  const double mean_probes = static_cast<double>(probes) / misses;
  const double false_rate = static_cast<double>(candidates) / misses;
  std::printf("load 0.75, 2^20 slots: %.2f slots read per miss, %.4f false candidates per miss\n",
              mean_probes, false_rate);
  EXPECT_GT(mean_probes, 6.0);
  EXPECT_LT(mean_probes, 11.0);
  EXPECT_LT(false_rate, 0.006);
  EXPECT_GT(false_rate, 0.0015);
}

}  // namespace
}  // namespace ichido::store::sqlite
