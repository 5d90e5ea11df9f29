// Every admin call is audited, and an admin mutation never takes effect without its audit entry:
// the entry is written in the same transaction as the effect. Driven through Api::handle over the
// in-memory store, whose audit inserts can be made to fail.
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>
#include <functional>
#include <optional>
#include <string>

#include "http/api.h"
#include "http/server.h"
#include "service/token_auth.h"
#include "store/memory/memory_store.h"
#include "store/testing/forwarding_store.h"

namespace ichido::http {
namespace {

namespace json = boost::json;
using verb = beast_http::verb;

class AuditTest : public ::testing::Test {
 public:  // the cases' lambdas call these
  struct Answer {
    unsigned status = 0;
    json::value body;
  };
  Answer Call(verb v, const std::string& target, const std::string& body = "") {
    BeastRequest req{v, target, 11};
    req.body() = body;
    std::optional<::ichido::http::Answer> res;
    boost::asio::co_spawn(
        ioc_,
        [&]() -> boost::asio::awaitable<void> { res = co_await api_.handle(req, "1.2.3.4:5"); },
        boost::asio::detached);
    ioc_.run();
    ioc_.restart();
    EXPECT_TRUE(res.has_value());
    Answer a;
    if (!res) return a;
    a.status = res->result_int();
    boost::system::error_code ec;
    a.body = json::parse(res->body(), ec);
    return a;
  }
  json::array Audit() {
    auto a = Call(verb::get, "/v1/admin/audit?limit=1000");
    EXPECT_EQ(a.status, 200u);
    return a.body.at("items").as_array();
  }

