// Bad input, table-driven: every case gets its documented status and error code, the server
// keeps serving, and a snapshot of all state taken before and after is identical.
#include <gtest/gtest.h>

#include <thread>

#include "api_client.h"
#include "raw_client.h"
#include "server_process.h"

namespace ichido::testing {
namespace {

struct Case {
  std::string method, target, body;
  int status;
  std::string code, field;
};

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string err;
    ASSERT_TRUE(server_.start(&err)) << err;
    ApiClient api(server_.url());
    ASSERT_EQ(api.create("c", R"({"max":5,"format":"C-{seq:3}","period":"year"})").status, 201);
    ASSERT_EQ(api.next("c", "k1").status, 200);
    ASSERT_EQ(api.next("c", "k2").status, 200);
    // A completed once record, one in progress, and a held lock, all with long leases so the
    // snapshot cannot change by itself while the cases run.
    auto done = api.send("POST", "/v1/ns/t/once/begin", R"({"key":"done","lease_ms":3600000})");
    ASSERT_EQ(done.status, 200);
    ASSERT_EQ(api.send("POST", "/v1/ns/t/once/complete",
                       R"({"key":"done","token":)" + std::to_string(done.num("token")) +
                           R"(,"result":{"ok":1}})")
                  .status,
              200);
    ASSERT_EQ(
        api.send("POST", "/v1/ns/t/once/begin", R"({"key":"held","owner":"w","lease_ms":3600000})")
            .status,
        200);
    ASSERT_EQ(
        api.send("POST", "/v1/ns/t/locks/l/acquire", R"({"owner":"o","lease_ms":3600000})").status,
        200);
  }

  // Everything the API can show: counters and their audit trails, once records, locks.
  std::string snapshot() {
    ApiClient api(server_.url());
    std::string out = api.send("GET", "/v1/ns/t/counters").body;
    out += api.send("GET", "/v1/ns/t/counters/c/issued?limit=1000").body;
    for (const char* state : {"processing", "expired", "pending", "completed", "dead"}) {
      out += api.send("GET", std::string("/v1/ns/t/once?limit=1000&state=") + state).body;
    }
    out += api.send("GET", "/v1/ns/t/once?key=done").body;
    out += api.send("GET", "/v1/ns/t/once?key=held").body;
    out += api.send("GET", "/v1/ns/t/locks").body;
    out += api.send("GET", "/v1/ns/t/locks/l").body;
    return out;
  }

  TempDir dir_;
  ServerProcess server_{dir_.path() + "/data", {"--read-timeout-ms", "1000"}};
};

std::string repeat(char c, std::size_t n) { return std::string(n, c); }

