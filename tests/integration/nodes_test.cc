// Several stateless ichido nodes on one PostgreSQL database (issue 10): real `ichido serve`
// processes sharing one schema, real concurrent clients, real crashes. Each test says what one
// node alone would guarantee and checks that N nodes together keep it.
//
// These tests need PostgreSQL: CTest runs them against the `pg` fixture's cluster
// (pg_nodes_tests, with ICHIDO_TEST_STORE=postgres).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api_client.h"
#include "nodes_util.h"
#include "pg_cluster.h"
#include "server_process.h"
#include "test_util.h"

namespace ichido::testing {
namespace {

using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

// --- numbers -------------------------------------------------------------------------------------

TEST(Nodes, ThreeNodesStartingTogetherMigrateOnceAndIssueContiguousUniqueNumbers) {
  Deployment d(3);
  d.start_all();
  // Each migration applied once: one row per version, 1..max.
  EXPECT_EQ(query_value(d.url(),
                        "SELECT count(*) = max(version) AND count(DISTINCT version) = "
                        "count(*) FROM \"" +
                            d.schema() + "\".schema_version"),
            "true");
  ApiClient admin(d.node(0).url(), "shop");
  ASSERT_EQ(admin.create("n", R"({"start":0,"max":1000000,"format":"N-{seq:6}"})").status, 201);

  // 4 clients per node, each 30 calls alternating keyed and unkeyed.
  constexpr int kPerNode = 4, kCalls = 30;
  std::mutex mu;
  std::vector<std::int64_t> values;                            // guarded by mu
  std::map<std::string, std::pair<std::int64_t, int>> by_key;  // key -> (value, node); mu
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int n = 0; n < 3; ++n) {
    for (int c = 0; c < kPerNode; ++c) {
      threads.emplace_back([&, n, c] {
        ApiClient api(d.node(n).url(), "shop");
        for (int i = 0; i < kCalls; ++i) {
          const bool keyed = i % 2 == 0;
          const std::string key =
              "k-" + std::to_string(n) + "-" + std::to_string(c) + "-" + std::to_string(i);
          auto r = keyed ? api.next("n", key) : api.send("POST", api.counter_path("n") + "/next");
          if (r.status != 200) {
            failures.fetch_add(1);
            ADD_FAILURE() << "node " << n << ": " << r.status << " " << r.body << r.transport_error;
            continue;
          }
          std::lock_guard lk(mu);
          values.push_back(r.num("value"));
          if (keyed) by_key[key] = {r.num("value"), n};
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(failures.load(), 0);
  const int total = 3 * kPerNode * kCalls;
  ASSERT_EQ(static_cast<int>(values.size()), total);
  std::sort(values.begin(), values.end());
  for (int i = 0; i < total; ++i) ASSERT_EQ(values[i], i + 1) << "numbers must be 1.." << total;

  // A key issued on one node replays on every other node.
  int replays = 0;
  for (const auto& [key, vn] : by_key) {
    if (replays >= 30) break;
    for (int other = 1; other <= 2; ++other) {
      ApiClient api(d.node((vn.second + other) % 3).url(), "shop");
      auto r = api.next("n", key);
      ASSERT_EQ(r.status, 200) << r.body;
      EXPECT_EQ(r.num("value"), vn.first) << key;
      EXPECT_TRUE(r.at("replayed").as_bool()) << key;
      ++replays;
    }
  }
  for (int n = 0; n < 3; ++n) {
    ApiClient api(d.node(n).url(), "shop");
    auto g = api.get("n");
    EXPECT_EQ(g.num("last_value"), total) << "node " << n;
    EXPECT_EQ(g.num("issued_count"), total) << "node " << n;
  }
}

// --- once records ----------------------------------------------------------------------------

TEST(Nodes, OnceBeginIsExactlyOneAcrossNodesAndEveryNodeAnswersTheResult) {
  Deployment d(3);
  d.start_all();
  constexpr int kKeys = 10, kPerNode = 3;
  std::atomic<int> acquired[kKeys] = {};
  std::atomic<int> failures{0};
  std::mutex mu;
  std::map<int, std::pair<int, std::int64_t>> holder;  // key -> (node, token); guarded by mu
  std::vector<std::thread> threads;
  std::atomic<int> ready{0};
  for (int n = 0; n < 3; ++n) {
    for (int c = 0; c < kPerNode; ++c) {
      threads.emplace_back([&, n, c] {
        ApiClient api(d.node(n).url(), "mail");
        ready.fetch_add(1);
        while (ready.load() < 3 * kPerNode) std::this_thread::yield();  // start together
        for (int k = 0; k < kKeys; ++k) {
          const std::string body = R"({"key":"<msg-)" + std::to_string(k) +
                                   R"(@example.jp>","owner":"n)" + std::to_string(n) + "c" +
                                   std::to_string(c) + R"(","lease_ms":60000})";
          auto r = api.send("POST", "/v1/ns/mail/once/begin", body);
          if (r.status != 200) {
            failures.fetch_add(1);
            ADD_FAILURE() << r.status << " " << r.body << r.transport_error;
            continue;
          }
          const std::string outcome = r.str("outcome");
          if (outcome == "acquired") {
            acquired[k].fetch_add(1);
            std::lock_guard lk(mu);
            holder[k] = {n, r.num("token")};
          } else if (outcome != "in_progress") {
            ADD_FAILURE() << "unexpected " << r.body;
          }
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(failures.load(), 0);
  for (int k = 0; k < kKeys; ++k) EXPECT_EQ(acquired[k].load(), 1) << "key " << k;

  // The holder completes on its node; every node then answers "completed" with the result.
  for (const auto& [k, ht] : holder) {
    ApiClient api(d.node(ht.first).url(), "mail");
    const std::string key = "<msg-" + std::to_string(k) + "@example.jp>";
    auto c = api.send("POST", "/v1/ns/mail/once/complete",
                      R"({"key":")" + key + R"(","token":)" + std::to_string(ht.second) +
                          R"(,"result":{"ticket":"T-)" + std::to_string(k) + R"("}})");
    ASSERT_EQ(c.status, 200) << c.body;
    for (int n = 0; n < 3; ++n) {
      ApiClient other(d.node(n).url(), "mail");
      auto b = other.send("POST", "/v1/ns/mail/once/begin",
                          R"({"key":")" + key + R"(","owner":"late"})");
      ASSERT_EQ(b.status, 200) << b.body;
      EXPECT_EQ(b.str("outcome"), "completed");
      EXPECT_EQ(boost::json::serialize(b.at("result")),
                R"({"ticket":"T-)" + std::to_string(k) + R"("})");
    }
  }
}

// --- locks -----------------------------------------------------------------------------------

TEST(Nodes, LockIsExclusiveAcrossNodesAndTokensIncreaseInGrantOrder) {
  Deployment d(3);
  d.start_all();
  constexpr int kPerNode = 3;
  std::atomic<bool> inside{false};
  std::atomic<int> overlaps{0}, failures{0};
  std::mutex mu;
  std::vector<std::int64_t> grants;  // tokens in grant order; guarded by mu
  const auto end = steady::now() + milliseconds(4000);
  std::vector<std::thread> threads;
  for (int n = 0; n < 3; ++n) {
    for (int c = 0; c < kPerNode; ++c) {
      threads.emplace_back([&, n, c] {
        ApiClient api(d.node(n).url(), "ops");
        const std::string base = "/v1/ns/ops/locks/export";
        const std::string owner = "n" + std::to_string(n) + "c" + std::to_string(c);
        while (steady::now() < end) {
          auto a = api.send("POST", base + "/acquire",
                            R"({"owner":")" + owner + R"(","lease_ms":10000})");
          if (a.status != 200) {
            failures.fetch_add(1);
            ADD_FAILURE() << a.status << " " << a.body << a.transport_error;
            return;
          }
          if (!a.at("acquired").as_bool()) continue;
          if (inside.exchange(true)) overlaps.fetch_add(1);
          {
            // Recorded while holding the lock: the next grant can only follow our release.
            std::lock_guard lk(mu);
            grants.push_back(a.num("token"));
          }
          inside.store(false);
          auto r = api.send("POST", base + "/release",
                            R"({"token":)" + std::to_string(a.num("token")) + "}");
          if (r.status != 200) {
            failures.fetch_add(1);
            ADD_FAILURE() << "release: " << r.status << " " << r.body;
            return;
          }
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(overlaps.load(), 0);
  std::printf("[ figures  ] %zu grants of one lock from 9 clients on 3 nodes in 4 s\n",
              grants.size());
  ASSERT_GE(grants.size(), 10u);
  for (std::size_t i = 1; i < grants.size(); ++i) {
    ASSERT_LT(grants[i - 1], grants[i]) << "grant " << i;
  }
}

// --- one clock -------------------------------------------------------------------------------

TEST(Nodes, ANodeWhoseClockIsTenMinutesAheadDecidesLikeTheOthers) {
  // Debian's faketime package: /usr/lib/<multiarch triplet>/faketime/libfaketimeMT.so.1.
  std::string libfaketime;
  std::error_code ec;
  for (const auto& dir : std::filesystem::directory_iterator("/usr/lib", ec)) {
    const auto candidate = dir.path() / "faketime" / "libfaketimeMT.so.1";
    if (std::filesystem::exists(candidate, ec)) libfaketime = candidate.string();
  }
  ASSERT_FALSE(libfaketime.empty()) << "no libfaketime: scripts/install-deps postgres installs it";
  Deployment d(2);
  d.node(1).set_env(
      {{"LD_PRELOAD", libfaketime}, {"FAKETIME", "+10m"}, {"FAKETIME_DONT_FAKE_MONOTONIC", "1"}});
  d.start_all();
  // The skew is real: node 1 logs with its own clock.
  const auto skew = log_clock_skew_ms(d.node(1).log());
  ASSERT_GT(skew, 9 * 60 * 1000) << "libfaketime did not take effect:\n" << d.node(1).log();
  EXPECT_LT(std::abs(log_clock_skew_ms(d.node(0).log())), 60 * 1000);

  ApiClient a(d.node(0).url(), "shop"), b(d.node(1).url(), "shop");
  // A lock leased on node 0 is held for node 1 too, with the same lease end.
  auto g = a.send("POST", "/v1/ns/shop/locks/L/acquire", R"({"owner":"A","lease_ms":5000})");
  ASSERT_EQ(g.status, 200) << g.body;
  ASSERT_TRUE(g.at("acquired").as_bool());
  auto busy = b.send("POST", "/v1/ns/shop/locks/L/acquire", R"({"owner":"B","lease_ms":5000})");
  ASSERT_EQ(busy.status, 200) << busy.body;
  EXPECT_FALSE(busy.at("acquired").as_bool()) << busy.body;
  EXPECT_EQ(busy.at("holder").at("lease_expires_at"), g.at("lease_expires_at"));
  auto state = b.send("GET", "/v1/ns/shop/locks/L");
  ASSERT_EQ(state.status, 200);
  EXPECT_TRUE(state.at("held").as_bool()) << state.body;
  EXPECT_EQ(state.at("lease_expires_at"), g.at("lease_expires_at")) << state.body;

  // A once record claimed on node 0 is in progress for node 1, with the time the lease has left.
  auto claim =
      a.send("POST", "/v1/ns/shop/once/begin", R"({"key":"item-1","owner":"A","lease_ms":60000})");
  ASSERT_EQ(claim.status, 200) << claim.body;
  ASSERT_EQ(claim.str("outcome"), "acquired");
  auto dup =
      b.send("POST", "/v1/ns/shop/once/begin", R"({"key":"item-1","owner":"B","lease_ms":60000})");
  ASSERT_EQ(dup.status, 200) << dup.body;
  EXPECT_EQ(dup.str("outcome"), "in_progress") << dup.body;
  EXPECT_GT(dup.num("retry_after_ms"), 50000) << dup.body;
  EXPECT_LE(dup.num("retry_after_ms"), 60000) << dup.body;

  // Numbers issued on node 1 carry the database's time, not node 1's.
  ASSERT_EQ(a.create("c", R"({"start":0,"max":99,"format":"{seq}"})").status, 201);
  auto n = b.next("c", "k1");
  ASSERT_EQ(n.status, 200) << n.body;
  EXPECT_LT(std::abs(rfc3339_to_ms(n.str("issued_at")) - now_ms()), 60 * 1000) << n.body;
}

// --- crashes ---------------------------------------------------------------------------------

TEST(Nodes, KillNineOfOneNodeUnderLoadLosesNothingAndItsLockLapsesNormally) {
  Deployment d(3);
  d.start_all();
  ApiClient admin(d.node(0).url(), "shop");
  ASSERT_EQ(admin.create("n", R"({"start":0,"max":1000000,"format":"{seq}"})").status, 201);
  ApiClient on_victim(d.node(1).url(), "shop");
  auto held = on_victim.send("POST", "/v1/ns/shop/locks/job/acquire",
                             R"({"owner":"victim","lease_ms":3000})");
  ASSERT_EQ(held.status, 200) << held.body;
  ASSERT_TRUE(held.at("acquired").as_bool());

  Load load(d, "n", /*clients_per_node=*/3);
  load.start();
  ASSERT_TRUE(load.wait_acks(100)) << load.report();
  d.node(1).kill9();
  const std::size_t at_kill = load.acks();
  ASSERT_TRUE(load.wait_acks(at_kill + 100)) << "the other nodes went on: " << load.report();
  load.stop();
  std::printf("[ figures  ] %s\n", load.report().c_str());
  EXPECT_EQ(load.gave_up(), 0) << load.report();
  load.verify_every_ack_is_stored_and_numbers_are_contiguous(d.node(0));

  // The victim's lock is held until its lease lapses, then granted with a larger token.
  ApiClient a(d.node(0).url(), "shop");
  const std::string lease_end = held.str("lease_expires_at");
  Reply got;
  ASSERT_TRUE(eventually(
      [&] {
        got =
            a.send("POST", "/v1/ns/shop/locks/job/acquire", R"({"owner":"after","lease_ms":1000})");
        return got.status == 200 && got.at("acquired").as_bool();
      },
      milliseconds(10000)))
      << got.body;
  EXPECT_GT(got.num("token"), held.num("token"));
  EXPECT_GE(rfc3339_to_ms(got.str("lease_expires_at")) - 1000, rfc3339_to_ms(lease_end))
      << "granted before the victim's lease ended";
}

}  // namespace
}  // namespace ichido::testing
