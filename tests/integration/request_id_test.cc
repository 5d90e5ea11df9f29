// request_id end to end (docs/API.md, "Retrying a claim whose answer was lost"): a claim whose
// answer is really lost on the way back — the server committed the grant and answered, a proxy
// dropped the answer — is retried with the same request_id and owner and gets the same grant again,
// at once, for lock acquire and once begin, with and without wait_ms, across a kill -9, after the
// lease lapsed (with and without a new holder). A different request_id is an ordinary claim.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "api_client.h"
#include "dropping_proxy.h"
#include "server_process.h"
#include "test_util.h"

namespace ichido::testing {
namespace {

namespace json = boost::json;
using std::chrono::milliseconds;

class RequestIdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string err;
    ASSERT_TRUE(server_.start(&err)) << err;
  }
  cli::BaseUrl proxied(const AnswerDroppingProxy& p) {
    cli::BaseUrl u = server_.url();
    u.port = p.port();
    return u;
  }
  static Reply post(ApiClient& api, const std::string& path, json::object body,
                    std::int64_t wait_ms = 0) {
    cli::Request req{"POST", path, json::serialize(body), {}};
    req.read_timeout = milliseconds(wait_ms + 20000);
    return to_reply(api.raw().send(req));
  }
  // The body of the answer the proxy swallowed.
  static json::object swallowed(const AnswerDroppingProxy& p) {
    const std::string a = p.last_answer();
    const auto body = a.find("\r\n\r\n");
    EXPECT_NE(body, std::string::npos) << a;
    EXPECT_EQ(a.rfind("HTTP/1.1 200", 0), 0u) << a;
    return json::parse(a.substr(body + 4)).as_object();
  }

  TempDir dir_;
  ServerProcess server_{dir_.path() + "/data", {"--threads", "2"}};
};

const std::string kLock = "/v1/ns/t/locks/receipt";
const std::string kOnce = "/v1/ns/t/once";

json::object acquire_body(const std::string& owner, const std::string& rid, std::int64_t wait_ms,
                          std::int64_t lease_ms = 30000) {
  return {{"owner", owner}, {"request_id", rid}, {"wait_ms", wait_ms}, {"lease_ms", lease_ms}};
}

json::object begin_body(const std::string& key, const std::string& owner, const std::string& rid,
                        std::int64_t wait_ms, std::int64_t lease_ms = 30000) {
  return {{"key", key},
          {"owner", owner},
          {"request_id", rid},
          {"wait_ms", wait_ms},
          {"lease_ms", lease_ms}};
}

TEST_F(RequestIdTest, ALostAcquireAnswerIsReplayedWithoutWaiting) {
  AnswerDroppingProxy proxy(server_.port());
  ASSERT_TRUE(proxy.ok());
  ApiClient lossy(proxied(proxy));
  ApiClient api(server_.url());
  auto lost = post(lossy, kLock + "/acquire", acquire_body("gas-A", "rid-1", 0));
  EXPECT_EQ(lost.status, 0) << "the answer must not arrive: " << lost.body;
  ASSERT_EQ(proxy.answers(), 1);
  auto granted = swallowed(proxy);
  ASSERT_TRUE(granted.at("acquired").as_bool());
  const auto token = granted.at("token").as_int64();

  // Someone else queues meanwhile: the retry still does not wait (behind them or for itself).
  std::thread other([&] {
    ApiClient b(server_.url());
    post(b, kLock + "/acquire", acquire_body("gas-B", "rid-B", 5000), 5000);
  });
  ASSERT_TRUE(eventually([&] {
    auto g = api.send("GET", kLock);
    return g.status == 200 && g.num("waiters") == 1;
  }));
  const auto start = std::chrono::steady_clock::now();
  auto retry = post(api, kLock + "/acquire", acquire_body("gas-A", "rid-1", 10000), 10000);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(2000));
  ASSERT_EQ(retry.status, 200) << retry.body;
  EXPECT_TRUE(retry.at("acquired").as_bool());
  EXPECT_EQ(retry.num("token"), token);
  EXPECT_TRUE(retry.at("replayed").as_bool());
  EXPECT_EQ(retry.str("lease_expires_at"), std::string(granted.at("lease_expires_at").as_string()));
  // The replayed grant is a real one: releasing it hands the lock to the waiter.
  auto rel = api.send("POST", kLock + "/release", json::serialize(json::object{{"token", token}}));
  EXPECT_EQ(rel.status, 200) << rel.body;
  other.join();
  auto g = api.send("GET", kLock);
  EXPECT_EQ(g.str("owner"), "gas-B");
}

