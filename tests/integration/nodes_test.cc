// Several stateless ichido nodes on one PostgreSQL database (decisions 070-077): real
// `ichido serve` processes sharing one schema, real concurrent clients, real crashes. Each test
// says what one node alone would guarantee and checks that N nodes together keep it.
//
// These tests need PostgreSQL: CTest runs them against the `pg` fixture's cluster
// (pg_nodes_tests, with ICHIDO_TEST_STORE=postgres).
#include <gtest/gtest.h>
#include <signal.h>

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

// --- waiting across nodes (decision 075) ---------------------------------------------------------

// A lock held through node `holder_node`, and an acquire with wait_ms parked on node `waiter_node`
// (its GET there shows the waiter). The waiter's reply arrives in `got`; `granted_at` is when.
class ParkedLockWaiter {
 public:
  ParkedLockWaiter(Deployment& d, int waiter_node, const std::string& name,
                   std::int64_t wait_ms = 20000)
      : api_(d.node(waiter_node).url(), "ops"), path_("/v1/ns/ops/locks/" + name) {
    thread_ = std::thread([this, url = d.node(waiter_node).url(), wait_ms] {
      ApiClient c(url, "ops");
      got_ = c.send(
          "POST", path_ + "/acquire",
          R"({"owner":"waiter","lease_ms":60000,"wait_ms":)" + std::to_string(wait_ms) + "}");
      granted_at_ = steady::now();
    });
  }
  ~ParkedLockWaiter() { join(); }
  // True once the waiter is parked in its node's line (it found the lock held).
  bool parked() {
    return eventually([&] {
      auto g = api_.send("GET", path_);
      return g.status == 200 && g.at("held").as_bool() && g.num("waiters") == 1;
    });
  }
  void join() {
    if (thread_.joinable()) thread_.join();
  }
  const Reply& got() const { return got_; }
  steady::time_point granted_at() const { return granted_at_; }

 private:
  ApiClient api_;
  std::string path_;
  std::thread thread_;
  Reply got_;
  steady::time_point granted_at_{};
};

std::int64_t Acquire(ApiClient& api, const std::string& name, const std::string& owner,
                     std::int64_t lease_ms = 60000) {
  auto a = api.send("POST", "/v1/ns/ops/locks/" + name + "/acquire",
                    R"({"owner":")" + owner + R"(","lease_ms":)" + std::to_string(lease_ms) + "}");
  EXPECT_EQ(a.status, 200) << a.body;
  EXPECT_TRUE(a.status == 200 && a.at("acquired").as_bool()) << a.body;
  return a.status == 200 && a.at("acquired").as_bool() ? a.num("token") : 0;
}

