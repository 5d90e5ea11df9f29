// KeyIndex (decision 143): a snapshot copied while the writer inserts, rolls back, deletes and
// grows the table holds the slot of every row with kseq ≤ its last_kseq that still exists
// afterwards — first with each of those changes made deterministically between two chunks of
// a copy, then with a writer, a reader and a snapshot thread running at once.
#include "store/sqlite/key_index.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "store/testing/sync_store.h"

namespace ichido::store::sqlite {
namespace {

using store_testing::TempDir;

// The rows a table indexes: kseq → key, with the writer's rules (slots inserted before the
// commit, removed after the deletion).
class Rows {
 public:
  void add(std::uint64_t kseq, const std::string& key) {
    std::lock_guard<std::mutex> l(mu_);
    rows_[kseq] = key;
  }
  void remove(std::uint64_t kseq) {
    std::lock_guard<std::mutex> l(mu_);
    rows_.erase(kseq);
  }
  bool holds(std::uint64_t kseq, const std::string& key) const {
    std::lock_guard<std::mutex> l(mu_);
    const auto it = rows_.find(kseq);
    return it != rows_.end() && it->second == key;
  }
  std::map<std::uint64_t, std::string> copy() const {
    std::lock_guard<std::mutex> l(mu_);
    return rows_;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::uint64_t, std::string> rows_;
};

std::uint64_t find(const KeyIndex& index, const Rows& rows, const std::string& key) {
  return index.find(index.hash(KeyKind::once, "ns", key),
                    [&](std::uint64_t kseq) { return rows.holds(kseq, key); });
}

// Every row with kseq ≤ last_kseq in `rows` has its slot in the file at `path`.
void expect_file_holds(const std::string& path, const KeyIndex& index,
                       const std::map<std::uint64_t, std::string>& rows, std::uint64_t last_kseq) {
  std::string why;
  const auto file = read_key_table_file(path, &why);
  ASSERT_TRUE(file.has_value()) << why;
  EXPECT_EQ(file->info.last_kseq, last_kseq);
  const std::set<std::uint64_t> slots(file->table.slots().begin(), file->table.slots().end());
  for (const auto& [kseq, key] : rows) {
    if (kseq > last_kseq) continue;
    const std::uint64_t slot = KeyTable::slot_of(index.hash(KeyKind::once, "ns", key), kseq);
    ASSERT_TRUE(slots.count(slot))
        << "row " << kseq << " (" << key << ") missing from the snapshot";
  }
}

class KeyIndexTest : public ::testing::Test {
 protected:
  std::string path() const { return tmp_.path() + "/keys.idx"; }
  void add_committed(std::uint64_t kseq) {
    const std::string key = "k" + std::to_string(kseq);
    index_.begin_batch();
    index_.insert(index_.hash(KeyKind::once, "ns", key), kseq);
    index_.commit_batch();
    rows_.add(kseq, key);
  }
  TempDir tmp_;
  KeyIndex index_{KeyTable(), KeySecret{5, 6}};
  Rows rows_;
};

TEST_F(KeyIndexTest, ChangesInTheMiddleOfACopyWaitOrRestartItAndTheSnapshotMissesNoRow) {
  for (std::uint64_t k = 1; k <= 40; ++k) add_committed(k);  // 64 slots, 4 chunks of 16
  ASSERT_EQ(index_.stats().capacity, 64u);
  int chunk = 0;
  std::uint64_t next = 41;
  const auto change = [&] {
    if (++chunk != 2) return;
    // Deletions of committed rows: their slots stay until the copy ends.
    for (std::uint64_t k = 1; k <= 40; k += 3) {
      rows_.remove(k);
      index_.erase(index_.hash(KeyKind::once, "ns", "k" + std::to_string(k)), k);
    }
    // A batch rolled back: its slots stay too, and its kseqs are drawn again.
    index_.begin_batch();
    for (std::uint64_t k = next; k < next + 3; ++k) {
      index_.insert(index_.hash(KeyKind::once, "ns", "gone" + std::to_string(k)), k);
    }
    index_.rollback_batch();
    // New rows until the table must grow: up to 7/8 the growth waits, then the copy restarts.
    while (index_.stats().capacity == 64) add_committed(next++);
  };
  const std::uint64_t last_kseq = 40;
  ASSERT_TRUE(index_.write_snapshot(path(), last_kseq, 7, 16, change).ok());
  const auto s = index_.stats();
  EXPECT_EQ(s.snapshots, 1u);
  EXPECT_EQ(s.restarts, 1u) << "the growth made the copy start over";
  EXPECT_EQ(s.deferred_removals, 14u + 3u);
  EXPECT_EQ(s.capacity, 128u);
  ASSERT_NO_FATAL_FAILURE(expect_file_holds(path(), index_, rows_.copy(), last_kseq));
  // After the copy the waiting removals are done: the table holds exactly the rows.
  EXPECT_EQ(s.keys, rows_.copy().size());
  for (const auto& [kseq, key] : rows_.copy()) EXPECT_EQ(find(index_, rows_, key), kseq);
  EXPECT_EQ(find(index_, rows_, "k1"), 0u);
  // The snapshot loads as a table, and holds the deleted rows' slots (copied before they went).
  std::string why;
  const auto file = read_key_table_file(path(), &why);
  ASSERT_TRUE(file.has_value()) << why;
  EXPECT_EQ(file->info.snapshot_id, 7u);
  EXPECT_GT(file->table.size(), rows_.copy().size());
}

// The case the waiting removals exist for, built slot by slot: a run of five slots across the
// boundary between the second and the third chunk; the first is removed once the first two
// chunks are copied. Removed at once, its backward shift would move the third slot of the run
// into the copied part (and the file would miss it).
TEST_F(KeyIndexTest, ARemovalCannotShiftASlotIntoTheChunksAlreadyCopied) {
  KeyIndex index{KeyTable(30), KeySecret{5, 6}};  // 64 slots
  const auto at_home = [](std::uint64_t home) {   // a hash whose home is `home` in 64 slots
    return (home << (KeyTable::kTagBits - 6)) << KeyTable::kKseqBits;
  };
  for (std::uint64_t k = 1; k <= 5; ++k) index.insert(at_home(30), k);  // slots 30 … 34
  for (std::uint64_t k = 6; k <= 15; ++k) index.insert(at_home(34 + k), k);
  ASSERT_EQ(index.stats().capacity, 64u);
  int chunk = 0;
  ASSERT_TRUE(index
                  .write_snapshot(path(), 15, 1, 16,
                                  [&] {
                                    if (++chunk == 2) index.erase(at_home(30), 1);
                                  })
                  .ok());
  std::string why;
  const auto file = read_key_table_file(path(), &why);
  ASSERT_TRUE(file.has_value()) << why;
  const std::set<std::uint64_t> slots(file->table.slots().begin(), file->table.slots().end());
  for (std::uint64_t k = 2; k <= 5; ++k) {
    EXPECT_TRUE(slots.count(KeyTable::slot_of(at_home(30), k))) << "kseq " << k;
  }
  EXPECT_EQ(index.stats().keys, 14u) << "removed once the copy ended";
}

TEST_F(KeyIndexTest, GrowthHeldBackByACopyHappensWhenItEnds) {
  for (std::uint64_t k = 1; k <= 48; ++k) add_committed(k);  // load 3/4 of 64
  ASSERT_EQ(index_.stats().capacity, 64u);
  std::uint64_t next = 49;
  ASSERT_TRUE(index_
                  .write_snapshot(path(), 48, 1, 16,
                                  [&] {
                                    if (next == 49) {
                                      for (int i = 0; i < 6; ++i) add_committed(next++);  // 54 ≤ 56
                                    }
                                  })
                  .ok());
  const auto s = index_.stats();
  EXPECT_EQ(s.restarts, 0u);
  EXPECT_EQ(s.capacity, 128u) << "grown once the copy ended";
  ASSERT_NO_FATAL_FAILURE(expect_file_holds(path(), index_, rows_.copy(), 48));
  for (const auto& [kseq, key] : rows_.copy()) EXPECT_EQ(find(index_, rows_, key), kseq);
}

TEST_F(KeyIndexTest, AFailedSnapshotLeavesTheTableAsTheWriterMadeIt) {
  for (std::uint64_t k = 1; k <= 10; ++k) add_committed(k);
  const auto r = index_.write_snapshot(tmp_.path() + "/missing/keys.idx", 10, 1, 16, [] {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, errc::store_unavailable);
  // Not copying any more: a removal is immediate.
  rows_.remove(3);
  index_.erase(index_.hash(KeyKind::once, "ns", "k3"), 3);
  EXPECT_EQ(index_.stats().keys, 9u);
  EXPECT_EQ(index_.stats().deferred_removals, 0u);
}

// A writer (batches committed or rolled back, deletions), a reader and a snapshot thread at
// once. Checked: every snapshot holds every row with kseq ≤ its last_kseq that exists after it
// was written; every row the reader picked that still exists after its lookup was found; at the
// end the table holds exactly the rows.
TEST_F(KeyIndexTest, AWriterAReaderAndSnapshotsAtOnce) {
  std::atomic<std::uint64_t> committed{0};  // the last committed kseq, published after commit
  std::atomic<bool> done{false};
  std::atomic<int> reader_checks{0};
  std::thread writer([&] {
    std::mt19937_64 rng(1);
    std::uint64_t next = 1;
    std::vector<std::uint64_t> alive;
    for (int batch = 0; batch < 6000; ++batch) {
      const std::uint64_t start = next;
      std::vector<std::pair<std::uint64_t, std::string>> added;
      index_.begin_batch();
      for (int n = 1 + static_cast<int>(rng() % 8); n > 0; --n) {
        const std::string key = "key-" + std::to_string(rng());
        index_.insert(index_.hash(KeyKind::once, "ns", key), next);
        added.emplace_back(next++, key);
      }
      if (rng() % 5 == 0) {
        index_.rollback_batch();
        next = start;
      } else {
        index_.commit_batch();
        for (const auto& [kseq, key] : added) {
          rows_.add(kseq, key);
          alive.push_back(kseq);
        }
        committed.store(next - 1, std::memory_order_release);
      }
      if (rng() % 3 == 0 && !alive.empty()) {  // a deletion, after its commit
        const std::size_t i = rng() % alive.size();
        const std::uint64_t kseq = alive[i];
        alive[i] = alive.back();
        alive.pop_back();
        const std::string key = rows_.copy().at(kseq);
        rows_.remove(kseq);
        index_.erase(index_.hash(KeyKind::once, "ns", key), kseq);
      }
    }
    done.store(true);
  });
  std::thread reader([&] {
    std::mt19937_64 rng(2);
    while (!done.load()) {
      const auto rows = rows_.copy();
      if (rows.empty()) continue;
      auto it = rows.begin();
      std::advance(it, static_cast<long>(rng() % rows.size()));
      const std::uint64_t found = find(index_, rows_, it->second);
      if (rows_.holds(it->first, it->second)) {
        ASSERT_EQ(found, it->first) << it->second;
        ++reader_checks;
      }
    }
  });
  int snapshots = 0;
  while (!done.load()) {
    const std::uint64_t last_kseq = committed.load(std::memory_order_acquire);
    ASSERT_TRUE(index_.write_snapshot(path(), last_kseq, ++snapshots, 64).ok());
    ASSERT_NO_FATAL_FAILURE(expect_file_holds(path(), index_, rows_.copy(), last_kseq));
  }
  writer.join();
  reader.join();
  const auto s = index_.stats();
  std::printf("%d snapshots, %llu restarted by growth, %llu removals waited, %d reader checks\n",
              snapshots, static_cast<unsigned long long>(s.restarts),
              static_cast<unsigned long long>(s.deferred_removals), reader_checks.load());
  EXPECT_GT(snapshots, 1);
  EXPECT_EQ(s.keys, rows_.copy().size());
  for (const auto& [kseq, key] : rows_.copy()) ASSERT_EQ(find(index_, rows_, key), kseq);
}

}  // namespace
}  // namespace ichido::store::sqlite
