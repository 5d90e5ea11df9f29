// Counters end to end: the real binary, real sockets, real concurrent clients, real kill -9.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "api_client.h"
#include "server_process.h"

namespace ichido::testing {
namespace {

class CountersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string err;
    ASSERT_TRUE(server_.start(&err)) << err;
  }
  std::string data_dir() const { return dir_.path() + "/data"; }

  // Everything the API can show about namespace t: counters and every period's audit trail.
  std::string snapshot() {
    ApiClient api(server_.url());
    std::string out = api.send("GET", "/v1/ns/t/counters").body;
    auto list = boost::json::parse(out);
    for (const auto& c : list.at("items").as_array()) {
      const std::string name(c.at("name").as_string());
      std::int64_t after = 0;
      for (;;) {
        auto page = api.send(
            "GET", api.counter_path(name) + "/issued?limit=1000&after=" + std::to_string(after));
        out += page.body;
        if (!page.json.as_object().contains("next_after")) break;
        after = page.num("next_after");
      }
    }
    return out;
  }

  TempDir dir_;
  ServerProcess server_{dir_.path() + "/data"};
};

constexpr int kClients = 16;
constexpr int kPerClient = 250;

TEST_F(CountersTest, ConcurrentClientsGetEveryNumberExactlyOnceAndReplaysAreStable) {
  ApiClient admin(server_.url());
  ASSERT_EQ(
      admin.create("receipts", R"({"start":100,"format":"R-{seq:5}","require_key":true})").status,
      201);

  std::mutex mu;
  std::map<std::string, std::int64_t> by_key;
  std::map<std::int64_t, int> seen;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      ApiClient api(server_.url());
      for (int i = 0; i < kPerClient; ++i) {
        const std::string key = "form-" + std::to_string(c) + "-" + std::to_string(i);
        auto r = api.next("receipts", key);
        if (r.status != 200 || r.at("replayed").as_bool()) {
          failures.fetch_add(1);
          continue;
        }
        char want[16];
        std::snprintf(want, sizeof want, "R-%05lld", static_cast<long long>(r.num("value")));
        if (r.str("formatted") != want || r.str("key") != key) failures.fetch_add(1);
        std::lock_guard lk(mu);
        by_key[key] = r.num("value");
        seen[r.num("value")] += 1;
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(failures.load(), 0);
  ASSERT_EQ(seen.size(), static_cast<std::size_t>(kClients * kPerClient));
  EXPECT_EQ(seen.begin()->first, 101);
  EXPECT_EQ(seen.rbegin()->first, 100 + kClients * kPerClient);
  for (const auto& [v, n] : seen) ASSERT_EQ(n, 1) << "value " << v << " issued " << n << " times";

  // Replaying every key, again concurrently, gives the same answer with replayed: true.
  std::atomic<int> mismatches{0};
  threads.clear();
  std::vector<std::pair<std::string, std::int64_t>> all(by_key.begin(), by_key.end());
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      ApiClient api(server_.url());
      for (std::size_t i = c; i < all.size(); i += kClients) {
        auto r = api.next("receipts", all[i].first);
        if (r.status != 200 || !r.at("replayed").as_bool() || r.num("value") != all[i].second) {
          mismatches.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);

  auto info = admin.get("receipts");
  EXPECT_EQ(info.num("last_value"), 100 + kClients * kPerClient);
  EXPECT_EQ(info.num("issued_count"), kClients * kPerClient);
}

TEST_F(CountersTest, KillNineLosesNoAnsweredNumberAndRetriesNeverDuplicate) {
  ApiClient admin(server_.url());
  ASSERT_EQ(admin.create("inv", R"({"require_key":true})").status, 201);

  std::mutex mu;
  std::map<std::string, std::int64_t> answered;  // key -> value the client was told
  std::set<std::string> unanswered;              // sent, but no answer arrived
  std::atomic<int> answers{0};
  std::atomic<bool> crashed{false};
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      ApiClient api(server_.url());
      for (int i = 0; i < 100000 && !crashed.load(); ++i) {
        const std::string key = "mail-" + std::to_string(c) + "-" + std::to_string(i);
        auto r = api.next("inv", key);
        std::lock_guard lk(mu);
        if (r.status == 200) {
          answered[key] = r.num("value");
          answers.fetch_add(1);
        } else {
          unanswered.insert(key);
          break;  // the server is gone
        }
      }
    });
  }
  // Crash once plenty of answers are out and requests are still in flight.
  while (answers.load() < 1500) std::this_thread::yield();
  server_.kill9();
  crashed.store(true);
  for (auto& t : threads) t.join();
  ASSERT_GE(answered.size(), 1500u);

  std::string err;
  ASSERT_TRUE(server_.start(&err)) << err;
  ApiClient api(server_.url());
  std::int64_t max_answered = 0;
  for (const auto& [key, value] : answered) {
    auto r = api.issued_by_key("inv", key);
    ASSERT_EQ(r.status, 200);
    ASSERT_EQ(r.at("items").as_array().size(), 1u) << "answered key " << key << " was lost";
    ASSERT_EQ(r.at("items").as_array()[0].at("value").to_number<std::int64_t>(), value);
    max_answered = std::max(max_answered, value);
  }
  auto info = api.get("inv");
  EXPECT_GE(info.num("last_value"), max_answered);

  // Callers whose answer was lost retry with the same key: each gets one number, consistent with
  // whatever the crash left (replayed if it was committed, new otherwise).
  for (const auto& key : unanswered) {
    auto r = api.next("inv", key);
    ASSERT_EQ(r.status, 200);
  }
  auto fresh = api.next("inv", "after-restart");
  ASSERT_EQ(fresh.status, 200);

  // The whole trail: values 1..last without gaps or duplicates, keys unique.
  std::set<std::int64_t> values;
  std::set<std::string> keys;
  std::int64_t after = 0;
  for (;;) {
    auto page = api.send(
        "GET", api.counter_path("inv") + "/issued?limit=1000&after=" + std::to_string(after));
    ASSERT_EQ(page.status, 200);
    for (const auto& it : page.at("items").as_array()) {
      ASSERT_TRUE(values.insert(it.at("value").to_number<std::int64_t>()).second);
      ASSERT_TRUE(keys.insert(std::string(it.at("key").as_string())).second);
    }
    if (!page.json.as_object().contains("next_after")) break;
    after = page.num("next_after");
  }
  const auto last = api.get("inv").num("last_value");
  EXPECT_EQ(fresh.num("value"), last);
  EXPECT_EQ(values.size(), static_cast<std::size_t>(last));
  EXPECT_EQ(*values.begin(), 1);
  EXPECT_EQ(*values.rbegin(), last);
}