TEST_F(BadInputTest, MalformedRequestsGetTheDocumentedErrorAndChangeNothing) {
  const std::string c = "/v1/ns/t/counters/c";
  const std::string n = "/v1/ns/t/counters/new";
  const std::string deep = repeat('[', 100) + repeat(']', 100);
  const std::vector<Case> cases = {
      // --- JSON that is not JSON, or not an object ---
      {"POST", c + "/next", R"({"key": )", 400, "invalid_request", ""},
      {"POST", c + "/next", R"({"key": "a",})", 400, "invalid_request", ""},
      {"POST", c + "/next", "[1,2]", 400, "invalid_request", ""},
      {"POST", c + "/next", "null", 400, "invalid_request", ""},
      {"POST", c + "/next", R"("key")", 400, "invalid_request", ""},
      {"POST", c + "/next", "{\"key\": \"\xff\xfe\"}", 400, "invalid_request", ""},
      {"POST", c + "/next", R"({"key": "\ud800"})", 400, "invalid_request", ""},
      {"POST", c + "/next", "{\"key\": " + deep + "}", 400, "invalid_request", ""},
      {"PUT", n, "{\"x\": " + deep + "}", 400, "invalid_request", ""},
      // --- keys and notes ---
      {"POST", c + "/next", R"({"key": 5})", 400, "invalid_request", "key"},
      {"POST", c + "/next", R"({"key": ["k"]})", 400, "invalid_request", "key"},
      {"POST", c + "/next", R"({"key": ""})", 400, "invalid_request", "key"},
      {"POST", c + "/next", R"({"key": "a\u0000b"})", 400, "invalid_request", "key"},
      {"POST", c + "/next", "{\"key\": \"" + repeat('k', 513) + "\"}", 400, "invalid_request",
       "key"},
      {"POST", c + "/next", R"({"key": "k", "note": 7})", 400, "invalid_request", "note"},
      {"POST", c + "/next", "{\"key\": \"k\", \"note\": \"" + repeat('n', 1025) + "\"}", 400,
       "invalid_request", "note"},
      // --- counter config ---
      {"PUT", n, R"({"start": "0"})", 400, "invalid_request", "start"},
      {"PUT", n, R"({"start": -1})", 400, "invalid_request", "start"},
      {"PUT", n, R"({"start": 1.5})", 400, "invalid_request", "start"},
      {"PUT", n, R"({"start": 1e3})", 400, "invalid_request", "start"},
      {"PUT", n, R"({"start": true})", 400, "invalid_request", "start"},
      {"PUT", n, R"({"start": 9007199254740993})", 400, "invalid_request", "start"},
      {"PUT", n, R"({"start": 18446744073709551615})", 400, "invalid_request", "start"},
      {"PUT", n, R"({"start": 5, "max": 5})", 400, "invalid_request", "max"},
      {"PUT", n, R"({"max": 0})", 400, "invalid_request", "max"},
      {"PUT", n, R"({"max": 1.5})", 400, "invalid_request", "max"},
      {"PUT", n, R"({"max": 9007199254740993})", 400, "invalid_request", "max"},
      {"PUT", n, R"({"format": "{nope}"})", 400, "invalid_request", "format"},
      {"PUT", n, R"({"format": "no sequence"})", 400, "invalid_request", "format"},
      {"PUT", n, R"({"format": "{seq:0}"})", 400, "invalid_request", "format"},
      {"PUT", n, R"({"format": "{seq:19}"})", 400, "invalid_request", "format"},
      {"PUT", n, R"({"format": "R-{seq"})", 400, "invalid_request", "format"},
      {"PUT", n, R"({"format": "R-}{seq}"})", 400, "invalid_request", "format"},
      {"PUT", n, R"({"format": 4})", 400, "invalid_request", "format"},
      {"PUT", n, R"({"period": "week"})", 400, "invalid_request", "period"},
      {"PUT", n, R"({"period": 1})", 400, "invalid_request", "period"},
      {"PUT", n, R"({"timezone": "Mars/Olympus"})", 400, "invalid_request", "timezone"},
      {"PUT", n, R"({"timezone": ""})", 400, "invalid_request", "timezone"},
      {"PUT", n, R"({"require_key": "yes"})", 400, "invalid_request", "require_key"},
      {"PUT", n, R"({"require_key": 1})", 400, "invalid_request", "require_key"},
      {"PUT", c, R"({"max": 6})", 409, "counter_exists", ""},
      // --- names in the path ---
      {"PUT", "/v1/ns/t/counters/a%2Fb", "{}", 400, "invalid_request", "name"},
      {"PUT", "/v1/ns/t/counters/..", "{}", 400, "invalid_request", "name"},
      {"PUT", "/v1/ns/t/counters/.", "{}", 400, "invalid_request", "name"},
      {"PUT", "/v1/ns/t/counters/" + repeat('n', 129), "{}", 400, "invalid_request", "name"},
      {"PUT", "/v1/ns/t/counters/caf%C3%A9", "{}", 400, "invalid_request", "name"},
      {"PUT", "/v1/ns/bad%20ns/counters/x", "{}", 400, "invalid_request", "ns"},
      {"GET", "/v1/ns/%00/counters", "", 400, "invalid_request", "ns"},
      // --- void and set ---
      {"POST", c + "/void", "{}", 400, "invalid_request", "value"},
      {"POST", c + "/void", R"({"value": "1"})", 400, "invalid_request", "value"},
      {"POST", c + "/void", R"({"value": -1})", 400, "invalid_request", "value"},
      {"POST", c + "/void", R"({"value": 1.5})", 400, "invalid_request", "value"},
      {"POST", c + "/void", R"({"value": 99})", 409, "value_not_issued", ""},
      {"POST", c + "/void", R"({"value": 1, "period": 2026})", 400, "invalid_request", "period"},
      {"POST", c + "/void", R"({"value": 1, "period": "26"})", 400, "invalid_request", "period"},
      {"POST", c + "/void", "{\"value\": 1, \"reason\": \"" + repeat('r', 1025) + "\"}", 400,
       "invalid_request", "reason"},
      {"POST", c + "/set", R"({"last_value": 3})", 400, "invalid_request", "expected_last_value"},
      {"POST", c + "/set", R"({"expected_last_value": 2})", 400, "invalid_request", "last_value"},
      {"POST", c + "/set", R"({"expected_last_value": 2, "last_value": -3})", 400,
       "invalid_request", "last_value"},
      {"POST", c + "/set", R"({"expected_last_value": 2, "last_value": 6})", 400, "invalid_request",
       "last_value"},
      {"POST", c + "/set", R"({"expected_last_value": 1, "last_value": 3})", 409, "value_mismatch",
       ""},
      {"POST", c + "/set", R"({"expected_last_value": 2, "last_value": 1})", 409,
       "value_below_issued", ""},
      // --- queries ---
      {"GET", c + "/issued?limit=0", "", 400, "invalid_request", "limit"},
      {"GET", c + "/issued?limit=1001", "", 400, "invalid_request", "limit"},
      {"GET", c + "/issued?limit=ten", "", 400, "invalid_request", "limit"},
      {"GET", c + "/issued?after=-1", "", 400, "invalid_request", "after"},
      {"GET", c + "/issued?after=1.5", "", 400, "invalid_request", "after"},
      {"GET", c + "/issued?key=", "", 400, "invalid_request", "key"},
      {"GET", c + "/issued?key=%FF%FE", "", 400, "invalid_request", "key"},
      {"GET", c + "/issued?period=2026-01", "", 400, "invalid_request", "period"},
      // --- missing things, routes and methods ---
      {"POST", "/v1/ns/t/counters/nothing/next", R"({"key":"k"})", 404, "counter_not_found", ""},
      {"GET", "/v1/ns/t/counters/nothing", "", 404, "counter_not_found", ""},
      {"POST", c + "/next/more", "{}", 404, "route_not_found", ""},
      {"GET", "/v2/anything", "", 404, "route_not_found", ""},
      {"GET", "/no-such-file.js", "", 404, "route_not_found", ""},
      {"DELETE", c, "", 405, "method_not_allowed", ""},
      {"GET", c + "/next", "", 405, "method_not_allowed", ""},
      {"PATCH", c, "{}", 405, "method_not_allowed", ""},
      {"POST", "/healthz", "", 405, "method_not_allowed", ""},
      // --- once records ---
      {"POST", "/v1/ns/t/once/begin", R"({"key":"k","lease_ms":999})", 400, "invalid_request",
       "lease_ms"},
      {"POST", "/v1/ns/t/once/begin", R"({"key":"k","lease_ms":1.5})", 400, "invalid_request",
       "lease_ms"},
      {"POST", "/v1/ns/t/once/begin", R"({"key":""})", 400, "invalid_request", "key"},
      {"POST", "/v1/ns/t/once/begin", R"({"key":"k","wait_ms":300001})", 400, "invalid_request",
       "wait_ms"},
      {"POST", "/v1/ns/t/once/complete", R"({"key":"held"})", 400, "invalid_request", "token"},
      {"POST", "/v1/ns/t/once/complete", R"({"key":"nope","token":1,"result":1})", 404,
       "once_not_found", ""},
      {"POST", "/v1/ns/t/once/fail", R"({"key":"held","token":"1"})", 400, "invalid_request",
       "token"},
      {"POST", "/v1/ns/t/once/renew", R"({"key":"held","token":1,"lease_ms":-5})", 400,
       "invalid_request", "lease_ms"},
      {"POST", "/v1/ns/t/once/reset", "{}", 400, "invalid_request", "key"},
      {"GET", "/v1/ns/t/once?key=", "", 400, "invalid_request", "key"},
      {"GET", "/v1/ns/t/once?state=weird", "", 400, "invalid_request", "state"},
      // --- locks ---
      {"POST", "/v1/ns/t/locks/l/acquire", R"({"lease_ms":999})", 400, "invalid_request",
       "lease_ms"},
      {"POST", "/v1/ns/t/locks/l/acquire", R"({"wait_ms":300001})", 400, "invalid_request",
       "wait_ms"},
      {"POST", "/v1/ns/t/locks/l/acquire", R"({"owner":5})", 400, "invalid_request", "owner"},
      {"POST", "/v1/ns/t/locks/l/release", "{}", 400, "invalid_request", "token"},
      {"POST", "/v1/ns/t/locks/l/release", R"({"token":99999})", 409, "not_holder", ""},
      {"POST", "/v1/ns/t/locks/l/renew", R"({"token":1,"lease_ms":3600001})", 400,
       "invalid_request", "lease_ms"},
      {"POST", "/v1/ns/t/locks/a%2Fb/acquire", "{}", 400, "invalid_request", "name"},
      {"GET", "/v1/ns/t/locks/l?token=x", "", 400, "invalid_request", "token"},
      // --- size ---
      {"POST", c + "/next", "{\"key\": \"" + repeat('x', 2 << 20) + "\"}", 413, "body_too_large",
       ""},
      {"GET", "/v1/ns/t/counters/c/issued?key=" + repeat('k', 9000), "", 414, "uri_too_long", ""},
  };
  ASSERT_GE(cases.size(), 60u);
  const std::string before = snapshot();
  for (const auto& tc : cases) {
    ApiClient fresh(server_.url());  // some cases close the connection; keep them independent
    auto r = fresh.send(tc.method, tc.target, tc.body);
    const std::string what =
        tc.method + " " + tc.target.substr(0, 60) + " " + tc.body.substr(0, 60);
    EXPECT_EQ(r.status, tc.status) << what << " -> " << r.body.substr(0, 300);
    EXPECT_EQ(r.error_code(), tc.code) << what << " -> " << r.body.substr(0, 300);
    EXPECT_EQ(r.error_field(), tc.field) << what << " -> " << r.body.substr(0, 300);
    EXPECT_FALSE(r.json.is_null()) << what << ": the error body must be JSON";
  }
  EXPECT_EQ(snapshot(), before) << "a rejected request changed state";
  EXPECT_EQ(ApiClient(server_.url()).send("GET", "/healthz").status, 200);
}