TEST_F(RequestIdTest, ALostAcquireAnswerAfterAWaitIsReplayed) {
  ApiClient api(server_.url());
  auto holder = post(api, kLock + "/acquire", acquire_body("X", "rid-X", 0));
  ASSERT_TRUE(holder.at("acquired").as_bool());
  AnswerDroppingProxy proxy(server_.port());
  std::thread waiter([&] {
    ApiClient lossy(proxied(proxy));
    auto lost = post(lossy, kLock + "/acquire", acquire_body("gas-A", "rid-1", 20000), 20000);
    EXPECT_EQ(lost.status, 0) << lost.body;
  });
  ASSERT_TRUE(eventually([&] {
    auto g = api.send("GET", kLock);
    return g.status == 200 && g.num("waiters") == 1;
  }));
  auto rel = api.send("POST", kLock + "/release",
                      json::serialize(json::object{{"token", holder.num("token")}}));
  ASSERT_EQ(rel.status, 200);
  waiter.join();
  ASSERT_EQ(proxy.answers(), 1);
  auto granted = swallowed(proxy);
  ASSERT_TRUE(granted.at("acquired").as_bool()) << json::serialize(granted);
  // The lock is held by the waiter whose answer was lost: without request_id a retry waits.
  auto plain = post(api, kLock + "/acquire", json::object{{"owner", "gas-A"}, {"wait_ms", 0}});
  EXPECT_FALSE(plain.at("acquired").as_bool());
  auto retry = post(api, kLock + "/acquire", acquire_body("gas-A", "rid-1", 20000), 20000);
  ASSERT_EQ(retry.status, 200);
  EXPECT_TRUE(retry.at("replayed").as_bool());
  EXPECT_EQ(retry.num("token"), granted.at("token").as_int64());
}

TEST_F(RequestIdTest, ALostBeginAnswerIsReplayedWithTheSameTokenAndAttempt) {
  AnswerDroppingProxy proxy(server_.port());
  ApiClient lossy(proxied(proxy));
  ApiClient api(server_.url());
  const std::string key = "<CAF=x/y+z@mail.example.co.jp> 請求書";
  auto lost = post(lossy, kOnce + "/begin", begin_body(key, "outlook-A", "rid-1", 0));
  EXPECT_EQ(lost.status, 0);
  auto granted = swallowed(proxy);
  ASSERT_EQ(granted.at("outcome").as_string(), "acquired");
  for (std::int64_t wait_ms : {0, 5000}) {
    const auto start = std::chrono::steady_clock::now();
    auto retry =
        post(api, kOnce + "/begin", begin_body(key, "outlook-A", "rid-1", wait_ms), wait_ms);
    EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(2000));
    ASSERT_EQ(retry.status, 200) << retry.body;
    EXPECT_EQ(retry.str("outcome"), "acquired");
    EXPECT_TRUE(retry.at("replayed").as_bool());
    EXPECT_EQ(retry.num("token"), granted.at("token").as_int64());
    EXPECT_EQ(retry.num("attempt"), 1);
  }
  // Another request_id of the same owner is an ordinary second claim.
  auto second = post(api, kOnce + "/begin", begin_body(key, "outlook-A", "rid-2", 0));
  EXPECT_EQ(second.str("outcome"), "in_progress");
  EXPECT_EQ(second.str("owner"), "outlook-A");
  // The replayed holder completes; every later begin gets the result.
  auto done = api.send("POST", kOnce + "/complete",
                       json::serialize(json::object{{"key", key},
                                                    {"token", granted.at("token").as_int64()},
                                                    {"result", {{"ticket", "T-1"}}}}));
  ASSERT_EQ(done.status, 200) << done.body;
  auto after = post(api, kOnce + "/begin", begin_body(key, "outlook-A", "rid-1", 0));
  EXPECT_EQ(after.str("outcome"), "completed");
}

TEST_F(RequestIdTest, ALostBeginAnswerAfterAWaitIsReplayed) {
  ApiClient api(server_.url());
  const std::string key = "row-17";
  auto holder = post(api, kOnce + "/begin", begin_body(key, "gas-X", "rid-X", 0));
  ASSERT_EQ(holder.str("outcome"), "acquired");
  AnswerDroppingProxy proxy(server_.port());
  std::thread waiter([&] {
    ApiClient lossy(proxied(proxy));
    auto lost = post(lossy, kOnce + "/begin", begin_body(key, "gas-A", "rid-1", 20000), 20000);
    EXPECT_EQ(lost.status, 0) << lost.body;
  });
  ASSERT_TRUE(eventually([&] {
    auto m = api.send("GET", "/metrics");
    return m.body.find("ichido_once_waiters 1") != std::string::npos;
  }));
  auto failed = api.send(
      "POST", kOnce + "/fail",
      json::serialize(json::object{
          {"key", key}, {"token", holder.num("token")}, {"error", "boom"}, {"retry", true}}));
  ASSERT_EQ(failed.status, 200) << failed.body;
  waiter.join();
  auto granted = swallowed(proxy);
  ASSERT_EQ(granted.at("outcome").as_string(), "acquired") << json::serialize(granted);
  EXPECT_EQ(granted.at("attempt").as_int64(), 2);
  auto retry = post(api, kOnce + "/begin", begin_body(key, "gas-A", "rid-1", 20000), 20000);
  EXPECT_TRUE(retry.at("replayed").as_bool());
  EXPECT_EQ(retry.num("token"), granted.at("token").as_int64());
  EXPECT_EQ(retry.num("attempt"), 2) << "no new attempt";
}

