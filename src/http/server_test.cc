// HttpServer over several io_contexts (decision 139): connections are spread over the ones given
// to serve_connections_on(), in turn, and every request on them is answered there.
#include "http/server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/fields.h"
#include "http/answer.h"
#include "http/api.h"
#include "http/json_fields.h"
#include "store/memory/memory_store.h"

namespace ichido::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;

TEST(HttpServerThreads, ConnectionsAreSpreadOverTheGivenContextsInTurn) {
  ManualClock clock{1'780'000'000'000};
  store::memory::MemoryStore store{&clock};
  Metrics metrics;
  Api api{store, metrics, ApiOptions{.clock = &clock}};
  asio::io_context listener(1), a(1), b(1);
  HttpServer server(listener, api, metrics, Limits{});
  server.serve_connections_on({&a, &b});
  auto ep = server.listen("127.0.0.1", 0);
  ASSERT_TRUE(ep.ok()) << ep.error().message;
  server.start();
  auto keep_a = asio::make_work_guard(a);
  auto keep_b = asio::make_work_guard(b);
  std::atomic<std::size_t> ran_a{0}, ran_b{0};
  std::vector<std::thread> threads;
  // Stops and joins the server's threads however the test ends (a client call that throws
  // included), so that no joinable thread outlives it.
  auto stop = [&] {
    keep_a.reset();
    keep_b.reset();
    listener.stop();
    a.stop();
    b.stop();
    for (auto& t : threads) t.join();
    threads.clear();
  };
  struct Stopper {
    decltype(stop)& f;
    ~Stopper() { f(); }
  } stopper{stop};
  threads.emplace_back([&] { listener.run(); });
  threads.emplace_back([&] { ran_a = a.run(); });
  threads.emplace_back([&] { ran_b = b.run(); });

  constexpr int kConnections = 4;
  constexpr int kRounds = 3;
  {
    asio::io_context client;
    std::vector<beast::tcp_stream> conns;
    for (int i = 0; i < kConnections; ++i) {
      conns.emplace_back(client);
      conns.back().connect(*ep);
    }
    for (int round = 0; round < kRounds; ++round) {
      for (auto& c : conns) {  // interleaved: each connection keeps its place on its thread
        beast::http::request<beast::http::empty_body> req{beast::http::verb::get, "/healthz", 11};
        req.set(beast::http::field::host, "127.0.0.1");
        beast::http::write(c, req);
        beast::flat_buffer buf;
        beast::http::response<beast::http::string_body> res;
        beast::http::read(c, buf, res);
        EXPECT_EQ(res.result_int(), 200u) << res.body();
      }
    }
  }
  server.begin_drain();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (server.active() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(server.active(), 0u);
  stop();
  // Two connections on each, three requests each: at least one handler per request there.
  EXPECT_GE(ran_a.load(), 2u * kRounds);
  EXPECT_GE(ran_b.load(), 2u * kRounds);
}

// Decision 142: the session watches the socket only of a request that may park, i.e. a lock
// acquire or once begin whose body may ask for wait_ms > 0.
BeastRequest post(std::string target, std::string body) {
  BeastRequest r{beast_http::verb::post, target, 11};
  r.body() = std::move(body);
  return r;
}

TEST(HttpSessionWatch, OnlyARequestThatMayParkIsWatched) {
  const std::string acquire = "/v1/ns/a/locks/l/acquire";
  const std::string begin = "/v1/ns/a/once/begin";
  for (const auto& target : {acquire, begin}) {
    SCOPED_TRACE(target);
    // Cannot park: wait_ms absent, or a bare 0 (its default).
    EXPECT_FALSE(Api::may_wait(post(target, "")));
    EXPECT_FALSE(Api::may_wait(post(target, R"({"owner":"a","lease_ms":30000})")));
    EXPECT_FALSE(Api::may_wait(post(target, R"({"owner":"a","wait_ms":0,"lease_ms":30000})")));
    EXPECT_FALSE(Api::may_wait(post(target, "{ \"wait_ms\" :\n 0 }")));
    EXPECT_FALSE(Api::may_wait(post(target, R"({"owner":"wait_ms","wait_ms":0})")));
    // May park.
    EXPECT_TRUE(Api::may_wait(post(target, R"({"owner":"a","wait_ms":5000})")));
    EXPECT_TRUE(Api::may_wait(post(target, "{\"wait_ms\"\t:\t1}")));
    EXPECT_TRUE(Api::may_wait(post(target + "?x=1", R"({"wait_ms":10})")));
    EXPECT_TRUE(Api::may_wait(post(target, R"({"wait_ms":0,"wait_ms":100})")));
    // What the scan cannot vouch for counts as a possible wait.
    EXPECT_TRUE(Api::may_wait(post(target, R"({"wait\u005fms":5000})")));
    EXPECT_TRUE(Api::may_wait(post(target, R"({"owner":"\u3042","wait_ms":0})")));
    for (const char* v : {"-0", "0.0", "0e0", "null", "\"0\"", "05"}) {
      EXPECT_TRUE(Api::may_wait(post(target, std::string(R"({"wait_ms":)") + v + "}"))) << v;
    }
    EXPECT_TRUE(Api::may_wait(post(target, R"({"x":{"wait_ms":5}})")));
  }
  // Other routes never park, whatever their body says.
  EXPECT_FALSE(Api::may_wait(post("/v1/ns/a/locks/l/release", R"({"wait_ms":5000})")));
  EXPECT_FALSE(Api::may_wait(post("/v1/ns/a/once/complete", R"({"wait_ms":5000})")));
  BeastRequest get{beast_http::verb::get, acquire, 11};
  get.body() = R"({"wait_ms":5000})";
  EXPECT_FALSE(Api::may_wait(get));
}

// The scan against the parser the handlers use: every body whose parsed wait_ms is above 0 is
// watched, over bodies built at random from members that name wait_ms in every way listed above.
TEST(HttpSessionWatch, EveryBodyThatAsksForAWaitIsWatched) {
  const std::vector<std::string> keys = {R"("wait_ms")", R"("wait\u005fms")", R"("\u0077ait_ms")",
                                         R"("owner")",   R"("lease_ms")",     R"("x")"};
  const std::vector<std::string> values = {"0",
                                           "1",
                                           "5000",
                                           "-0",
                                           "0.0",
                                           "null",
                                           "\"0\"",
                                           "0e0",
                                           "1e3",
                                           "\"wait_ms\"",
                                           R"({"wait_ms":7})"};
  const std::vector<std::string> blanks = {"", " ", "\t", "\n ", "\r\n"};
  std::mt19937 rng(142);
  auto pick = [&](const std::vector<std::string>& v) { return v[rng() % v.size()]; };
  int waits = 0, unwatched = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string body = "{";
    const unsigned members = rng() % 4;
    for (unsigned m = 0; m < members; ++m) {
      if (m) body += ",";
      body += pick(blanks) + pick(keys) + pick(blanks) + ":" + pick(blanks) + pick(values) +
              pick(blanks);
    }
    body += "}";
    const bool watched = Api::may_wait(post("/v1/ns/a/locks/l/acquire", body));
    if (!watched) ++unwatched;
    auto parsed = parse_body(body);
    if (!parsed.ok()) continue;
    auto wait = Fields(*parsed).opt_int(core::field::kWaitMs);
    if (!wait.ok() || !*wait || **wait <= 0) continue;
    ++waits;
    EXPECT_TRUE(watched) << body;
  }
  // The test has teeth: both kinds occur.
  EXPECT_GT(waits, 1000);
  EXPECT_GT(unwatched, 1000);
}