// Every message about an integer field states that field's real range, whatever was wrong with
// the value (a negative, a string, a fraction), on every route that takes it.
TEST_F(BadInputTest, IntegerErrorsStateTheFieldsRealRange) {
  struct RangeCase {
    std::string target, body, field, range;
  };
  const std::vector<RangeCase> cases = {
      {"/v1/ns/t/locks/x/acquire", R"({"wait_ms":-1})", "wait_ms", "from 0 to 300000"},
      {"/v1/ns/t/locks/x/acquire", R"({"wait_ms":"5"})", "wait_ms", "from 0 to 300000"},
      {"/v1/ns/t/locks/x/acquire", R"({"lease_ms":"60000"})", "lease_ms", "from 1000 to 3600000"},
      {"/v1/ns/t/once/begin", R"({"key":"k","wait_ms":-1})", "wait_ms", "from 0 to 300000"},
      {"/v1/ns/t/once/begin", R"({"key":"k","lease_ms":"60000"})", "lease_ms",
       "from 1000 to 3600000"},
      {"/v1/ns/t/once/begin", R"({"key":"k","lease_ms":1.5})", "lease_ms", "from 1000 to 3600000"},
      {"/v1/ns/t/once/begin", R"({"key":"k","max_attempts":0})", "max_attempts", "from 1 to 1000"},
      {"/v1/ns/t/once/renew", R"({"key":"held","token":1,"lease_ms":-5})", "lease_ms",
       "from 1000 to 3600000"},
      {"/v1/ns/t/once/complete", R"({"key":"held","token":0})", "token", "from 1 to 2^53"},
  };
  for (const auto& tc : cases) {
    ApiClient api(server_.url());
    auto r = api.send("POST", tc.target, tc.body);
    EXPECT_EQ(r.status, 400) << tc.body;
    EXPECT_EQ(r.error_field(), tc.field) << tc.body;
    const std::string message =
        r.json.is_object() ? std::string(r.json.at("error").at("message").as_string()) : "";
    EXPECT_NE(message.find(tc.range), std::string::npos) << tc.body << " -> " << message;
  }
}