TEST_F(RequestIdTest, TheGrantAndItsRequestIdSurviveAKillNine) {
  AnswerDroppingProxy proxy(server_.port());
  ApiClient lossy(proxied(proxy));
  auto lost = post(lossy, kLock + "/acquire", acquire_body("gas-A", "rid-1", 0));
  EXPECT_EQ(lost.status, 0);
  auto lost_once = post(lossy, kOnce + "/begin", begin_body("k", "gas-A", "rid-2", 0));
  EXPECT_EQ(lost_once.status, 0);
  ASSERT_EQ(proxy.answers(), 2);
  auto begun = swallowed(proxy);
  server_.kill9();
  std::string err;
  ASSERT_TRUE(server_.start(&err)) << err;
  ApiClient api(server_.url());
  auto retry = post(api, kLock + "/acquire", acquire_body("gas-A", "rid-1", 0));
  ASSERT_EQ(retry.status, 200) << retry.body;
  EXPECT_TRUE(retry.at("replayed").as_bool());
  auto retry_once = post(api, kOnce + "/begin", begin_body("k", "gas-A", "rid-2", 0));
  EXPECT_TRUE(retry_once.at("replayed").as_bool());
  EXPECT_EQ(retry_once.num("token"), begun.at("token").as_int64());
}

TEST_F(RequestIdTest, ALapsedGrantIsReplayedUntilSomeoneElseTakesIt) {
  ApiClient api(server_.url());
  auto first = post(api, kLock + "/acquire", acquire_body("gas-A", "rid-1", 0, 1000));
  ASSERT_TRUE(first.at("acquired").as_bool());
  auto b = post(api, kOnce + "/begin", begin_body("k", "gas-A", "rid-1", 0, 1000));
  ASSERT_EQ(b.str("outcome"), "acquired");
  ASSERT_TRUE(eventually([&] { return !api.send("GET", kLock).at("held").as_bool(); }));
  // Lapsed, nobody took over: replayed, with the (past) lease end, nothing changed.
  auto lapsed = post(api, kLock + "/acquire", acquire_body("gas-A", "rid-1", 0));
  EXPECT_TRUE(lapsed.at("replayed").as_bool());
  EXPECT_EQ(lapsed.num("token"), first.num("token"));
  EXPECT_EQ(lapsed.str("lease_expires_at"), first.str("lease_expires_at"));
  ASSERT_TRUE(eventually([&] {
    auto r = api.send("GET", kOnce + "?state=expired");
    return r.status == 200 && r.at("items").as_array().size() == 1;
  }));
  auto lapsed_once = post(api, kOnce + "/begin", begin_body("k", "gas-A", "rid-1", 0));
  EXPECT_TRUE(lapsed_once.at("replayed").as_bool());
  EXPECT_EQ(lapsed_once.num("attempt"), 1);
  // Someone else takes over: the old request_id matches nothing any more.
  auto b2 = post(api, kLock + "/acquire", acquire_body("gas-B", "rid-B", 0));
  ASSERT_TRUE(b2.at("acquired").as_bool());
  EXPECT_GT(b2.num("token"), first.num("token"));
  auto late = post(api, kLock + "/acquire", acquire_body("gas-A", "rid-1", 0));
  EXPECT_FALSE(late.at("acquired").as_bool());
  EXPECT_EQ(late.at("holder").at("owner").as_string(), "gas-B");
  auto once_b = post(api, kOnce + "/begin", begin_body("k", "gas-B", "rid-B", 0));
  ASSERT_EQ(once_b.str("outcome"), "acquired");
  EXPECT_EQ(once_b.num("attempt"), 2);
  auto late_once = post(api, kOnce + "/begin", begin_body("k", "gas-A", "rid-1", 0));
  EXPECT_EQ(late_once.str("outcome"), "in_progress");
}

TEST_F(RequestIdTest, ABadRequestIdIs400NamingTheField) {
  ApiClient api(server_.url());
  for (const auto& bad : {json::value(""), json::value(std::string(129, 'r')), json::value(7)}) {
    auto a = post(api, kLock + "/acquire", json::object{{"owner", "A"}, {"request_id", bad}});
    EXPECT_EQ(a.status, 400) << a.body;
    EXPECT_EQ(a.error_code(), "invalid_request");
    EXPECT_EQ(a.error_field(), "request_id");
    auto b = post(api, kOnce + "/begin", json::object{{"key", "k"}, {"request_id", bad}});
    EXPECT_EQ(b.status, 400) << b.body;
    EXPECT_EQ(b.error_field(), "request_id");
  }
  auto g = api.send("GET", kLock);
  EXPECT_FALSE(g.at("held").as_bool()) << "nothing changed";
  EXPECT_EQ(api.send("GET", kOnce + "?key=k").status, 404);
}

}  // namespace
}  // namespace ichido::testing
