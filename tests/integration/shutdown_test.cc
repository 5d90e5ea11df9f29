// SIGTERM with requests parked on a lock and on a once record: each is answered at once with its
// normal "not now" answer (acquired: false with the holder, outcome: in_progress), then the
// server exits 0 — instead of cutting them off with an empty reply after the drain timeout.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include "api_client.h"
#include "server_process.h"
#include "test_util.h"

namespace ichido::testing {
namespace {

namespace json = boost::json;
using std::chrono::milliseconds;

Reply post(ApiClient& api, const std::string& path, const json::object& body, int wait_ms) {
  cli::Request req{"POST", path, json::serialize(body), {}};
  req.read_timeout = milliseconds(wait_ms + 20000);
  return to_reply(api.raw().send(req));
}

TEST(Shutdown, ParkedWaitersGetTheirNotNowAnswerAndTheServerExitsCleanly) {
  TempDir dir;
  // A drain timeout far longer than the test allows: only a prompt answer passes.
  ServerProcess server(dir.path() + "/data", {"--drain-timeout-ms", "60000"});
  std::string err;
  ASSERT_TRUE(server.start(&err)) << err;
  ApiClient api(server.url());
  auto held = post(api, "/v1/ns/t/locks/l/acquire", {{"owner", "H"}, {"lease_ms", 60000}}, 0);
  ASSERT_TRUE(held.at("acquired").as_bool());
  auto begun =
      post(api, "/v1/ns/t/once/begin", {{"key", "m"}, {"owner", "H"}, {"lease_ms", 60000}}, 0);
  ASSERT_EQ(begun.str("outcome"), "acquired");

  Reply lock_answer, once_answer;
  std::thread lock_waiter([&] {
    ApiClient c(server.url());
    lock_answer =
        post(c, "/v1/ns/t/locks/l/acquire", {{"owner", "W"}, {"wait_ms", 120000}}, 120000);
  });
  std::thread once_waiter([&] {
    ApiClient c(server.url());
    once_answer = post(c, "/v1/ns/t/once/begin", {{"key", "m"}, {"wait_ms", 120000}}, 120000);
  });
  ASSERT_TRUE(eventually([&] {
    auto l = api.send("GET", "/v1/ns/t/locks/l");
    auto m = api.send("GET", "/metrics");
    return l.status == 200 && l.num("waiters") == 1 &&
           m.body.find("ichido_once_waiters 1") != std::string::npos;
  }));
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(server.pid(), SIGTERM), 0);
  lock_waiter.join();
  once_waiter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  ASSERT_EQ(lock_answer.status, 200) << lock_answer.transport_error << lock_answer.body;
  EXPECT_FALSE(lock_answer.at("acquired").as_bool());
  EXPECT_EQ(lock_answer.at("holder").at("owner").as_string(), "H");
  ASSERT_EQ(once_answer.status, 200) << once_answer.transport_error << once_answer.body;
  EXPECT_EQ(once_answer.str("outcome"), "in_progress");
  EXPECT_EQ(once_answer.str("owner"), "H");
  EXPECT_EQ(server.wait_exit(), 0) << server.log();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace ichido::testing
