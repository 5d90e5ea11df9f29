// Tests of the route table (http/router): which route wins, the parameters it binds, and the
// 404 / 405 answers (with the Allow header listing the methods the path does accept).
#include "http/router.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ichido::http {
namespace {

using beast_http::verb;

// A handler that is never run: these tests only match.
Handler Unused() {
  return [](const Request&, const Params&) -> boost::asio::awaitable<Response> {
    co_return Response();
  };
}

Request Req(verb method, std::vector<std::string> segments) {
  Request r;
  r.method = method;
  r.method_string = std::string(beast_http::to_string(method));
  r.segments = std::move(segments);
  return r;
}

std::string AllowOf(const Match& m) {
  if (!m.error) return "(no error)";
  for (const auto& [k, v] : m.error->headers) {
    if (k == "Allow") return v;
  }
  return "(no Allow)";
}

class RouterTest : public testing::Test {
 protected:
  void SetUp() override {
    router_.add(verb::get, "/v1/ns/{ns}/counters/{name}", Unused());
    router_.add(verb::put, "/v1/ns/{ns}/counters/{name}", Unused());
    router_.add(verb::post, "/v1/ns/{ns}/counters/{name}/next", Unused());
    router_.add(verb::get, "/v1/ns/{ns}/counters/special", Unused());  // after {name}: never wins
    router_.add_admin(verb::delete_, "/v1/ns/{ns}/counters/{name}", Unused());
    router_.add(verb::get, "/healthz", Unused());
    router_.add(verb::get, "/", Unused());
  }
  Router router_;
};

TEST_F(RouterTest, TheFirstRouteWithTheMethodAndPathWinsAndBindsItsParameters) {
  auto m = router_.match(Req(verb::post, {"v1", "ns", "a", "counters", "c", "next"}));
  ASSERT_NE(m.route, nullptr);
  EXPECT_FALSE(m.error.has_value());
  EXPECT_EQ(m.route->pattern, "/v1/ns/{ns}/counters/{name}/next");
  EXPECT_EQ(m.params, (Params{{"ns", "a"}, {"name", "c"}}));

  m = router_.match(Req(verb::get, {"v1", "ns", "x", "counters", "special"}));
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.route->pattern, "/v1/ns/{ns}/counters/{name}");
  EXPECT_EQ(m.params, (Params{{"ns", "x"}, {"name", "special"}}));

  m = router_.match(Req(verb::delete_, {"v1", "ns", "x", "counters", "c"}));
  ASSERT_NE(m.route, nullptr);
  EXPECT_TRUE(m.route->admin());
  EXPECT_EQ(m.params.at("name"), "c");

  m = router_.match(Req(verb::get, {}));
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.route->pattern, "/");
  EXPECT_TRUE(m.params.empty());
}

TEST_F(RouterTest, APathServedOnlyWithOtherMethodsIs405WithThemAllInOrder) {
  auto m = router_.match(Req(verb::post, {"v1", "ns", "a", "counters", "c"}));
  EXPECT_EQ(m.route, nullptr);
  ASSERT_TRUE(m.error.has_value());
  EXPECT_EQ(m.error->status, 405u);
  EXPECT_EQ(AllowOf(m), "GET, PUT, DELETE");
  EXPECT_TRUE(m.params.empty());

  m = router_.match(Req(verb::get, {"v1", "ns", "a", "counters", "c", "next"}));
  ASSERT_TRUE(m.error.has_value());
  EXPECT_EQ(m.error->status, 405u);
  EXPECT_EQ(AllowOf(m), "POST");
}

TEST_F(RouterTest, AnUnknownPathIs404) {
  for (const auto& segs : std::vector<std::vector<std::string>>{
           {"v1", "ns", "a", "counters"},                    // too short
           {"v1", "ns", "a", "counters", "c", "next", "x"},  // too long
           {"v1", "ns", "a", "counter", "c"},                // a literal differs
           {"v2", "ns", "a", "counters", "c"},
           {"healthz", ""},
       }) {
    auto m = router_.match(Req(verb::get, segs));
    EXPECT_EQ(m.route, nullptr);
    ASSERT_TRUE(m.error.has_value());
    EXPECT_EQ(m.error->status, 404u);
    EXPECT_EQ(AllowOf(m), "(no Allow)");
  }
}

}  // namespace
}  // namespace ichido::http