double Ms(steady::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Far below the waits (20 s) and leases (60 s) the tests use: the grant came from the release,
// not from a timeout. The latency target (p99 <= 100 ms) is measured, not asserted here:
// WakeUpLatencyAcrossNodesIsMeasured prints it, bench/README says how to run it under load.
constexpr auto kWokenWithin = milliseconds(5000);

TEST(Nodes, ALockWaiterOnOneNodeIsWokenByAReleaseOnAnother) {
  Deployment d(2);
  d.start_all();
  ApiClient b(d.node(1).url(), "ops");
  const std::int64_t held = Acquire(b, "l", "holder");
  ParkedLockWaiter w(d, 0, "l");
  ASSERT_TRUE(w.parked());
  const auto released = steady::now();
  auto r =
      b.send("POST", "/v1/ns/ops/locks/l/release", R"({"token":)" + std::to_string(held) + "}");
  ASSERT_EQ(r.status, 200) << r.body;
  w.join();
  ASSERT_EQ(w.got().status, 200) << w.got().body;
  EXPECT_TRUE(w.got().at("acquired").as_bool()) << w.got().body;
  EXPECT_GT(w.got().num("token"), held);
  EXPECT_LT(w.granted_at() - released, kWokenWithin);
  std::printf("[ figures  ] release on node B -> grant on node A: %.1f ms\n",
              Ms(w.granted_at() - released));
}

TEST(Nodes, ALockWaiterIsHandedALockWhoseHolderOnAnotherNodeLetItsLeaseLapse) {
  Deployment d(2);
  d.start_all();
  ApiClient b(d.node(1).url(), "ops");
  const auto acquired = steady::now();
  const std::int64_t held = Acquire(b, "lapse", "crashed-holder", 1500);
  ParkedLockWaiter w(d, 0, "lapse");
  ASSERT_TRUE(w.parked());
  w.join();  // nobody releases: the lease (on the database's clock) ends
  ASSERT_EQ(w.got().status, 200) << w.got().body;
  EXPECT_TRUE(w.got().at("acquired").as_bool()) << w.got().body;
  EXPECT_GT(w.got().num("token"), held);
  EXPECT_GE(w.granted_at() - acquired, milliseconds(1400));
  EXPECT_LT(w.granted_at() - acquired, milliseconds(1500) + kWokenWithin);
}

// --- first come, first served across nodes (decision 076) ---------------------------------------

// Waiters that queue for one lock on several nodes, one after another; each, when granted, notes
// its place in the grant order while it holds the lock, then releases it.
class QueuedLockWaiters {
 public:
  // `ahead`: waiters already queued by others when the first of these arrives.
  QueuedLockWaiters(Deployment& d, std::string name, std::int64_t ahead = 0)
      : d_(d), name_(std::move(name)), ahead_(ahead) {}
  ~QueuedLockWaiters() { join(); }
  // Starts a waiter on `node` and returns once every node's GET shows it queued (n waiters).
  void add(int node, const std::string& owner, std::int64_t wait_ms = 30000) {
    const std::int64_t n = ahead_ + static_cast<std::int64_t>(threads_.size()) + 1;
    threads_.emplace_back([this, node, owner, wait_ms] {
      ApiClient c(d_.node(node).url(), "ops");
      auto a = c.send("POST", path() + "/acquire",
                      R"({"owner":")" + owner + R"(","lease_ms":20000,"wait_ms":)" +
                          std::to_string(wait_ms) + "}");
      if (a.status != 200 || !a.at("acquired").as_bool()) {
        std::lock_guard lk(mu_);
        failures_.push_back(owner + ": " + std::to_string(a.status) + " " + a.body);
        return;
      }
      {
        std::lock_guard lk(mu_);
        order_.push_back(owner);
        tokens_.push_back(a.num("token"));
      }
      auto r = c.send("POST", path() + "/release",
                      R"({"token":)" + std::to_string(a.num("token")) + "}");
      if (r.status != 200) {
        std::lock_guard lk(mu_);
        failures_.push_back(owner + " release: " + std::to_string(r.status) + " " + r.body);
      }
    });
    for (int i = 0; i < 3 && i < d_.size(); ++i) {
      if (!d_.node(i).running()) continue;
      ApiClient g(d_.node(i).url(), "ops");
      ASSERT_TRUE(eventually([&] {
        auto s = g.send("GET", path());
        return s.status == 200 && s.num("waiters") == n;
      })) << owner
          << " never showed as queued on node " << i;
      // The namespace's list counts the waiters of every node too (it counted only its own).
      if (g.send("GET", path()).at("held").as_bool()) {
        EXPECT_TRUE(eventually([&] { return listed_waiters(g) == n; }))
            << "GET …/locks on node " << i << " shows " << listed_waiters(g) << " waiters, not "
            << n;
      }
    }
  }
  void join() {
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  std::vector<std::string> order() {
    std::lock_guard lk(mu_);
    return order_;
  }
  std::vector<std::int64_t> tokens() {
    std::lock_guard lk(mu_);
    return tokens_;
  }
  std::vector<std::string> failures() {
    std::lock_guard lk(mu_);
    return failures_;
  }
  std::string path() const { return "/v1/ns/ops/locks/" + name_; }
  // The waiters of this lock in the namespace's list (GET …/locks), -1 when it is not listed.
  std::int64_t listed_waiters(ApiClient& c) const {
    auto l = c.send("GET", "/v1/ns/ops/locks");
    if (l.status != 200) return -1;
    for (const auto& item : l.at("items").as_array()) {
      if (item.at("name").as_string() == name_) return item.at("waiters").as_int64();
    }
    return -1;
  }

 private:
  Deployment& d_;
  const std::string name_;
  const std::int64_t ahead_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::vector<std::string> order_, failures_;  // guarded by mu_
  std::vector<std::int64_t> tokens_;           // guarded by mu_
};

TEST(Nodes, LockWaitersOnDifferentNodesAreGrantedInArrivalOrder) {
  Deployment d(3);
  d.start_all();
  ApiClient holder(d.node(0).url(), "ops");
  const std::int64_t held = Acquire(holder, "fifo", "holder");
  QueuedLockWaiters w(d, "fifo");
  // Two rounds over the nodes in an order that is not the nodes' own: A on 1, B on 2, C on 0...
  const std::vector<std::pair<int, std::string>> arrivals = {{1, "A"}, {2, "B"}, {0, "C"},
                                                             {2, "D"}, {1, "E"}, {0, "F"}};
  for (const auto& [node, owner] : arrivals) w.add(node, owner);
  // A newcomer that does not wait never overtakes them, on any node, though the lock is about
  // to be handed on.
  auto r = holder.send("POST", "/v1/ns/ops/locks/fifo/release",
                       R"({"token":)" + std::to_string(held) + "}");
  ASSERT_EQ(r.status, 200) << r.body;
  for (int i = 0; i < 3; ++i) {
    ApiClient c(d.node(i).url(), "ops");
    auto a = c.send("POST", "/v1/ns/ops/locks/fifo/acquire", R"({"owner":"newcomer"})");
    ASSERT_EQ(a.status, 200) << a.body;
    if (a.at("acquired").as_bool()) {
      ADD_FAILURE() << "a newcomer on node " << i << " overtook the queue";
      break;
    }
  }
  w.join();
  EXPECT_TRUE(w.failures().empty()) << ::testing::PrintToString(w.failures());
  EXPECT_EQ(w.order(), (std::vector<std::string>{"A", "B", "C", "D", "E", "F"}));
  const auto tokens = w.tokens();
  for (std::size_t i = 1; i < tokens.size(); ++i) EXPECT_LT(tokens[i - 1], tokens[i]);
  ApiClient c(d.node(2).url(), "ops");
  auto g = c.send("GET", "/v1/ns/ops/locks/fifo");
  ASSERT_EQ(g.status, 200) << g.body;
  EXPECT_FALSE(g.at("held").as_bool());
  EXPECT_EQ(g.num("waiters"), 0);
}

TEST(Nodes, ANodeKilledWithQueuedWaitersDoesNotHoldUpTheOthers) {
  Deployment d(3);
  d.start_all();
  ApiClient holder(d.node(0).url(), "ops");
  const std::int64_t held = Acquire(holder, "k9", "holder");
  // Two waiters on the victim come first, then one on node 2.
  std::vector<std::thread> victims;  // their node dies under them: they get no grant
  JoinAtExit join_victims{victims};
  for (const std::string owner : {"V1", "V2"}) {
    victims.emplace_back([&d, owner] {
      ApiClient c(d.node(1).url(), "ops");
      (void)c.send("POST", "/v1/ns/ops/locks/k9/acquire",
                   R"({"owner":")" + owner + R"(","lease_ms":60000,"wait_ms":60000})");
    });
    const std::int64_t n = static_cast<std::int64_t>(victims.size());
    ASSERT_TRUE(eventually([&] {
      auto s = holder.send("GET", "/v1/ns/ops/locks/k9");
      return s.status == 200 && s.num("waiters") == n;
    }));
  }
  QueuedLockWaiters survivors(d, "k9", /*ahead=*/2);
  survivors.add(2, "S");
  const auto killed = steady::now();
  d.node(1).kill9();
  // Its places stop counting when its heartbeat lease (3 s) lapses, not before.
  ASSERT_TRUE(eventually(
      [&] {
        auto s = holder.send("GET", "/v1/ns/ops/locks/k9");
        return s.status == 200 && s.num("waiters") == 1;
      },
      milliseconds(15000)));
  const double lapsed_ms = Ms(steady::now() - killed);
  EXPECT_GE(lapsed_ms, 1500) << "a live node's places must not be dropped early";
  auto r = holder.send("POST", "/v1/ns/ops/locks/k9/release",
                       R"({"token":)" + std::to_string(held) + "}");
  ASSERT_EQ(r.status, 200) << r.body;
  const auto released = steady::now();
  survivors.join();
  EXPECT_TRUE(survivors.failures().empty()) << ::testing::PrintToString(survivors.failures());
  EXPECT_EQ(survivors.order(), std::vector<std::string>{"S"});
  EXPECT_LT(steady::now() - released, kWokenWithin);
  std::printf("[ figures  ] killed node's places skipped after %.0f ms\n", lapsed_ms);
}

TEST(Nodes, AReleaseRightAfterANodeDiedReachesTheNextLiveWaiterWithinThePickupWindow) {
  Deployment d(3);
  d.start_all();
  ApiClient holder(d.node(0).url(), "ops");
  const std::int64_t held = Acquire(holder, "k9b", "holder");
  std::vector<std::thread> victims;
  JoinAtExit join_victims{victims};
  victims.emplace_back([&d] {
    ApiClient c(d.node(1).url(), "ops");
    (void)c.send("POST", "/v1/ns/ops/locks/k9b/acquire",
                 R"({"owner":"V","lease_ms":60000,"wait_ms":60000})");
  });
  ASSERT_TRUE(eventually([&] {
    auto s = holder.send("GET", "/v1/ns/ops/locks/k9b");
    return s.status == 200 && s.num("waiters") == 1;
  }));
  QueuedLockWaiters survivors(d, "k9b", /*ahead=*/1);
  survivors.add(2, "S");
  d.node(1).kill9();
  // Released at once: the dead node's heartbeat lease is still live, so the lock is granted to
  // its waiter — for the pickup window only (3 s), not for the waiter's 60 s lease.
  const auto released = steady::now();
  auto r = holder.send("POST", "/v1/ns/ops/locks/k9b/release",
                       R"({"token":)" + std::to_string(held) + "}");
  ASSERT_EQ(r.status, 200) << r.body;
  survivors.join();
  const double waited_ms = Ms(steady::now() - released);
  EXPECT_TRUE(survivors.failures().empty()) << ::testing::PrintToString(survivors.failures());
  EXPECT_EQ(survivors.order(), std::vector<std::string>{"S"});
  EXPECT_LT(waited_ms, 3000 + Ms(kWokenWithin));
  std::printf("[ figures  ] release right after a kill -9 -> next live waiter granted: %.0f ms\n",
              waited_ms);
}

// A once begin with wait_ms on node A while node B's worker holds the key.
class ParkedOnceWaiter {
 public:
  ParkedOnceWaiter(Deployment& d, int node, const std::string& key) {
    thread_ = std::thread([this, url = d.node(node).url(), key] {
      ApiClient c(url, "ops");
      got_ =
          c.send("POST", "/v1/ns/ops/once/begin",
                 R"({"key":")" + key + R"(","owner":"waiter","lease_ms":60000,"wait_ms":20000})");
      answered_at_ = steady::now();
    });
  }
  ~ParkedOnceWaiter() {
    if (thread_.joinable()) thread_.join();
  }
  void join() { thread_.join(); }
  const Reply& got() const { return got_; }
  steady::time_point answered_at() const { return answered_at_; }

 private:
  std::thread thread_;
  Reply got_;
  steady::time_point answered_at_{};
};

// A once waiter parks without a per-key count in the API: the node's /metrics gauge says so.
bool OnceWaitersParked(ServerProcess& node, int n) {
  ApiClient api(node.url(), "ops");
  return eventually([&] {
    auto m = api.send("GET", "/metrics");
    return m.status == 200 &&
           m.body.find("\nichido_once_waiters " + std::to_string(n) + "\n") != std::string::npos;
  });
}

TEST(Nodes, OnceWaitersOnOneNodeAreWokenByACompleteOrAFailOnAnother) {
  Deployment d(2);
  d.start_all();
  ApiClient b(d.node(1).url(), "ops");
  for (const std::string how : {"complete", "fail"}) {
    SCOPED_TRACE(how);
    const std::string key = "mail-" + how;
    auto first = b.send("POST", "/v1/ns/ops/once/begin",
                        R"({"key":")" + key + R"(","owner":"worker-b","lease_ms":60000})");
    ASSERT_EQ(first.str("outcome"), "acquired") << first.body;
    ParkedOnceWaiter w(d, 0, key);
    ASSERT_TRUE(OnceWaitersParked(d.node(0), 1));
    const auto finished = steady::now();
    const std::string body =
        how == "complete"
            ? R"({"key":")" + key + R"(","token":)" + std::to_string(first.num("token")) +
                  R"(,"result":{"sent":true}})"
            : R"({"key":")" + key + R"(","token":)" + std::to_string(first.num("token")) +
                  R"(,"error":"smtp down","retry":true})";
    auto f = b.send("POST", "/v1/ns/ops/once/" + how, body);
    ASSERT_EQ(f.status, 200) << f.body;
    w.join();
    ASSERT_EQ(w.got().status, 200) << w.got().body;
    // complete: the waiter gets the result; fail (retry): the waiter takes the next attempt.
    EXPECT_EQ(w.got().str("outcome"), how == "complete" ? "completed" : "acquired") << w.got().body;
    EXPECT_LT(w.answered_at() - finished, kWokenWithin);
    std::printf("[ figures  ] once %s on node B -> answer on node A: %.1f ms\n", how.c_str(),
                Ms(w.answered_at() - finished));
  }
}

// The LISTEN connections are cut (as a failover or a proxy would): the nodes re-establish them
// and a release still wakes the waiter on the other node.
TEST(Nodes, ACutListenConnectionIsReEstablishedAndWakeUpsGoOn) {
  Deployment d(2);
  d.start_all();
  // The LISTEN sessions (their last query is the LISTEN, or after a reconnect the token
  // epoch's confirmation, decision 077).
  const std::string listeners =
      "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'ichido-listen' AND "
      "datname = current_database()";
  ASSERT_TRUE(eventually([&] { return query_value(d.url(), listeners) == "2"; }))
      << query_value(d.url(), listeners);
  ASSERT_EQ(query_value(d.url(),
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE application_name = 'ichido-listen'"),
            "2");
  ApiClient b(d.node(1).url(), "ops");
  const std::int64_t held = Acquire(b, "cut", "holder");
  ParkedLockWaiter w(d, 0, "cut");
  ASSERT_TRUE(w.parked());
  // Both nodes listen again (by themselves, within their reconnect backoff).
  EXPECT_TRUE(eventually([&] { return query_value(d.url(), listeners) == "2"; }))
      << query_value(d.url(), listeners);
  const auto released = steady::now();
  auto r =
      b.send("POST", "/v1/ns/ops/locks/cut/release", R"({"token":)" + std::to_string(held) + "}");
  ASSERT_EQ(r.status, 200) << r.body;
  w.join();
  ASSERT_EQ(w.got().status, 200) << w.got().body;
  EXPECT_TRUE(w.got().at("acquired").as_bool()) << w.got().body;
  EXPECT_LT(w.granted_at() - released, kWokenWithin);
}

// The wake-up latency across nodes, printed (the README's "within milliseconds"; the test itself
// bounds only the slowest round, by kWokenWithin): each round a fresh lock is held through node
// B, a waiter parks on node A, and B releases; the figure is from sending the release to the
// waiter's grant (so it includes the release's own commit).
TEST(Nodes, WakeUpLatencyAcrossNodesIsMeasured) {
  Deployment d(2);
  d.start_all();
  ApiClient b(d.node(1).url(), "ops");
  constexpr int kRounds = 40;
  std::vector<double> ms;
  for (int i = 0; i < kRounds; ++i) {
    const std::string name = "lat" + std::to_string(i);
    const std::int64_t held = Acquire(b, name, "holder");
    ParkedLockWaiter w(d, 0, name);
    ASSERT_TRUE(w.parked());
    const auto released = steady::now();
    auto r = b.send("POST", "/v1/ns/ops/locks/" + name + "/release",
                    R"({"token":)" + std::to_string(held) + "}");
    ASSERT_EQ(r.status, 200) << r.body;
    w.join();
    ASSERT_TRUE(w.got().status == 200 && w.got().at("acquired").as_bool()) << w.got().body;
    ms.push_back(Ms(w.granted_at() - released));
  }
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double p) { return ms[std::min(ms.size() - 1, std::size_t(p * ms.size()))]; };
  std::printf(
      "[ figures  ] cross-node wake-up (release on B -> grant on A), %d rounds: p50 %.1f ms, "
      "p90 %.1f ms, p99 %.1f ms, max %.1f ms\n",
      kRounds, pct(0.50), pct(0.90), pct(0.99), ms.back());
  EXPECT_LT(ms.back(), Ms(kWokenWithin));
}

// Decision 134: a node remembers the store it served (--data DIR/store.id). When its database
// was emptied it refuses to start a new, empty store in its place (receipt numbers would start
// again from 1), and so does `ichido token` (it never creates a store); --init is the way to
// start a new store on purpose.
TEST(Nodes, ANodeDoesNotStartANewStoreInAnEmptiedDatabaseWithoutInit) {
  TempDir dir;
  ServerProcess a(dir.path() + "/a");
  std::string err;
  ASSERT_TRUE(a.start(&err)) << err;
  {
    ApiClient c(a.url(), "shop");
    ASSERT_EQ(c.create("r", R"({"start":0,"max":999,"format":"R-{seq:3}"})").status, 201);
    ASSERT_EQ(c.next("r", "k1").status, 200);
  }
  ASSERT_EQ(a.stop(), 0) << a.log();
  const std::string id = slurp(dir.path() + "/a/store.id");
  ASSERT_EQ(id.size(), 33u) << "store.id: '" << id << "'";  // 32 hex digits and a newline

  const std::string schema_count =
      "SELECT count(*) FROM pg_namespace WHERE nspname = '" + a.store_schema() + "'";
  {
    store::postgres::PgConn::Settings s;
    s.conninfo = a.store_url();
    auto c = store::postgres::PgConn::connect(s);
    ASSERT_TRUE(c.ok()) << c.error().message;
    ASSERT_TRUE((*c)->exec_script("DROP SCHEMA \"" + a.store_schema() + "\" CASCADE").ok());
  }
  ASSERT_EQ(query_value(a.store_url(), schema_count), "0");

  EXPECT_FALSE(a.start(&err)) << "started a new store in place of " << id;
  EXPECT_NE(err.find("holds no ichido store"), std::string::npos) << err;
  EXPECT_EQ(query_value(a.store_url(), schema_count), "0") << "a schema was created";

  auto [code, out] = run_command(std::string(ichido_binary()) + " token create " + a.store_args() +
                                 " --ns shop --role writer 2>&1");
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find("There is no ichido store"), std::string::npos) << out;
  EXPECT_EQ(query_value(a.store_url(), schema_count), "0") << "the CLI created a schema";

  ServerProcess again(dir.path() + "/a", {"--init"});
  again.set_store(a.store_url(), a.store_schema());
  ASSERT_TRUE(again.start(&err)) << err;
  ApiClient c(again.url(), "shop");
  EXPECT_EQ(c.send("GET", "/v1/ns/shop/counters/r").status, 404);  // a new, empty store
  ASSERT_EQ(again.stop(), 0) << again.log();
  EXPECT_NE(slurp(dir.path() + "/a/store.id"), id);
  // Without --init it now serves the new store again, as any restart.
  ASSERT_TRUE(a.start(&err)) << err;
  ASSERT_EQ(a.stop(), 0) << a.log();

  // A node whose --data cannot be written (here: under a regular file) still serves; it warns
  // that it cannot remember its store.
  {
    std::FILE* f = std::fopen((dir.path() + "/file").c_str(), "w");
    ASSERT_TRUE(f);
    std::fclose(f);
  }
  auto [rc, log] = run_command("timeout 3 " + std::string(ichido_binary()) +
                               " serve --listen 127.0.0.1:0 --no-auth --data " + dir.path() +
                               "/file/node " + a.store_args() + " 2>&1");
  EXPECT_EQ(rc, 124) << log;  // still running when `timeout` stopped it
  EXPECT_NE(log.find("listening on"), std::string::npos) << log;
  EXPECT_NE(log.find("warning: cannot write"), std::string::npos) << log;
}

// Three nodes with authentication on start together on a fresh store: each finds no token and
// mints a first admin token, the store keeps one, and only the node whose token it kept leaves
// an admin.token (the others wrote theirs first and remove it). That one token works on every
// node. Which node wins, and whether two raced at all, is up to the scheduler; what is checked
// holds either way.
TEST(Nodes, NodesStartingTogetherLeaveExactlyOneWorkingFirstAdminToken) {
  Deployment d(3, {}, "", "ichido", /*auth=*/true);
  d.start_all();
  std::vector<std::string> tokens;
  for (int i = 0; i < d.size(); ++i) {
    const std::string path = d.node(i).data_dir() + "/admin.token";
    if (std::filesystem::exists(path)) tokens.push_back(slurp(path));
  }
  ASSERT_EQ(tokens.size(), 1u);
  std::string token = tokens.front();
  while (!token.empty() && token.back() == '\n') token.pop_back();
  for (int i = 0; i < d.size(); ++i) {
    ApiClient admin(d.node(i).url(), "a", token);
    auto r = admin.send("GET", "/v1/admin/tokens");
    EXPECT_EQ(r.status, 200) << r.body;
    const auto first = r.body.find("\"first admin token\"");
    EXPECT_NE(first, std::string::npos) << r.body;
    EXPECT_EQ(first, r.body.rfind("\"first admin token\"")) << "one token kept: " << r.body;
  }
}

// `ichido token revoke --store URL`: the revocation reaches every running node through the
// change feed (one NOTIFY in the revoking transaction), not only the next token refresh.
TEST(Nodes, ATokenRevokedWithTheCliIsRefusedOnEveryNode) {
  TempDir dir;
  ServerProcess a(dir.path() + "/a", {}, /*auth=*/true);
  ServerProcess b(dir.path() + "/b", {}, /*auth=*/true);
  b.share_store(a);
  std::string err;
  ASSERT_TRUE(a.start(&err)) << err;
  ASSERT_TRUE(b.start(&err)) << err;
  const std::string cli = std::string(ichido_binary()) + " token ";
  auto [code, secret] = run_command(cli + "create " + a.store_args() + " --ns ops --role writer");
  ASSERT_EQ(code, 0) << secret;
  ApiClient on_a(a.url(), "ops", secret), on_b(b.url(), "ops", secret);
  ASSERT_EQ(on_a.send("GET", "/v1/ns/ops/counters").status, 200);
  ASSERT_EQ(on_b.send("GET", "/v1/ns/ops/counters").status, 200);
  auto [lcode, listed] = run_command(cli + "list --json " + a.store_args());
  ASSERT_EQ(lcode, 0) << listed;
  std::string id;
  const boost::json::value tokens = boost::json::parse(listed);
  for (const auto& t : tokens.at("items").as_array()) {
    if (t.at("role").as_string() == "writer") id = std::string(t.at("id").as_string());
  }
  ASSERT_FALSE(id.empty()) << listed;
  const auto revoking = steady::now();
  auto [rcode, rout] = run_command(cli + "revoke " + id + " " + a.store_args() + " 2>&1");
  ASSERT_EQ(rcode, 0) << rout;
  EXPECT_EQ(rout.find("warning"), std::string::npos) << rout;
  // Decision 077: the CLI returned only once both nodes confirmed they dropped the token.
  EXPECT_EQ(on_a.send("GET", "/v1/ns/ops/counters").status, 401);
  EXPECT_EQ(on_b.send("GET", "/v1/ns/ops/counters").status, 401);
  std::printf("[ figures  ] CLI revoke on 2 nodes (process start to exit): %.1f ms\n",
              Ms(steady::now() - revoking));
}

TEST(Nodes, ATokenRevokedThroughOneNodeIsRefusedByEveryNodeWhenTheAnswerArrives) {
  TempDir dir;
  std::vector<std::unique_ptr<ServerProcess>> nodes;
  for (int i = 0; i < 3; ++i) {
    nodes.push_back(std::make_unique<ServerProcess>(dir.path() + "/n" + std::to_string(i),
                                                    std::vector<std::string>{}, /*auth=*/true));
    if (i > 0) nodes.back()->share_store(*nodes.front());
    std::string err;
    ASSERT_TRUE(nodes.back()->start(&err)) << err;
  }
  const std::string cli = std::string(ichido_binary()) + " token ";
  auto [code, admin] =
      run_command(cli + "create " + nodes[0]->store_args() + " --ns '*' --role admin");
  ASSERT_EQ(code, 0) << admin;
  ApiClient minter(nodes[0]->url(), "ops", admin);
  std::vector<double> took;
  // Repeated: without the confirmation a call racing the notification (about 2 ms) would be
  // let through by another node now and then.
  for (int round = 0; round < 20; ++round) {
    auto m = minter.send("POST", "/v1/admin/tokens", R"({"ns":"ops","role":"writer"})");
    ASSERT_EQ(m.status, 201) << m.body;
    const std::string id = m.str("id"), secret = m.str("token");
    std::vector<std::unique_ptr<ApiClient>> users;
    for (auto& n : nodes) {
      users.push_back(std::make_unique<ApiClient>(n->url(), "ops", secret));
      ASSERT_EQ(users.back()->send("GET", "/v1/ns/ops/counters").status, 200);  // known everywhere
    }
    const auto t0 = steady::now();
    auto del = minter.send("DELETE", "/v1/admin/tokens/" + id);
    ASSERT_EQ(del.status, 200) << del.body;
    took.push_back(Ms(steady::now() - t0));
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      EXPECT_EQ(users[i]->send("GET", "/v1/ns/ops/counters").status, 401)
          << "round " << round << ", node " << i << " still took the revoked token";
    }
  }
  std::sort(took.begin(), took.end());
  std::printf("[ figures  ] HTTP revoke on 3 nodes: p50 %.1f ms, max %.1f ms (20 rounds)\n",
              took[took.size() / 2], took.back());
}

