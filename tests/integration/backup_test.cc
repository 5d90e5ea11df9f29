// `ichido backup`, `ichido restore` and `ichido check` against the real binary and a real server
// (store/sqlite/maintenance.h M1-M4): a backup taken under load is one consistent snapshot that
// holds everything acknowledged before it started; the restored store serves the same audit trail
// and its fencing tokens continue above every token handed out before; a damaged file is found by
// check and refused by restore, which then changes nothing.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <boost/json.hpp>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <thread>

#include "api_client.h"
#include "server_process.h"
#include "test_util.h"

namespace ichido::testing {
namespace {

namespace json = boost::json;
using steady = std::chrono::steady_clock;

std::pair<int, std::string> ichido(const std::string& args) {
  return run_command(std::string(ichido_binary()) + " " + args + " 2>&1");
}

Reply acquire(ApiClient& api, const std::string& owner, std::int64_t wait_ms = 0) {
  return api.send(
      "POST", "/v1/ns/t/locks/L/acquire",
      json::serialize(json::object{{"owner", owner}, {"lease_ms", 1000}, {"wait_ms", wait_ms}}));
}

// The whole audit trail of counter `name`, in value order.
std::vector<json::object> audit_trail(ApiClient& api, const std::string& name) {
  std::vector<json::object> out;
  std::int64_t after = 0;
  for (;;) {
    auto r = api.send("GET",
                      api.counter_path(name) + "/issued?limit=1000&after=" + std::to_string(after));
    EXPECT_EQ(r.status, 200) << r.body;
    if (r.status != 200) return out;
    const auto& items = r.at("items").as_array();
    for (const auto& i : items) out.push_back(i.as_object());
    const auto* next = r.json.as_object().if_contains("next_after");
    if (items.empty() || !next || next->is_null()) return out;
    after = next->to_number<std::int64_t>();
  }
}

struct Ack {
  std::string key;
  std::int64_t value;
  steady::time_point at;
};

TEST(Backup, UnderLoadIsOneSnapshotAndTheRestoredStoreKeepsItsTrailAndTokensGoUp) {
  TempDir dir;
  const std::string data = dir.path() + "/data", file = dir.path() + "/backup.db";
  ServerProcess server(data);
  std::string err;
  ASSERT_TRUE(server.start(&err)) << err;
  {
    ApiClient api(server.url());
    ASSERT_EQ(api.create("r", R"({"format":"R-{seq:5}"})").status, 201);
  }

  // Three clients issue keyed numbers and take the lock, until told to stop.
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<Ack> acks;       // guarded by mu
  std::int64_t max_token = 0;  // guarded by mu
  std::vector<std::thread> load;
  for (int t = 0; t < 3; ++t) {
    load.emplace_back([&, t] {
      ApiClient api(server.url());
      for (int i = 0; !stop.load(); ++i) {
        // Long keys, so the store outgrows one step of the copy (256 pages) and the backup
        // runs over several steps while the writes go on.
        const std::string key =
            "w" + std::to_string(t) + "-" + std::to_string(i) + "-" + std::string(200, 'k');
        auto n = api.next("r", key);
        ASSERT_EQ(n.status, 200) << n.body;
        auto l = acquire(api, key);
        ASSERT_EQ(l.status, 200) << l.body;
        std::lock_guard<std::mutex> g(mu);
        acks.push_back({key, n.num("value"), steady::now()});
        if (l.at("acquired").as_bool()) {
          max_token = std::max(max_token, l.num("token"));
          api.send("POST", "/v1/ns/t/locks/L/release",
                   json::serialize(json::object{{"token", l.num("token")}}));
        }
      }
    });
  }
  ASSERT_TRUE(eventually(
      [&] {
        std::lock_guard<std::mutex> g(mu);
        return acks.size() >= 4000;
      },
      std::chrono::milliseconds(60000)));
  const auto backup_started = steady::now();
  auto [rc, out] = ichido("backup --data " + data + " --to " + file);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("backed up"), std::string::npos) << out;
  std::smatch pages;
  ASSERT_TRUE(std::regex_search(out, pages, std::regex(R"(, (\d+) pages)"))) << out;
  EXPECT_GT(std::stoi(pages[1]), 2 * 256) << "the copy should take several steps: " << out;
  ASSERT_TRUE(eventually([&] {  // the server went on answering while and after it copied
    std::lock_guard<std::mutex> g(mu);
    return !acks.empty() && acks.back().at > steady::now() - std::chrono::milliseconds(50);
  }));
  stop = true;
  for (auto& th : load) th.join();

  ApiClient before_api(server.url());
  const auto original = audit_trail(before_api, "r");
  ASSERT_EQ(original.size(), acks.size());
  EXPECT_EQ(server.stop(), 0);

  // The running server's directory cannot be restored under it; this one is stopped.
  auto [rrc, rout] = ichido("restore --from " + file + " --data " + data);
  ASSERT_EQ(rrc, 0) << rout;
  EXPECT_NE(rout.find("the database it replaced is kept as"), std::string::npos) << rout;
  ASSERT_TRUE(server.start(&err)) << err;
  ApiClient api(server.url());