  ManualClock clock_{1'780'000'000'000};
  store::memory::MemoryStore store_{&clock_};
  Metrics metrics_;
  Api api_{store_, metrics_, ApiOptions{.clock = &clock_}};
  boost::asio::io_context ioc_;
};

struct Mutation {
  const char* name;
  std::function<void(AuditTest&)> setup;  // makes the mutation possible
  verb method;
  std::string target;
  std::string body;
  unsigned success;
  std::function<bool(AuditTest&)> took_effect;
};

// Each admin mutation: with audit writes failing it answers 503 and changes nothing; with audit
// writes working it succeeds with exactly one entry naming it and its status.
TEST_F(AuditTest, AnAdminMutationNeverTakesEffectWithoutItsAuditEntry) {
  // Each case has its own counter, key or lock, so the cases do not interfere.
  auto counter = [](const std::string& n) { return "/v1/ns/shop/counters/" + n; };
  auto make_counter = [counter](const std::string& n) {
    return [counter, n](AuditTest& t) {
      ASSERT_EQ(t.Call(verb::put, counter(n), R"({"max":100})").status, 201u);
    };
  };
  std::vector<Mutation> cases = {
      {"create counter", [](AuditTest&) {}, verb::put, counter("c1"), R"({"max":100})", 201,
       [counter](AuditTest& t) { return t.Call(verb::get, counter("c1")).status == 200; }},
      {"void",
       [counter, make_counter](AuditTest& t) {
         make_counter("c2")(t);
         ASSERT_EQ(t.Call(verb::post, counter("c2") + "/next", R"({"key":"k1"})").status, 200u);
       },
       verb::post, counter("c2") + "/void", R"({"value":1,"reason":"x"})", 200,
       [counter](AuditTest& t) {
         auto r = t.Call(verb::get, counter("c2") + "/issued?key=k1");
         return !r.body.at("items").as_array()[0].at("voided_at").is_null();
       }},
      {"set", make_counter("c3"), verb::post, counter("c3") + "/set",
       R"({"expected_last_value":0,"last_value":50})", 200,
       [counter](AuditTest& t) {
         return t.Call(verb::get, counter("c3")).body.at("last_value").as_int64() == 50;
       }},
      {"reset",
       [](AuditTest& t) {
         ASSERT_EQ(t.Call(verb::post, "/v1/ns/shop/once/begin", R"({"key":"m"})").status, 200u);
       },
       verb::post, "/v1/ns/shop/once/reset", R"({"key":"m"})", 200,
       [](AuditTest& t) { return t.Call(verb::get, "/v1/ns/shop/once?key=m").status == 404; }},
      {"force-release",
       [](AuditTest& t) {
         ASSERT_EQ(t.Call(verb::post, "/v1/ns/shop/locks/l/acquire", "{}").status, 200u);
       },
       verb::post, "/v1/ns/shop/locks/l/force-release", "{}", 200,
       [](AuditTest& t) {
         return !t.Call(verb::get, "/v1/ns/shop/locks/l").body.at("held").as_bool();
       }},
      {"token create", [](AuditTest&) {}, verb::post, "/v1/admin/tokens",
       R"({"ns":"shop","role":"reader"})", 201,
       [](AuditTest& t) {
         return !t.Call(verb::get, "/v1/admin/tokens").body.at("items").as_array().empty();
       }},
  };
  for (auto& m : cases) {
    SCOPED_TRACE(m.name);
    AuditTest& t = *this;
    m.setup(t);
    store_.fail_audit_inserts(true);
    auto refused = Call(m.method, m.target, m.body);
    EXPECT_EQ(refused.status, 503u) << json::serialize(refused.body);
    store_.fail_audit_inserts(false);
    EXPECT_FALSE(m.took_effect(t)) << "the effect landed without its audit entry";
    auto done = Call(m.method, m.target, m.body);
    EXPECT_EQ(done.status, m.success) << json::serialize(done.body);
    EXPECT_TRUE(m.took_effect(t));
    auto log = Audit();
    // The mutation's entry, then those of the audited reads made since (took_effect on tokens).
    bool found = false;
    for (const auto& e : log) {
      const auto& o = e.as_object();
      if (o.at("detail").as_string() == json::string(m.target.substr(0, m.target.find('?'))) &&
          o.at("status").as_int64() == m.success) {
        EXPECT_EQ(o.at("remote").as_string(), "1.2.3.4:5");
        EXPECT_EQ(o.at("actor").as_string(), "no-auth");
        EXPECT_FALSE(found) << "audited twice";
        found = true;
      }
    }
    EXPECT_TRUE(found) << "no audit entry for the mutation";
  }
}

TEST_F(AuditTest, AnAdminReadIsRefusedWhenItCannotBeAudited) {
  store_.fail_audit_inserts(true);
  auto r = Call(verb::get, "/v1/admin/tokens");
  EXPECT_EQ(r.status, 503u);
  EXPECT_EQ(r.body.at("error").at("code").as_string(), "store_unavailable");
}

TEST_F(AuditTest, AFailedAdminMutationIsAuditedWithItsStatus) {
  auto r = Call(verb::post, "/v1/ns/shop/counters/none/void", R"({"value":1})");
  EXPECT_EQ(r.status, 404u);
  auto log = Audit();
  ASSERT_GE(log.size(), 1u);
  EXPECT_EQ(log[0].at("status").as_int64(), 404);
  EXPECT_EQ(log[0].at("action").as_string(), "POST /v1/ns/{ns}/counters/{name}/void");
}

// A refused call's audit entry is fire and forget: the store is never told that the calling
// I/O thread may wait for its commit (decision 141), which would hold the refused client's answer
// back by an fsync; the thread's answer is back afterwards. An admin call that awaits its entry
// does offer the thread.
class OfferedStore final : public store_testing::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  std::vector<bool> offered;  // this_thread_serves_one_client() at each append_audit
  void append_audit(core::AuditEntry e, Callback<core::AuditEntry> d) override {
    offered.push_back(this_thread_serves_one_client());
    in_.append_audit(std::move(e), std::move(d));
  }
};

TEST(RefusedCallAudit, IsNeverCommittedOnTheCallersThread) {
  ManualClock clock{1'780'000'000'000};
  store::memory::MemoryStore inner{&clock};
  OfferedStore store{inner};
  service::Authenticator auth{store, clock};
  ASSERT_TRUE(auth.load_blocking().ok());
  Metrics metrics;
  Api api{store, metrics, ApiOptions{.auth = &auth, .clock = &clock}};
  boost::asio::io_context ioc;
  set_this_thread_serves_one_client(true);  // as an I/O thread with one connection
  BeastRequest req{verb::get, "/v1/ns/shop/counters", 11};
  req.set(beast_http::field::authorization, "Bearer not-a-token");
  std::optional<::ichido::http::Answer> res;
  boost::asio::co_spawn(
      ioc, [&]() -> boost::asio::awaitable<void> { res = co_await api.handle(req, "1.2.3.4:5"); },
      boost::asio::detached);
  ioc.run();
  ASSERT_TRUE(res.has_value());
  EXPECT_EQ(res->result_int(), 401u);
  EXPECT_TRUE(this_thread_serves_one_client()) << "the thread's answer is restored";
  set_this_thread_serves_one_client(false);
  EXPECT_EQ(store.offered, std::vector<bool>{false}) << "one entry, not offered the thread";
}

}  // namespace
}  // namespace ichido::http