// Decision 077 from the other side: a live node that cannot confirm (frozen: SIGSTOP) holds the
// revoke's answer until its heartbeat lease lapses (3 s at most), then the answer comes anyway,
// and the node refuses the token as soon as it runs again.
TEST(Nodes, ARevokeWaitsForAFrozenNodeAtMostUntilItsHeartbeatLapses) {
  TempDir dir;
  ServerProcess a(dir.path() + "/a", {}, /*auth=*/true);
  ServerProcess b(dir.path() + "/b", {}, /*auth=*/true);
  b.share_store(a);
  std::string err;
  ASSERT_TRUE(a.start(&err)) << err;
  ASSERT_TRUE(b.start(&err)) << err;
  auto [code, admin] = run_command(std::string(ichido_binary()) + " token create " +
                                   a.store_args() + " --ns '*' --role admin");
  ASSERT_EQ(code, 0) << admin;
  ApiClient minter(a.url(), "ops", admin);
  auto m = minter.send("POST", "/v1/admin/tokens", R"({"ns":"ops","role":"writer"})");
  ASSERT_EQ(m.status, 201) << m.body;
  ApiClient on_b(b.url(), "ops", m.str("token"));
  ASSERT_EQ(on_b.send("GET", "/v1/ns/ops/counters").status, 200);
  ASSERT_EQ(::kill(b.pid(), SIGSTOP), 0);
  const auto t0 = steady::now();
  auto del = minter.send("DELETE", "/v1/admin/tokens/" + m.str("id"));
  const double waited_ms = Ms(steady::now() - t0);
  ASSERT_EQ(::kill(b.pid(), SIGCONT), 0);
  ASSERT_EQ(del.status, 200) << del.body;
  EXPECT_GE(waited_ms, 1000) << "the answer did not wait for the frozen node";
  EXPECT_LT(waited_ms, 6000);
  Reply rb;
  EXPECT_TRUE(eventually([&] {
    rb = on_b.send("GET", "/v1/ns/ops/counters");
    return rb.status == 401;
  })) << rb.status;
  std::printf("[ figures  ] revoke with a frozen node answered after %.0f ms\n", waited_ms);
}

}  // namespace
}  // namespace ichido::testing