using BeastResponse = beast_http::response<beast_http::string_body>;

// An answer made as a Beast message (a beast_http::response, serialized by Beast): the reference
// that make_answer() and serialize_head() are held to below.
BeastResponse beast_answer(Response r, unsigned version, bool keep_alive,
                           std::string_view cors_origin) {
  BeastResponse res{static_cast<beast_http::status>(r.status), version};
  res.set(beast_http::field::server, "ichido");
  if (!r.content_type.empty()) res.set(beast_http::field::content_type, r.content_type);
  res.set(beast_http::field::cache_control, "no-store");
  for (auto& [k, v] : r.headers) res.set(k, v);
  if (r.status == 503 && res.find(beast_http::field::retry_after) == res.end()) {
    res.set(beast_http::field::retry_after, "1");
  }
  if (r.status == 401) res.set(beast_http::field::www_authenticate, "Bearer realm=\"ichido\"");
  if (!cors_origin.empty()) {
    res.set(beast_http::field::access_control_allow_origin, cors_origin);
    res.set(beast_http::field::vary, "Origin");
    if (r.status != 204) {
      res.set(beast_http::field::access_control_expose_headers, "Retry-After, ETag");
    }
  }
  res.body() = std::move(r.body);
  res.keep_alive(keep_alive);
  res.prepare_payload();
  if (r.status == 204) res.erase(beast_http::field::content_length);
  return res;
}

