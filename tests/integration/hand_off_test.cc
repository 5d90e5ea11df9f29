// Hand-offs between waiters, end to end over the real binary (both stores):
//   - a grant made for a waiter whose client left before the grant was answered is undone and
//     goes to the next waiter (service/once_service.h H2, service/lock_service.h W5) — whatever
//     thread ran the grant's commit;
//   - waiters follow the current holder: when an item or a lock passes to a waiter with a shorter
//     lease, the others wake when that lease lapses, not when the previous holder's would have.
// Leases are real (1 s, the smallest API.md allows) where the lease's end is what is tested.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include "api_client.h"
#include "raw_client.h"
#include "server_process.h"
#include "test_util.h"

namespace ichido::testing {
namespace {

namespace json = boost::json;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

std::string post(const std::string& target, const json::object& body) {
  const std::string b = json::serialize(body);
  return "POST " + target + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
         "Content-Length: " + std::to_string(b.size()) + "\r\n\r\n" + b;
}

// The JSON body of the one HTTP answer in `bytes` (null when there is none).
json::value body_of(const std::string& bytes) {
  const auto at = bytes.find("\r\n\r\n");
  if (at == std::string::npos) return nullptr;
  boost::system::error_code ec;
  auto v = json::parse(bytes.substr(at + 4), ec);
  return ec ? json::value(nullptr) : v;
}

Reply send(ApiClient& api, const std::string& target, const json::object& body,
           milliseconds read_timeout = milliseconds(60000)) {
  cli::Request req{"POST", target, json::serialize(body), {}};
  req.read_timeout = read_timeout;
  return to_reply(api.raw().send(req));
}

class HandOff : public ::testing::Test {
 protected:
  void SetUp() override {
    // A slow disk (slow_sync.cc: every fsync waits 40 ms first), so that a grant's commit lasts
    // long enough for its client to leave during it; and more I/O threads than the test opens
    // connections, so that each connection has a thread of its own — on the embedded store a
    // lone client's write then runs on the thread that also watches its socket (decision 141).
    server_.set_env({{"LD_PRELOAD", ICHIDO_SLOW_SYNC_LIB}, {"ICHIDO_SLOW_SYNC_MS", "40"}});
    std::string err;
    ASSERT_TRUE(server_.start(&err)) << err;
    probe_.emplace(server_.url());
  }
  std::int64_t gauge(const std::string& name) {
    const std::string body = probe_->send("GET", "/metrics").body;
    const auto at = body.find("\n" + name + " ");
    return at == std::string::npos ? -1 : std::atoll(body.c_str() + at + name.size() + 2);
  }

