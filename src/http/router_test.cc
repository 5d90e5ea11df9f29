// Tests of the route table (http/router): which route wins, the parameters it binds, and the
// 404 / 405 answers (with the Allow header listing the methods the path does accept).
#include "http/router.h"

#include <gtest/gtest.h>

#include <boost/url/parse.hpp>
#include <random>
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
  r.segments.assign(segments.begin(), segments.end());
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

// --- parse_target -------------------------------------------------------------------------

Request Parsed(std::string_view target) {
  Request r;
  auto ok = parse_target(target, r);
  EXPECT_TRUE(ok.ok()) << target;
  return r;
}

bool Invalid(std::string_view target) {
  Request r;
  r.path = "untouched";
  auto res = parse_target(target, r);
  if (res.ok()) return false;
  EXPECT_EQ(res.error().code, errc::invalid_request);
  EXPECT_EQ(r.path, "untouched") << "a refused target must not change the request";
  return true;
}

using Query = std::multimap<std::string, std::string>;

TEST(ParseTarget, SplitsTheRawPathIntoDecodedSegmentsAndKeepsTheRawPath) {
  auto r = Parsed("/v1/ns/bench/counters/bench/next");
  EXPECT_EQ(r.path, "/v1/ns/bench/counters/bench/next");
  EXPECT_EQ(r.segments, (Segments{"v1", "ns", "bench", "counters", "bench", "next"}));
  EXPECT_TRUE(r.query.empty());

  r = Parsed("/v1/ns/a%2Fb/counters/%E8%AB%8B%E6%B1%82");  // "%2F" stays inside its segment
  EXPECT_EQ(r.path, "/v1/ns/a%2Fb/counters/%E8%AB%8B%E6%B1%82");
  EXPECT_EQ(r.segments, (Segments{"v1", "ns", "a/b", "counters", "請求"}));
  EXPECT_EQ(Parsed("/a%2fb%20c+d%00").segments, (Segments{"a/b c+d" + std::string(1, '\0')}));
}

TEST(ParseTarget, EmptySegmentsAndTheRootAreKept) {
  EXPECT_TRUE(Parsed("/").segments.empty());
  EXPECT_EQ(Parsed("//").segments, (Segments{"", ""}));
  EXPECT_EQ(Parsed("/v1//ns/").segments, (Segments{"v1", "", "ns", ""}));
  EXPECT_EQ(Parsed("/.").segments, (Segments{"."}));
  EXPECT_EQ(Parsed("/../x").segments, (Segments{"..", "x"}));
  // As Boost.URL (which parsed targets before): a leading "/./" is a prefix, not a segment.
  EXPECT_EQ(Parsed("/./v1/x").segments, (Segments{"v1", "x"}));
  EXPECT_EQ(Parsed("/./v1/x").path, "/./v1/x");
  EXPECT_EQ(Parsed("/./").segments, (Segments{""}));
}

TEST(ParseTarget, DecodesTheQueryWithPlusAsSpace) {
  EXPECT_EQ(
      Parsed("/x?a=1&b=two+words&c=%2B&d&=e&a=x=y").query,
      (Query{{"a", "1"}, {"b", "two words"}, {"c", "+"}, {"d", ""}, {"", "e"}, {"a", "x=y"}}));
  EXPECT_EQ(Parsed("/x?").query, (Query{{"", ""}}));
  EXPECT_EQ(Parsed("/x?a&&").query, (Query{{"a", ""}, {"", ""}, {"", ""}}));
  EXPECT_EQ(Parsed("/x?k%3D=v%26w&q=/?:@").query, (Query{{"k=", "v&w"}, {"q", "/?:@"}}));
  auto r = Parsed("/v1/x?y=%E3%81%82");
  EXPECT_EQ(r.path, "/v1/x");
  EXPECT_EQ(r.segments, (Segments{"v1", "x"}));
  EXPECT_EQ(*r.param("y"), "あ");
}

TEST(ParseTarget, RefusesBadEscapesAndCharactersOutsideTheGrammar) {
  for (const char* t :
       {"",      "x",       "*",        "?a",   "/a%",     "/a%4",          "/a%G1",   "/a%4g/b",
        "/a?%",  "/a?b=%1", "/a?b=%zz", "/a b", "/a#frag", "/a?b#c",        "/a\"",    "/a<",
        "/a{b}", "/a|b",    "/a\\b",    "/a^",  "/a`",     "/\xE3\x81\x82", "/a?\x7F", "/a\tb"}) {
    EXPECT_TRUE(Invalid(t)) << t;
  }
  // Every sub-delim, ':' and '@' is allowed unencoded in a segment, and '/' and '?' in the query.
  EXPECT_EQ(Parsed("/!$&'()*+,;=:@-._~").segments, (Segments{"!$&'()*+,;=:@-._~"}));
  EXPECT_EQ(Parsed("/a?b=c?d/e").query, (Query{{"b", "c?d/e"}}));
}

// The reference: what parse_target answered when it was Boost.URL's parse_origin_form plus a
// decode of every segment and parameter.
std::optional<Request> BoostUrlParse(std::string_view target) {
  auto u = boost::urls::parse_origin_form(target);
  if (!u) return std::nullopt;
  Request out;
  const auto path = u->encoded_path();  // a view of `target`, as parse_target's
  out.path = std::string_view(path.data(), path.size());
  for (auto seg : u->encoded_segments()) out.segments.push_back(seg.decode());
  for (auto p : u->params()) out.query.emplace(p.key, p.has_value ? p.value : std::string());
  return out;
}

TEST(ParseTarget, AgreesWithBoostUrlOnRandomTargets) {
  // Short targets over an alphabet rich in the characters that matter, most starting with '/'.
  const std::string alphabet = "//////??&&==%%%%++..aZ09-_~!$'()*,;:@#[] \"<>\\^`{|}\x7F\x80\xE3";
  const std::string hex = "0123456789abcdefABCDEFgG";
  std::mt19937_64 rng(15);
  int valid = 0;
  for (int n = 0; n < 200000; ++n) {
    std::string t = rng() % 10 == 0 ? "" : "/";
    const int len = static_cast<int>(rng() % 16);
    for (int i = 0; i < len; ++i) {
      const char c = alphabet[rng() % alphabet.size()];
      t += c;
      if (c == '%' && rng() % 4 != 0) {  // mostly well-formed escapes, some broken ones
        t += hex[rng() % hex.size()];
        if (rng() % 8 != 0) t += hex[rng() % hex.size()];
      }
    }
    const auto want = BoostUrlParse(t);
    Request got;
    const bool ok = parse_target(t, got).ok();
    ASSERT_EQ(ok, want.has_value()) << t;
    if (!ok) continue;
    ++valid;
    ASSERT_EQ(got.path, want->path) << t;
    ASSERT_EQ(got.segments, want->segments) << t;
    ASSERT_EQ(got.query, want->query) << t;
  }
  EXPECT_GT(valid, 20000);  // enough of both kinds to mean something
  EXPECT_LT(valid, 180000);
}

}  // namespace
}  // namespace ichido::http