// make_answer() and the hand-written head (serialize_head) write what Beast's serializer wrote
// for the same response, byte for byte, and Answer's fields are Beast's in name, value and
// order: every status the API answers and a few it does not, HTTP/1.0 and 1.1, kept alive or
// not, with and without a content type, with the headers routes add (a Cache-Control of their
// own, ETag, Allow, Retry-After, a name repeated in another case), with CORS or not; the head
// written into a reused string that held a longer answer before.
TEST(HttpAnswer, IsWhatBeastsSerializerWroteForTheSameResponse) {
  const unsigned statuses[] = {200, 201, 204, 304, 400, 401, 403, 404, 405, 408,
                               409, 413, 415, 429, 431, 500, 501, 503, 299, 599};
  const std::pair<std::string, std::string> extra[] = {
      {"ETag", "\"v1\""},          {"Cache-Control", "no-cache"},
      {"Allow", "GET, PUT"},       {"Retry-After", "7"},
      {"etag", "\"v2\""},          {"X-Content-Type-Options", "nosniff"},
      {"Vary", "Accept-Encoding"}, {"X-Custom-Field", "value with spaces: and a colon"}};
  std::mt19937 rng(7);
  std::string out(4096, 'x');  // a longer answer's leftovers: must not show through
  int checked = 0;
  for (int round = 0; round < 5; ++round) {
    for (const unsigned status : statuses) {
      for (const unsigned version : {10u, 11u}) {
        for (const bool keep_alive : {true, false}) {
          Response r;
          r.status = status;
          const bool no_body = status == 204 || status == 304;
          if (no_body || rng() % 5 == 0)
            r.content_type = rng() % 2 ? "" : "text/html; charset=utf-8";
          if (!no_body) r.body = "{\"n\":" + std::to_string(rng()) + "}";
          for (const auto& h : extra) {
            if (rng() % 3 == 0) r.headers.push_back(h);
          }
          const std::string origin = rng() % 2 ? "https://script.google.com" : "";
          const BeastResponse beast = beast_answer(r, version, keep_alive, origin);
          std::ostringstream beast_wrote;
          beast_wrote << beast;
          const Answer answer = make_answer(r, version, keep_alive, origin);
          const std::string_view head = serialize_head(answer, out);
          const std::string what =
              std::to_string(status) + " HTTP/" + std::to_string(version / 10) + "." +
              std::to_string(version % 10) + " case " + std::to_string(checked);
          EXPECT_EQ(std::string(head) + answer.body(), beast_wrote.str()) << what;
          EXPECT_EQ(head.data(), out.data());
          std::vector<std::pair<std::string, std::string>> beast_fields, answer_fields;
          for (const auto& f : beast) beast_fields.emplace_back(f.name_string(), f.value());
          answer.for_each_field(
              [&](std::string_view n, std::string_view v) { answer_fields.emplace_back(n, v); });
          EXPECT_EQ(answer_fields, beast_fields) << what;
          for (const auto& [name, value] : beast_fields) {
            EXPECT_EQ(answer.find(name), std::string(beast[name])) << what << " " << name;
          }
          EXPECT_EQ(answer.find("Not-There"), std::nullopt);
          EXPECT_EQ(answer.result_int(), status);
          EXPECT_EQ(answer.keep_alive(), beast.keep_alive()) << what;
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 400);
}

// A 204 or 304 has no body even if a handler gave one (Beast threw then); a 304 says so.
TEST(HttpAnswer, NoBodyOnA204OrA304) {
  for (const unsigned status : {204u, 304u}) {
    Response r;
    r.status = status;
    r.body = "{\"stray\":true}";
    const Answer a = make_answer(r, 11, true);
    EXPECT_EQ(a.body(), "");
    EXPECT_EQ(a.find("Content-Length"),
              status == 304 ? std::optional<std::string>("0") : std::nullopt);
  }
}

// The server turns an answer's keep-alive off when it drains: Connection follows.
TEST(HttpAnswer, KeepAliveDecidesTheConnectionField) {
  Response r;
  r.body = "{}";
  Answer a = make_answer(r, 11, true);
  EXPECT_EQ(a.find("Connection"), std::nullopt);
  a.keep_alive(false);
  EXPECT_EQ(a.find("Connection"), "close");
  Answer old = make_answer(r, 10, true);
  EXPECT_EQ(old.find("Connection"), "keep-alive");
  old.keep_alive(false);
  EXPECT_EQ(old.find("Connection"), std::nullopt);
  std::string out;
  EXPECT_EQ(std::string(serialize_head(a, out)),
            "HTTP/1.1 200 OK\r\nServer: ichido\r\nContent-Type: application/json\r\n"
            "Cache-Control: no-store\r\nConnection: close\r\nContent-Length: 2\r\n\r\n");
}

}  // namespace
}  // namespace ichido::http
