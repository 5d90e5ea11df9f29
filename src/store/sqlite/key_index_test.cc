// KeyIndex (decision 143): a snapshot copied while the writer inserts, rolls back, deletes and
// grows the table holds the slot of every row with kseq ≤ its last_kseq that still exists
// afterwards — first with each of those changes made deterministically between two chunks of
// a copy, then with a writer, a reader and a snapshot thread running at once.
#include "store/sqlite/key_index.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
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

// The key index's lock lets a waiting writer in before readers that come after it: with the
// reader preference of glibc's std::shared_mutex, lookups from two reader threads that overlap
// could keep the writer out for as long as they come.
TEST(KeyIndexLock, AWaitingWriterGoesBeforeReadersThatComeAfterIt) {
  SharedMutex mu;
  mu.lock_shared();  // a reader holds it
  std::atomic<bool> written{false};
  std::thread writer([&] {
    WriterLock lock(mu);  // waits for the reader
    written.store(true);
  });
  // Once the writer waits, a new reader is refused (bounded: a reader preference never refuses).
  bool refused = false;
  for (int i = 0; i < 10000 && !refused; ++i) {
    if (mu.try_lock_shared()) {
      mu.unlock_shared();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    } else {
      refused = true;
    }
  }
  EXPECT_TRUE(refused) << "a new reader got in past the waiting writer";
  EXPECT_FALSE(written.load());
  mu.unlock_shared();
  writer.join();
  EXPECT_TRUE(written.load());
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

TEST_F(KeyIndexTest, ASavepointRolledBackDuringACopyLeavesItsSlotsUntilTheCopyEnds) {
  for (std::uint64_t k = 1; k <= 20; ++k) add_committed(k);
  int chunk = 0;
  const auto change = [&] {
    if (++chunk != 1) return;
    index_.begin_batch();
    index_.insert(index_.hash(KeyKind::once, "ns", "k21"), 21);
    rows_.add(21, "k21");
    const std::size_t mark = index_.undo_mark();
    index_.insert(index_.hash(KeyKind::once, "ns", "gone"), 22);
    index_.rollback_to(mark);
    EXPECT_EQ(index_.stats().keys, 22u) << "the rolled-back slot waits for the copy";
    index_.commit_batch();
  };
  ASSERT_TRUE(index_.write_snapshot(path(), 20, 3, 16, change).ok());
  const auto s = index_.stats();
  EXPECT_EQ(s.deferred_removals, 1u);
  EXPECT_EQ(s.keys, 21u) << "the copy ended: the savepoint's slot is gone, the batch's kept";
  EXPECT_EQ(find(index_, rows_, "k21"), 21u);
  EXPECT_EQ(find(index_, rows_, "gone"), 0u);
  // Outside a copy the savepoint's slots go at once.
  index_.begin_batch();
  const std::size_t mark = index_.undo_mark();
  index_.insert(index_.hash(KeyKind::once, "ns", "gone2"), 23);
  index_.rollback_to(mark);
  EXPECT_EQ(index_.stats().keys, 21u);
  index_.commit_batch();
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

// Start-up: rows in a "database" (kseq → key), scanned by kseq.
class KeyIndexOpenTest : public KeyIndexTest {
 protected:
  KeyScan scan() {
    return [this](std::uint64_t after, const KeyRowSink& add) -> Result<void> {
      ++scans_;
      for (const auto& [kseq, key] : rows_.copy()) {
        if (kseq > after) add(KeyKind::once, "ns", key, kseq);
      }
      return {};
    };
  }
  void expect_finds_every_row(const KeyIndex& index) {
    for (const auto& [kseq, key] : rows_.copy()) EXPECT_EQ(find(index, rows_, key), kseq) << key;
    EXPECT_EQ(find(index, rows_, "never"), 0u);
  }
  int scans_ = 0;
};

TEST_F(KeyIndexOpenTest, ASnapshotTheDatabaseNamesIsLoadedAndCaughtUp) {
  for (std::uint64_t k = 1; k <= 30; ++k) add_committed(k);
  // Copied while a batch (kseq 31, 32) was in flight; it never committed.
  index_.begin_batch();
  index_.insert(index_.hash(KeyKind::once, "ns", "uncommitted-31"), 31);
  index_.insert(index_.hash(KeyKind::once, "ns", "uncommitted-32"), 32);
  ASSERT_TRUE(index_.write_snapshot(path(), 30, 9).ok());
  // After the snapshot: rows 31 … 50 committed (31 and 32 drawn again for other keys).
  for (std::uint64_t k = 31; k <= 50; ++k) rows_.add(k, "later-" + std::to_string(k));
  auto opened = open_key_index(path(), 9, 50, 0, scan());
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  EXPECT_TRUE(opened->from_snapshot) << opened->rebuilt_because;
  EXPECT_EQ(opened->rows_scanned, 20u);
  EXPECT_EQ(opened->slots_dropped, 2u);
  EXPECT_EQ(opened->index->secret().k0, 5u) << "the file's secret";
  EXPECT_EQ(opened->index->stats().keys, 50u) << "no slot of the batch that never committed";
  expect_finds_every_row(*opened->index);
}

TEST_F(KeyIndexOpenTest, AnyOtherFileMeansARebuildFromEveryRowAndSaysWhy) {
  for (std::uint64_t k = 1; k <= 30; ++k) add_committed(k);
  ASSERT_TRUE(index_.write_snapshot(path(), 30, 9).ok());
  const auto rebuilt = [&](std::uint64_t db_id, std::uint64_t db_last) {
    auto opened = open_key_index(path(), db_id, db_last, 0, scan());
    EXPECT_TRUE(opened.ok());
    EXPECT_FALSE(opened->from_snapshot);
    EXPECT_EQ(opened->rows_scanned, rows_.copy().size());
    EXPECT_NO_FATAL_FAILURE(expect_finds_every_row(*opened->index));
    return opened->rebuilt_because;
  };
  EXPECT_EQ(rebuilt(0, 30), "the database names no snapshot");
  // A database restored from a backup names an older snapshot.
  EXPECT_EQ(rebuilt(8, 30), path() + " is snapshot 9, the database names 8");
  EXPECT_EQ(rebuilt(9, 29), path() + " goes to key 30, past the database's 29");
  std::filesystem::resize_file(path(), std::filesystem::file_size(path()) - 1);
  EXPECT_NE(rebuilt(9, 30).find("truncated"), std::string::npos);
  std::filesystem::remove(path());
  EXPECT_EQ(rebuilt(9, 30), path() + ": no file");
}

TEST_F(KeyIndexOpenTest, AScanThatFailsOrARowThatCannotBeIndexedIsAnError) {
  const auto failing = [](std::uint64_t, const KeyRowSink&) -> Result<void> {
    return Error(errc::store_unavailable, "disk gone");
  };
  auto r = open_key_index(path(), 0, 0, 0, failing);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "disk gone");
  const auto bad_row = [](std::uint64_t, const KeyRowSink& add) -> Result<void> {
    add(KeyKind::number, "c", "k", 0);  // kseq 0: no row has it
    return {};
  };
  r = open_key_index(path(), 0, 0, 0, bad_row);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, errc::store_unavailable);
  EXPECT_NE(r.error().message.find("cannot build the key index"), std::string::npos);
}

}  // namespace
}  // namespace ichido::store::sqlite
