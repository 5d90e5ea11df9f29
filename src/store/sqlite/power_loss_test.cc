// The embedded store's promise — an answered change survives power loss, not only a crash of the
// process — tested against simulated power cuts (store/testing/power_loss_vfs.h): while four
// threads issue numbers, the power is cut again and again, and the disk as it would be found
// afterwards (each file as of its last fsync) is opened by a fresh store, which must hold every
// number answered before the cut. Checkpoints and WAL restarts run all along (small thresholds),
// so cuts fall between a checkpoint's copy and its fsync and around the WAL starting over — where
// a store that skipped or reordered an fsync would lose answered numbers.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
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

TEST(SqlitePowerLossTest, EveryAnsweredNumberSurvivesAPowerCut) {
  store_testing::register_power_loss_vfs();
  power_loss().reset();
  TempDir dir;
  ManualClock clock{1'775'000'000'000};
  Options o;
  o.dir = dir.path() + "/data";
  o.clock = &clock;
  o.vfs = store_testing::kPowerLossVfs;
  o.checkpoint_frames = 20;  // the checkpointer runs every few batches
  o.restart_frames = 200;    // and the WAL starts over every few dozen
  auto opened = SqliteStore::open(std::move(o));
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  auto& s = **opened;
  core::CounterConfig config;
  config.max = 1'000'000'000;
  ASSERT_TRUE(SyncStore(s).create_counter({kRef, config}).ok());

  // The writers cut the power themselves, right after an answer (every 25th): the moment when
  // an answer given too early — before its fsync — would still be missing from the disk.
  constexpr std::size_t kCuts = 80;
  struct Cut {
    std::map<std::string, std::int64_t> answered;  // before the instant of the cut
    std::map<std::string, std::string> disk;       // path -> durable bytes at that instant
  };
  std::mutex mu;
  std::map<std::string, std::int64_t> answered;  // guarded by mu
  std::vector<Cut> cuts;                         // guarded by mu
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; !stop.load(); ++i) {
        const std::string key = "t" + std::to_string(t) + "-" + std::to_string(i);
        auto r = SyncStore(s).next({kRef, {key, ""}});
        if (!r.ok()) {
          failures.fetch_add(1);
          return;
        }
        std::lock_guard lk(mu);
        answered.emplace(key, r->record.value);
        if (answered.size() % 25 == 0 && cuts.size() < kCuts) {
          cuts.push_back({answered, power_loss().cut()});  // first the answers, then the disk
        }
        if (cuts.size() == kCuts) stop.store(true);
      }
    });
  }
  for (auto& w : writers) w.join();
  ASSERT_EQ(failures.load(), 0);
  ASSERT_EQ(cuts.size(), kCuts);

  for (std::size_t n = 0; n < cuts.size(); ++n) {
    // The disk after the cut, in a directory of its own; the identity file is written with an
    // fsync and a rename of its own (data_dir.h), so it is copied as it is.
    const std::string after_dir = dir.path() + "/cut" + std::to_string(n);
    std::filesystem::create_directories(after_dir);
    ASSERT_EQ(cuts[n].disk.size(), 2u) << "the database and its WAL";
    for (const auto& [path, bytes] : cuts[n].disk) {
      std::ofstream(after_dir + "/" + std::filesystem::path(path).filename().string(),
                    std::ios::binary)
          .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    std::filesystem::copy_file(dir.path() + "/data/ichido.id", after_dir + "/ichido.id");
    Options ao;
    ao.dir = after_dir;
    ao.clock = &clock;
    auto after = SqliteStore::open(std::move(ao));
    ASSERT_TRUE(after.ok()) << "cut " << n << ": " << after.error().message;
    const auto found = IssuedByKey(**after);
    (*after)->close();
    for (const auto& [key, value] : cuts[n].answered) {
      auto it = found.find(key);
      ASSERT_NE(it, found.end()) << "cut " << n << ": the answered number " << value << " (key "
                                 << key << ") is gone after the power cut";
      EXPECT_EQ(it->second, value) << "cut " << n << ", key " << key;
    }
  }
  const auto c = SqliteStoreTestPeer::checkpoints(s);
  EXPECT_GE(c.by_checkpointer, 1u) << "no checkpoint ran during the cuts";
  EXPECT_GE(c.by_writer, 1u) << "the WAL never started over during the cuts";
  s.close();
  power_loss().reset();
}

}  // namespace
}  // namespace ichido::store::sqlite