// (Malformed input of every kind is covered by bad_input_test.cc.)
TEST_F(CountersTest, ExhaustionAndMissingCountersChangeNothing) {
  ApiClient api(server_.url());
  ASSERT_EQ(api.create("small", R"({"max":3,"format":"S-{seq}"})").status, 201);
  for (int i = 1; i <= 3; ++i) ASSERT_EQ(api.next("small", "k" + std::to_string(i)).status, 200);
  const std::string before = snapshot();

  auto exhausted = api.next("small", "k4");
  EXPECT_EQ(exhausted.status, 409);
  EXPECT_EQ(exhausted.error_code(), "counter_exhausted");
  // A key that was answered before exhaustion still replays.
  auto replay = api.next("small", "k2");
  EXPECT_EQ(replay.status, 200);
  EXPECT_EQ(replay.num("value"), 2);
  EXPECT_TRUE(replay.at("replayed").as_bool());

  auto missing = api.next("nothing-here", "k");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.error_code(), "counter_not_found");
  EXPECT_EQ(api.get("nothing-here").error_code(), "counter_not_found");

  EXPECT_EQ(snapshot(), before) << "a rejected request changed state";
}

TEST_F(CountersTest, SigtermShutsDownCleanlyAndKeepsData) {
  ApiClient api(server_.url());
  ASSERT_EQ(api.create("r", "{}").status, 201);
  ASSERT_EQ(api.next("r", "a").num("value"), 1);
  EXPECT_EQ(server_.stop(), 0);
  EXPECT_NE(server_.log().find("stopped cleanly"), std::string::npos) << server_.log();
  std::string err;
  ASSERT_TRUE(server_.start(&err)) << err;
  ApiClient again(server_.url());
  EXPECT_EQ(again.next("r", "b").num("value"), 2);
  EXPECT_EQ(again.next("r", "a").num("value"), 1);
}

TEST_F(CountersTest, HealthReadinessAndMetrics) {
  ApiClient api(server_.url());
  EXPECT_EQ(api.send("GET", "/healthz").status, 200);
  EXPECT_EQ(api.send("GET", "/readyz").status, 200);
  ASSERT_EQ(api.create("m", "{}").status, 201);
  ASSERT_EQ(api.next("m", "x").status, 200);
  auto m = api.send("GET", "/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("ichido_store_commits_total "), std::string::npos);
  // The embedded store's WAL (decision 136); a PostgreSQL store has none of ours to show.
  EXPECT_EQ(m.body.find("\nichido_store_wal_bytes ") != std::string::npos, !on_postgres());
  EXPECT_NE(m.body.find("ichido_http_responses_total{code=\"201\"} 1"), std::string::npos);
}

// A replayed key whose number was voided since says so, instead of handing out a number the
// operator withdrew as if it were good.
TEST_F(CountersTest, AReplayOfAVoidedNumberSaysItWasVoided) {
  ApiClient api(server_.url());
  ASSERT_EQ(api.create("inv", R"({"format":"I-{seq:3}"})").status, 201);
  auto first = api.next("inv", "order-7");
  ASSERT_EQ(first.status, 200);
  EXPECT_FALSE(first.json.as_object().contains("voided_at"));
  auto v = api.send("POST", api.counter_path("inv") + "/void",
                    R"({"value":1,"reason":"order cancelled"})");
  ASSERT_EQ(v.status, 200) << v.body;
  auto replay = api.next("inv", "order-7");
  ASSERT_EQ(replay.status, 200);
  EXPECT_TRUE(replay.at("replayed").as_bool());
  EXPECT_EQ(replay.str("formatted"), "I-001");
  EXPECT_EQ(replay.str("voided_at"), v.str("voided_at"));
  EXPECT_EQ(replay.str("void_reason"), "order cancelled");
}

}  // namespace
}  // namespace ichido::testing