  TempDir dir_;
  ServerProcess server_{dir_.path() + "/data", {"--threads", "32"}};
  std::optional<ApiClient> probe_;
};

// What a test saw of a waiter whose client left right after the holder let go.
struct Left {
  bool conclusive = false;  // the client left before any byte of an answer reached it
  std::string answer;       // what reached it after it left ("" when nothing: the right outcome)
};

// Shuts `w1`'s sending side down now — the client leaves, as one that closes its connection does
// (a server treats a half-close as going away) — and reads what still comes. The kernel's receive
// stamps tell whether an answer had arrived before it left: then this round shows nothing (the
// grant was answered before the client left: a lost answer, which request_id covers).
Left leave_now(RawConn& w1) {
  Left out;
  const std::int64_t left_at = RawConn::realtime_ns();
  w1.shutdown_write();
  std::int64_t first_at = 0;
  out.answer = w1.read_all_stamped(milliseconds(10000), &first_at);
  out.conclusive = out.answer.empty() || first_at > left_at;
  return out;
}

// In a round where the grant was answered after its client left, that grant stood for its lease:
// the next waiter's grant (lease `w2_lease_ms`, from the server's timestamps) must begin at or
// after the end of the lease answered to W1.
void expect_granted_after(const json::value& granted, const Reply& w2, std::int64_t w2_lease_ms,
                          int round) {
  const std::int64_t w1_end =
      rfc3339_to_ms(std::string(granted.at("lease_expires_at").as_string()));
  const std::int64_t w2_start = rfc3339_to_ms(w2.str("lease_expires_at")) - w2_lease_ms;
  ASSERT_GT(w1_end, 0) << json::serialize(granted);
  EXPECT_GE(w2_start, w1_end) << "round " << round << ": W2 was granted while the grant answered "
                              << "to W1 was live: " << json::serialize(granted) << " / " << w2.body;
}

// H holds an item, W1 then W2 wait for it; H fails it (retry). W1's client leaves as
// soon as H's answer has arrived — while the grant made for W1 commits. That grant is undone (the
// attempt is not spent) and the item goes to W2.
TEST_F(HandOff, AOnceGrantToAWaiterWhoseClientLeftDuringItsCommitGoesToTheNextWaiter) {
  ApiClient holder(server_.url());
  ApiClient w2_api(server_.url());
  int conclusive = 0, rounds = 0;
  for (int round = 0; round < 10 && conclusive < 2; ++round, ++rounds) {
    const std::string key = "<hand-off-" + std::to_string(round) + "@mail.example.co.jp>";
    auto begin = [&](const std::string& owner, std::int64_t lease_ms, std::int64_t wait_ms) {
      return json::object{{"key", key},
                          {"owner", owner},
                          {"lease_ms", lease_ms},
                          {"wait_ms", wait_ms},
                          {"max_attempts", 2}};
    };
    auto h = send(holder, "/v1/ns/t/once/begin", begin("H", 30000, 0));
    ASSERT_EQ(h.str("outcome"), "acquired") << h.body;
    RawConn w1(server_.port());
    ASSERT_TRUE(w1.ok());
    w1.stamp_receives();
    ASSERT_TRUE(w1.send(post("/v1/ns/t/once/begin", begin("W1", 1000, 15000))));
    ASSERT_TRUE(eventually([&] { return gauge("ichido_once_waiters") == 1; }));
    Reply w2;
    std::jthread t([&] { w2 = send(w2_api, "/v1/ns/t/once/begin", begin("W2", 60000, 5000)); });
    ASSERT_TRUE(eventually([&] { return gauge("ichido_once_waiters") == 2; }));
    auto f = send(
        holder, "/v1/ns/t/once/fail",
        json::object{{"key", key}, {"token", h.num("token")}, {"error", "retry"}, {"retry", true}});
    const Left left = leave_now(w1);
    if (!left.answer.empty() && left.conclusive) {
      // Answered after the client left: its end of stream arrived after the grant was decided
      // (service/client.h: a grant is undone only for a client gone by then), so the grant stands
      // for its lease, on the last attempt. W2 must not get the item while it is live: when that
      // lease lapses the record is dead, or (were it acquired) W2's lease begins after W1's ended.
      auto granted = body_of(left.answer);
      ASSERT_TRUE(granted.is_object()) << left.answer;
      ASSERT_EQ(granted.at("outcome").as_string(), "acquired") << left.answer;
      t.join();
      ASSERT_EQ(w2.status, 200) << w2.body << w2.transport_error;
      if (w2.str("outcome") == "acquired") {
        expect_granted_after(granted, w2, 60000, round);
      } else {
        EXPECT_EQ(w2.str("outcome"), "dead") << "round " << round << ": " << w2.body;
      }
      continue;
    }
    if (!left.conclusive) {
      // W1's grant reached it before it left: let W2 finish (it is answered "completed").
      auto granted = body_of(left.answer);
      ASSERT_TRUE(granted.is_object()) << left.answer;
      (void)send(holder, "/v1/ns/t/once/complete",
                 json::object{{"key", key},
                              {"token", granted.at("token").to_number<std::int64_t>()},
                              {"result", nullptr}});
      t.join();
      continue;
    }
    t.join();
    ++conclusive;
    ASSERT_EQ(f.status, 200) << f.body;
    EXPECT_EQ(f.str("outcome"), "pending");
    EXPECT_EQ(left.answer, "") << "a grant was answered to a client that had left (round " << round
                               << ")";
    ASSERT_EQ(w2.status, 200) << w2.body << w2.transport_error;
    EXPECT_EQ(w2.str("outcome"), "acquired") << "round " << round << ": " << w2.body;
    if (w2.str("outcome") == "acquired") {
      EXPECT_EQ(w2.num("attempt"), 2) << "the attempt of the undone grant was spent";
    }
    auto g = holder.send("GET", "/v1/ns/t/once?key=" + cli::percent_encode(key));
    EXPECT_EQ(g.str("state"), "processing") << g.body;
    EXPECT_EQ(g.str("owner"), "W2") << g.body;
    EXPECT_EQ(g.num("attempt"), 2) << g.body;
  }
  std::cout << "[ info ] " << conclusive << " of " << rounds
            << " rounds: the client left before any answer reached it\n";
  EXPECT_GE(conclusive, 1) << "in no round did the client leave before its grant was answered";
}

// The same for a lock: H releases, the lock is granted to W1 whose client leaves during that
// grant's commit; the grant is released again and the lock goes to W2.
TEST_F(HandOff, ALockGrantToAWaiterWhoseClientLeftDuringItsCommitGoesToTheNextWaiter) {
  ApiClient holder(server_.url());
  ApiClient w2_api(server_.url());
  int conclusive = 0, rounds = 0;
  for (int round = 0; round < 10 && conclusive < 2; ++round, ++rounds) {
    const std::string path = "/v1/ns/t/locks/invoice-run-" + std::to_string(round);
    auto acquire = [&](const std::string& owner, std::int64_t lease_ms, std::int64_t wait_ms) {
      return json::object{{"owner", owner}, {"lease_ms", lease_ms}, {"wait_ms", wait_ms}};
    };
    auto h = send(holder, path + "/acquire", acquire("H", 30000, 0));
    ASSERT_TRUE(h.at("acquired").as_bool()) << h.body;
    RawConn w1(server_.port());
    ASSERT_TRUE(w1.ok());
    w1.stamp_receives();
    ASSERT_TRUE(w1.send(post(path + "/acquire", acquire("W1", 1000, 15000))));
    ASSERT_TRUE(eventually([&] { return gauge("ichido_lock_waiters") == 1; }));
    Reply w2;
    std::jthread t([&] { w2 = send(w2_api, path + "/acquire", acquire("W2", 60000, 5000)); });
    ASSERT_TRUE(eventually([&] { return gauge("ichido_lock_waiters") == 2; }));
    auto r = send(holder, path + "/release", json::object{{"token", h.num("token")}});
    const Left left = leave_now(w1);
    if (!left.answer.empty()) {
      auto granted = body_of(left.answer);
      ASSERT_TRUE(granted.is_object()) << left.answer;
      if (left.conclusive) {
        // Answered after the client left: its end of stream arrived after the grant was decided
        // (service/client.h: a grant is undone only for a client gone by then), so the grant
        // stands for its lease. It must not overlap W2's: W2 is granted after it lapsed.
        t.join();
        ASSERT_EQ(w2.status, 200) << w2.body << w2.transport_error;
        ASSERT_TRUE(w2.at("acquired").as_bool()) << "round " << round << ": " << w2.body;
        expect_granted_after(granted, w2, 60000, round);
        (void)send(holder, path + "/release", json::object{{"token", w2.num("token")}});
        continue;
      }
      (void)send(holder, path + "/release",
                 json::object{{"token", granted.at("token").to_number<std::int64_t>()}});
      t.join();
      if (w2.status == 200 && w2.at("acquired").as_bool()) {
        (void)send(holder, path + "/release", json::object{{"token", w2.num("token")}});
      }
      continue;
    }
    t.join();
    ++conclusive;  // W1 left, and nothing was answered to it
    ASSERT_EQ(r.status, 200) << r.body;
    ASSERT_EQ(w2.status, 200) << w2.body << w2.transport_error;
    EXPECT_TRUE(w2.at("acquired").as_bool()) << "round " << round << ": " << w2.body;
    auto g = holder.send("GET", path);
    EXPECT_TRUE(g.at("held").as_bool()) << g.body;
    if (g.at("held").as_bool()) {
      EXPECT_EQ(g.str("owner"), "W2") << g.body;
    }
  }
  std::cout << "[ info ] " << conclusive << " of " << rounds
            << " rounds: the client left and nothing was answered to it\n";
  EXPECT_GE(conclusive, 1) << "in no round was a grant to a client that left undone";
}

// W2 waits while H holds an item with a 30 s lease; the item passes to W1 with a
// 1 s lease (H fails it; W1 waited longer) and W1 never finishes. W2 is answered when W1's lease
// lapses, not at H's lease end or its own wait_ms.
TEST_F(HandOff, AOnceWaiterFollowsTheLeaseOfTheHolderAfterAHandOff) {
  const std::string key = "<follow-the-lease@mail.example.co.jp>";
  ApiClient holder(server_.url());
  auto begin = [&](const std::string& owner, std::int64_t lease_ms, std::int64_t wait_ms) {
    return json::object{
        {"key", key}, {"owner", owner}, {"lease_ms", lease_ms}, {"wait_ms", wait_ms}};
  };
  auto h = send(holder, "/v1/ns/t/once/begin", begin("H", 30000, 0));
  ASSERT_EQ(h.str("outcome"), "acquired") << h.body;
  Reply w1, w2;
  steady::time_point w1_at, w2_at;
  std::jthread t1([&] {
    ApiClient c(server_.url());
    w1 = send(c, "/v1/ns/t/once/begin", begin("W1", 1000, 20000));
    w1_at = steady::now();
  });
  ASSERT_TRUE(eventually([&] { return gauge("ichido_once_waiters") == 1; }));
  std::jthread t2([&] {
    ApiClient c(server_.url());
    w2 = send(c, "/v1/ns/t/once/begin", begin("W2", 60000, 20000));
    w2_at = steady::now();
  });
  ASSERT_TRUE(eventually([&] { return gauge("ichido_once_waiters") == 2; }));
  ASSERT_EQ(
      send(holder, "/v1/ns/t/once/fail",
           json::object{{"key", key}, {"token", h.num("token")}, {"error", "x"}, {"retry", true}})
          .status,
      200);
  t1.join();
  ASSERT_EQ(w1.str("outcome"), "acquired") << w1.body;
  t2.join();
  ASSERT_EQ(w2.status, 200) << w2.body << w2.transport_error;
  EXPECT_EQ(w2.str("outcome"), "acquired") << w2.body;
  const auto after = std::chrono::duration_cast<milliseconds>(w2_at - w1_at).count();
  EXPECT_LT(after, 1500) << "W2 was answered " << after << " ms after W1's 1 s lease began";
  if (w2.str("outcome") == "acquired") {
    EXPECT_GT(w2.num("token"), w1.num("token"));
    EXPECT_EQ(w2.num("attempt"), 3);
  }
}

// The same for a lock: H (30 s lease) releases, W1 gets it with a 1 s lease and never releases;
// W2 gets it when that lease lapses.
TEST_F(HandOff, ALockWaiterFollowsTheLeaseOfTheHolderAfterAHandOff) {
  const std::string path = "/v1/ns/t/locks/follow-the-lease";
  ApiClient holder(server_.url());
  auto acquire = [&](const std::string& owner, std::int64_t lease_ms, std::int64_t wait_ms) {
    return json::object{{"owner", owner}, {"lease_ms", lease_ms}, {"wait_ms", wait_ms}};
  };
  auto h = send(holder, path + "/acquire", acquire("H", 30000, 0));
  ASSERT_TRUE(h.at("acquired").as_bool()) << h.body;
  Reply w1, w2;
  steady::time_point w1_at, w2_at;
  std::jthread t1([&] {
    ApiClient c(server_.url());
    w1 = send(c, path + "/acquire", acquire("W1", 1000, 20000));
    w1_at = steady::now();
  });
  // Queued in the store, not only parked here: on PostgreSQL a waiter parks before its place in
  // the store's line is committed (lock_service.h D2), and the line's order is the store's.
  auto queued = [&](std::int64_t n) {
    return eventually([&] {
      boost::system::error_code ec;
      const auto r = json::parse(probe_->send("GET", path).body, ec);
      return !ec && r.is_object() && r.as_object().contains("waiters") &&
             r.at("waiters").as_int64() == n && gauge("ichido_lock_waiters") == n;
    });
  };
  ASSERT_TRUE(queued(1));
  std::jthread t2([&] {
    ApiClient c(server_.url());
    w2 = send(c, path + "/acquire", acquire("W2", 60000, 20000));
    w2_at = steady::now();
  });
  ASSERT_TRUE(queued(2));
  ASSERT_EQ(send(holder, path + "/release", json::object{{"token", h.num("token")}}).status, 200);
  t1.join();
  ASSERT_TRUE(w1.at("acquired").as_bool()) << w1.body;
  t2.join();
  ASSERT_EQ(w2.status, 200) << w2.body << w2.transport_error;
  EXPECT_TRUE(w2.at("acquired").as_bool()) << w2.body;
  const auto after = std::chrono::duration_cast<milliseconds>(w2_at - w1_at).count();
  EXPECT_LT(after, 1500) << "W2 was answered " << after << " ms after W1's 1 s lease began";
}

}  // namespace
}  // namespace ichido::testing