  // One snapshot: a prefix of the original trail, entry for entry, holding every number
  // acknowledged before the backup started.
  const auto restored = audit_trail(api, "r");
  ASSERT_LE(restored.size(), original.size());
  for (std::size_t i = 0; i < restored.size(); ++i) {
    EXPECT_EQ(restored[i], original[i]) << "entry " << i;
  }
  std::size_t before = 0;
  for (const auto& a : acks) {
    if (a.at >= backup_started) continue;
    ++before;
    ASSERT_GE(restored.size(), static_cast<std::size_t>(a.value)) << a.key;
    EXPECT_EQ(restored[a.value - 1].at("key").as_string(), a.key);
  }
  EXPECT_GE(before, 4000u);
  EXPECT_LT(restored.size(), original.size()) << "the load went on after the backup";
  // The next number follows the restored trail (numbers after the backup are issued again:
  // that is what restoring an older store means); keyed replays of restored keys still hold.
  auto n = api.next("r", "after-restore");
  ASSERT_EQ(n.status, 200) << n.body;
  EXPECT_EQ(n.num("value"), static_cast<std::int64_t>(restored.size()) + 1);
  auto replay = api.next("r", acks.front().key);
  EXPECT_EQ(replay.num("value"), acks.front().value);
  // Tokens never go backwards: above every token handed out before the restore. (The
  // snapshot may hold a holder of L: its lease, 1 s, ends and the waiter gets the lock.)
  auto l = acquire(api, "after-restore", 10000);
  ASSERT_EQ(l.status, 200) << l.body;
  ASSERT_TRUE(l.at("acquired").as_bool()) << l.body;
  EXPECT_GT(l.num("token"), max_token);

  auto [crc, cout] = ichido("check --data " + data);
  EXPECT_EQ(crc, 0) << cout;  // also while the server runs
  EXPECT_NE(cout.find("found no damage"), std::string::npos) << cout;
}

std::string file_bytes(const std::string& path) { return slurp(path); }

TEST(Check, FindsDamageAndRestoreRefusesADamagedBackupChangingNothing) {
  TempDir dir;
  const std::string data = dir.path() + "/data";
  ServerProcess server(data);
  std::string err;
  ASSERT_TRUE(server.start(&err)) << err;
  {
    ApiClient api(server.url());
    ASSERT_EQ(api.create("r", "{}").status, 201);
    for (int i = 0; i < 300; ++i) {
      ASSERT_EQ(
          api.next("r", "a-fairly-long-key-so-the-rows-fill-pages-" + std::to_string(i)).status,
          200);
    }
  }
  const std::string good = dir.path() + "/good.db", bad_dir = dir.path() + "/bad";
  auto [brc, bout] = ichido("backup --data " + data + " --to " + good);
  ASSERT_EQ(brc, 0) << bout;
  EXPECT_EQ(server.stop(), 0);
  auto [exists_rc, exists_out] = ichido("backup --data " + data + " --to " + good);
  EXPECT_EQ(exists_rc, 2) << exists_out;  // never overwrites

  // A copy with garbage over whole pages (3 to 6: b-tree pages, headers included).
  ASSERT_EQ(::mkdir(bad_dir.c_str(), 0700), 0);
  std::string bytes = file_bytes(good);
  ASSERT_GT(bytes.size(), 7u * 4096);
  for (int page = 2; page < 6; ++page) {
    for (int i = 0; i < 4096; ++i) bytes[page * 4096 + i] = static_cast<char>(0x5a);
  }
  const std::string bad = bad_dir + "/ichido.db";
  std::ofstream(bad, std::ios::binary) << bytes;

  auto [crc, cout] = ichido("check --data " + bad_dir);
  EXPECT_EQ(crc, 1) << cout;
  EXPECT_NE(cout.find("damaged: "), std::string::npos) << cout;
  EXPECT_NE(cout.find("ichido restore"), std::string::npos) << cout;

  const std::string before = file_bytes(data + "/ichido.db");
  auto [rrc, rout] = ichido("restore --from " + bad + " --data " + data);
  EXPECT_EQ(rrc, 1) << rout;
  EXPECT_NE(rout.find("store_corrupt"), std::string::npos) << rout;
  EXPECT_NE(rout.find("Nothing was changed"), std::string::npos) << rout;
  EXPECT_TRUE(file_bytes(data + "/ichido.db") == before) << "restore changed the database";

  // A new machine: no ichido.id; --token-floor puts tokens above what the lost server gave.
  const std::string fresh = dir.path() + "/fresh";
  auto [frc, fout] =
      ichido("restore --from " + good + " --data " + fresh + " --token-floor 700000");
  ASSERT_EQ(frc, 0) << fout;
  EXPECT_NE(fout.find("no ichido.id"), std::string::npos) << fout;
  ServerProcess restored(fresh);
  ASSERT_TRUE(restored.start(&err)) << err;
  ApiClient api(restored.url());
  EXPECT_EQ(api.get("r").num("last_value"), 300);
  auto l = acquire(api, "x");
  ASSERT_EQ(l.status, 200) << l.body;
  EXPECT_GT(l.num("token"), 700000);
}

}  // namespace
}  // namespace ichido::testing
