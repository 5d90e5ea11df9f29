// The embedded store's promise — an answered change survives power loss, not only a crash of the
// process — tested against simulated power cuts (store/testing/power_loss_vfs.h): while four
// threads make changes, the power is cut again and again, and the disk as it would be found
// afterwards is opened by a fresh store, which must hold every change answered before the cut.
// Some cuts leave each file as of its last fsync; the others also keep a random part of the
// sectors written since (torn WAL frames, half a checkpoint's copy, a WAL header started over but
// not its frames), some of them taken as an fsync starts, when the most is unsynced. Checkpoints
// and WAL restarts run all along (small thresholds), so cuts fall between a checkpoint's copy and
// its fsync and around the WAL starting over — where a store that skipped or reordered an fsync
// would lose answered changes.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "store/sqlite/sqlite_store.h"
#include "store/sqlite/test_peer.h"
#include "store/testing/power_loss_vfs.h"
#include "store/testing/sync_store.h"

namespace ichido::store::sqlite {
namespace {

using store_testing::power_loss;
using store_testing::SyncStore;
using store_testing::TempDir;

const CounterRef kRef{"acme", "c"};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class SqlitePowerLossTest : public ::testing::Test {
 protected:
  // What one cut leaves: the answers given before its instant (as text, by what they are about)
  // and the disk at that instant.
  struct Cut {
    std::map<std::string, std::string> answered;
    std::map<std::string, std::string> disk;  // path -> durable bytes
    std::string identity;                     // ichido.id (written with fsync and rename)
  };
  static constexpr std::size_t kCuts = 80;

  void SetUp() override {
    store_testing::register_power_loss_vfs();
    power_loss().reset();
    Options o;
    o.dir = dir_.path() + "/data";
    o.clock = &clock_;
    o.vfs = store_testing::kPowerLossVfs;
    o.checkpoint_frames = 20;  // the checkpointer runs every few batches
    o.restart_frames = 200;    // and the WAL starts over every few dozen
    // The writer fills the WAL ahead with zeros after 1 ms without a commit (decision 132), so
    // that the frames of the commits cut are written over zeros synced before.
    o.wal_zero_fill_quiet = std::chrono::milliseconds(1);
    auto opened = SqliteStore::open(std::move(o));
    ASSERT_TRUE(opened.ok()) << opened.error().message;
    store_ = std::move(*opened);
  }
  void TearDown() override {
    if (store_) store_->close();
    power_loss().reset();
  }

  // Four threads run `change(thread, i)` for i = 0, 1, … ; each returns what it was answered as
  // (key, text), or nullopt on a failure. The thread that records every 25th answer cuts the
  // power right then — the moment when an answer given before its fsync would still be missing
  // from the disk — until kCuts cuts are taken. A third of the cuts are strict, a third keep some
  // unsynced sectors, and a third keep some of them as the next fsync starts (in the middle of a
  // commit or a checkpoint); the coin is seeded by the cut's number, which a failure names.
  std::vector<Cut> RunAndCut(
      const std::function<std::optional<std::pair<std::string, std::string>>(int, int)>& change) {
    std::mutex mu;
    std::map<std::string, std::string> answered;  // guarded by mu
    std::vector<Cut> cuts;                        // guarded by mu
    std::size_t cutting = 0;                      // guarded by mu: cuts waiting for an fsync
    std::atomic<bool> stop{false};
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; !stop.load(); ++i) {
          auto a = change(t, i);
          if (!a) {
            failures.fetch_add(1);
            stop.store(true);
            return;
          }
          std::unique_lock lk(mu);
          answered.insert(std::move(*a));
          if (answered.size() % 25 == 0 && cuts.size() + cutting < kCuts) {
            // First the answers, then the disk: every answer kept was given before the cut.
            const std::size_t n = cuts.size() + cutting;
            Cut cut{answered, {}, ReadFile(dir_.path() + "/data/ichido.id")};
            if (n % 3 == 0) {
              cut.disk = power_loss().cut();
            } else if (n % 3 == 1) {
              cut.disk = power_loss().cut_keeping_some(n);
            } else {
              // Not under `mu`: the other threads' changes make the fsync this waits for.
              ++cutting;
              lk.unlock();
              auto disk = power_loss().cut_at_next_sync(n, std::chrono::seconds(30));
              lk.lock();
              --cutting;
              if (!disk) {
                ADD_FAILURE() << "no fsync within 30 s of asking for cut " << n;
                stop.store(true);
                return;
              }
              cut.disk = std::move(*disk);
            }
            cuts.push_back(std::move(cut));
          }
          if (cuts.size() == kCuts) stop.store(true);
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_EQ(cuts.size(), kCuts);
    EXPECT_GE(SqliteStoreTestPeer::checkpoints(*store_).by_checkpointer, 1u)
        << "no checkpoint ran during the cuts";
    EXPECT_GE(power_loss().wal_headers.load(), 2) << "the WAL never started over during the cuts";
    EXPECT_GE(power_loss().unsynced_sectors_kept.load(), 100)
        << "the cuts that keep some unsynced sectors kept (almost) none";
    return cuts;
  }

  // A fresh store on the disk `cut` left, in a directory of its own.
  std::unique_ptr<SqliteStore> AfterCut(const Cut& cut, std::size_t n) {
    const std::string after_dir = dir_.path() + "/cut" + std::to_string(n);
    std::filesystem::create_directories(after_dir);
    EXPECT_EQ(cut.disk.size(), 2u) << "the database and its WAL";
    for (const auto& [path, bytes] : cut.disk) {
      std::ofstream(after_dir + "/" + std::filesystem::path(path).filename().string(),
                    std::ios::binary)
          .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    std::ofstream(after_dir + "/ichido.id", std::ios::binary) << cut.identity;
    Options o;
    o.dir = after_dir;
    o.clock = &clock_;
    auto after = SqliteStore::open(std::move(o));
    EXPECT_TRUE(after.ok()) << "cut " << n << ": " << after.error().message;
    return after.ok() ? std::move(*after) : nullptr;
  }

  ManualClock clock_{1'775'000'000'000};  // never moves: no lease lapses before or after a cut
  TempDir dir_;
  std::unique_ptr<SqliteStore> store_;
};

// Every issued number of the counter's current period, by key.
std::map<std::string, std::int64_t> IssuedByKey(Store& s) {
  std::map<std::string, std::int64_t> out;
  std::int64_t after = 0;
  for (;;) {
    auto page = SyncStore(s).list_issued({kRef, std::nullopt, std::nullopt, after, 1000});
    EXPECT_TRUE(page.ok()) << page.error().message;
    if (!page.ok()) return out;
    for (const auto& n : page->items) out.emplace(n.key.value_or(""), n.value);
    if (!page->next_after) return out;
    after = *page->next_after;
  }
}

TEST_F(SqlitePowerLossTest, EveryAnsweredNumberSurvivesAPowerCut) {
  core::CounterConfig config;
  config.max = 1'000'000'000;
  ASSERT_TRUE(SyncStore(*store_).create_counter({kRef, config}).ok());
  ASSERT_GE(SqliteStoreTestPeer::await_wal_zero_fill(*store_), 1u)
      << "the WAL was not filled ahead";
  const auto cuts =
      RunAndCut([&](int t, int i) -> std::optional<std::pair<std::string, std::string>> {
        const std::string key = "t" + std::to_string(t) + "-" + std::to_string(i);
        auto r = SyncStore(*store_).next({kRef, {key, ""}});
        if (!r.ok()) return std::nullopt;
        return std::pair{key, std::to_string(r->record.value)};
      });
  for (std::size_t n = 0; n < cuts.size(); ++n) {
    auto after = AfterCut(cuts[n], n);
    ASSERT_TRUE(after);
    const auto found = IssuedByKey(*after);
    after->close();
    for (const auto& [key, value] : cuts[n].answered) {
      auto it = found.find(key);
      ASSERT_NE(it, found.end()) << "cut " << n << ": the answered number " << value << " (key "
                                 << key << ") is gone after the power cut";
      EXPECT_EQ(std::to_string(it->second), value) << "cut " << n << ", key " << key;
    }
  }
}

// Once records completed (with their results) and locks granted (with their fencing tokens) are
// on the disk after a cut, and the tokens handed out after it are above every token answered
// before it — a fencing token is never handed out twice, even across a power cut.
TEST_F(SqlitePowerLossTest, CompletedOnceRecordsAndGrantedLocksSurviveAPowerCut) {
  const auto cuts =
      RunAndCut([&](int t, int i) -> std::optional<std::pair<std::string, std::string>> {
        const std::string name = std::to_string(t) + "-" + std::to_string(i);
        SyncStore s(*store_);
        if (i % 2 == 0) {
          auto begun = s.begin_once({{"acme", "o" + name}, core::BeginCommand{"w", 600'000}});
          if (!begun.ok() || begun->outcome != core::BeginOutcome::acquired) return std::nullopt;
          const std::string result = "{\"n\":" + std::to_string(i) + "}";
          auto done = s.complete_once({{"acme", "o" + name}, begun->record.token, result});
          if (!done.ok()) return std::nullopt;
          return std::pair{"o" + name, std::to_string(begun->record.token) + " " + result};
        }
        auto got = s.acquire_lock({{"acme", "l" + name}, "w" + std::to_string(t), 600'000});
        if (!got.ok() || !got->acquired) return std::nullopt;
        return std::pair{"l" + name, std::to_string(got->record.token)};
      });
  for (std::size_t n = 0; n < cuts.size(); ++n) {
    auto after = AfterCut(cuts[n], n);
    ASSERT_TRUE(after);
    SyncStore s(*after);
    std::int64_t highest = 0;
    for (const auto& [what, answer] : cuts[n].answered) {
      highest = std::max<std::int64_t>(highest, std::stoll(answer));  // the token comes first
      if (what[0] == 'o') {
        auto rec = s.get_once({"acme", what});
        ASSERT_TRUE(rec.ok()) << "cut " << n << ": once record " << what << " is gone";
        EXPECT_EQ(rec->state, core::OnceState::completed) << "cut " << n << ", " << what;
        EXPECT_EQ(std::to_string(rec->token) + " " + rec->result.value_or(""), answer)
            << "cut " << n << ", " << what;
      } else {
        auto lock = s.get_lock({"acme", what});
        ASSERT_TRUE(lock.ok()) << lock.error().message;
        ASSERT_TRUE(lock->holder.has_value()) << "cut " << n << ": lock " << what << " is free";
        EXPECT_EQ(std::to_string(lock->holder->token), answer) << "cut " << n << ", " << what;
      }
    }
    auto fresh = s.acquire_lock({{"acme", "after-the-cut"}, "x", 600'000});
    ASSERT_TRUE(fresh.ok() && fresh->acquired) << "cut " << n;
    EXPECT_GT(fresh->record.token, highest) << "cut " << n << ": a fencing token handed out twice";
    after->close();
  }
}

}  // namespace
}  // namespace ichido::store::sqlite