TEST_F(BadInputTest, HostileConnectionsAreAnsweredOrDroppedAndTheServerKeepsServing) {
  const std::string before = snapshot();
  const auto port = server_.port();
  auto exchange = [&](const std::string& bytes, bool half_close = false) {
    RawConn conn(port);
    EXPECT_TRUE(conn.ok());
    conn.send(bytes);
    if (half_close) conn.shutdown_write();
    return conn.read_all(std::chrono::milliseconds(5000));
  };

  std::string many_headers = "GET /healthz HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 20000; ++i) many_headers += "X-H" + std::to_string(i) + ": v\r\n";
  many_headers += "\r\n";
  auto r = exchange(many_headers);
  EXPECT_EQ(statuses(r), std::vector<int>{431}) << r.substr(0, 200);
  EXPECT_NE(r.find("headers_too_large"), std::string::npos);

  r = exchange("GET /v1/ns/t/counters/c/issued?key=" + repeat('u', 100 * 1024) +
               " HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(statuses(r), std::vector<int>{414}) << r.substr(0, 200);

  r = exchange("HELLO THERE\r\n\r\n");
  EXPECT_EQ(statuses(r), std::vector<int>{400}) << r.substr(0, 200);

  r = exchange(
      "POST /v1/ns/t/counters/c/next HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}");
  EXPECT_EQ(statuses(r), std::vector<int>{400}) << r.substr(0, 200);

  std::string chunked =
      "POST /v1/ns/t/counters/c/next HTTP/1.1\r\nHost: x\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 64; ++i) chunked += "8000\r\n" + repeat('a', 0x8000) + "\r\n";
  chunked += "0\r\n\r\n";
  r = exchange(chunked);
  EXPECT_EQ(statuses(r), std::vector<int>{413}) << r.substr(0, 200);

  // A valid request followed by garbage on the same connection: the first is answered, the
  // garbage gets 400, then the connection closes.
  r = exchange("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGARBAGE GARBAGE\r\n\r\n");
  EXPECT_EQ(statuses(r), (std::vector<int>{200, 400})) << r;

  // Half-closed after a complete request: still answered.
  r = exchange("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", /*half_close=*/true);
  EXPECT_EQ(statuses(r), std::vector<int>{200}) << r;

  // Slowloris: one byte at a time, slower than the 1 s read timeout allows for a whole
  // request; the server drops the connection without answering it.
  {
    RawConn slow(port);
    ASSERT_TRUE(slow.ok());
    const std::string req = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    bool dropped = false;
    for (std::size_t i = 0; i < req.size() && !dropped; ++i) {
      if (!slow.send(req.substr(i, 1))) dropped = true;
      bool closed = false;
      auto got = slow.read_all(std::chrono::milliseconds(150), &closed);
      EXPECT_TRUE(got.empty() || statuses(got).empty()) << got;
      dropped = dropped || closed;
    }
    EXPECT_TRUE(dropped) << "a byte-per-150ms sender was never cut off";
  }

  EXPECT_EQ(snapshot(), before);
  EXPECT_EQ(ApiClient(server_.url()).send("GET", "/healthz").status, 200);
}

}  // namespace
}  // namespace ichido::testing
