// Day-2 operations end to end against the real binary with auth on: the dashboard's static files
// (CSP, content types, ETag/304, no token), /v1/whoami, /v1/namespaces (scoping and counts by
// state), audit filters and paging, lock waiters in lists, and the /metrics series operators
// alert on.
#include <gtest/gtest.h>

#include <sstream>
#include <thread>

#include "api_client.h"
#include "raw_client.h"
#include "server_process.h"
#include "test_util.h"

namespace ichido::testing {
namespace {

class OpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string err;
    ASSERT_TRUE(server_.start(&err)) << err;
    admin_ = slurp(dir_.path() + "/data/admin.token");
    while (!admin_.empty() && admin_.back() == '\n') admin_.pop_back();
  }
  ApiClient as(const std::string& token, const std::string& ns = "shop") {
    return ApiClient(server_.url(), ns, token);
  }
  std::pair<std::string, std::string> mint(const std::string& ns, const std::string& role) {
    auto r = as(admin_).send("POST", "/v1/admin/tokens",
                             R"({"ns":")" + ns + R"(","role":")" + role + "\"}");
    EXPECT_EQ(r.status, 201) << r.body;
    return {r.str("id"), r.str("token")};
  }
  // A raw GET with extra header lines; returns the whole answer (head and body).
  std::string raw_get(const std::string& target, const std::string& headers = "") {
    RawConn c(server_.port());
    EXPECT_TRUE(c.ok());
    c.send("GET " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + headers + "\r\n");
    return c.read_all(std::chrono::seconds(5));
  }

  TempDir dir_;
  ServerProcess server_{dir_.path() + "/data", {}, /*auth=*/true};
  std::string admin_;
};

std::string header_of(const std::string& answer, const std::string& name) {
  const std::string head = answer.substr(0, answer.find("\r\n\r\n"));
  std::string lower = head;
  for (auto& c : lower) c = static_cast<char>(std::tolower(c));
  std::string key = "\r\n" + name + ": ";
  for (auto& c : key) c = static_cast<char>(std::tolower(c));
  const auto at = lower.find(key);
  if (at == std::string::npos) return "";
  const auto start = at + key.size();
  return head.substr(start, head.find("\r\n", start) - start);
}

TEST_F(OpsTest, DashboardFilesNeedNoTokenAndCarryAStrictCsp) {
  const std::string page = raw_get("/");
  EXPECT_EQ(statuses(page), std::vector<int>{200}) << page.substr(0, 300);
  EXPECT_EQ(header_of(page, "Content-Type"), "text/html; charset=utf-8");
  const std::string csp = header_of(page, "Content-Security-Policy");
  EXPECT_NE(csp.find("default-src 'self'"), std::string::npos) << csp;
  EXPECT_EQ(csp.find("unsafe-inline"), std::string::npos) << csp;
  EXPECT_EQ(header_of(page, "X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(header_of(page, "Cache-Control"), "no-cache");
  EXPECT_NE(page.find("<script type=\"module\" src=\"app.js\"></script>"), std::string::npos);

  const std::string js = raw_get("/app.js");
  EXPECT_EQ(statuses(js), std::vector<int>{200});
  EXPECT_EQ(header_of(js, "Content-Type"), "text/javascript; charset=utf-8");
  const std::string etag = header_of(js, "ETag");
  ASSERT_EQ(etag.size(), 18u) << etag;  // "0123456789abcdef"
  const std::string again = raw_get("/app.js", "If-None-Match: \"other\", " + etag + "\r\n");
  EXPECT_EQ(statuses(again), std::vector<int>{304});
  EXPECT_EQ(header_of(again, "Content-Length"), "0");
  EXPECT_EQ(statuses(raw_get("/app.js", "If-None-Match: \"other\"\r\n")), std::vector<int>{200});
  EXPECT_EQ(header_of(raw_get("/style.css"), "Content-Type"), "text/css; charset=utf-8");

  auto missing = as("").send("GET", "/nope.js");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.error_code(), "route_not_found");
  // The API itself still needs a token.
  EXPECT_EQ(as("").send("GET", "/v1/whoami").status, 401);
}

TEST_F(OpsTest, WhoamiTellsTheCallersRoleAndScopeNeverTheSecret) {
  auto me = as(admin_).send("GET", "/v1/whoami");
  ASSERT_EQ(me.status, 200) << me.body;
  EXPECT_EQ(me.str("role"), "admin");
  EXPECT_EQ(me.str("ns"), "*");
  EXPECT_EQ(me.body.find(admin_), std::string::npos);
  auto [id, secret] = mint("shop", "reader");
  auto reader = as(secret).send("GET", "/v1/whoami");
  ASSERT_EQ(reader.status, 200) << reader.body;
  EXPECT_EQ(reader.str("id"), id);
  EXPECT_EQ(reader.str("role"), "reader");
  EXPECT_EQ(reader.str("ns"), "shop");
  EXPECT_EQ(reader.at("auth").as_bool(), true);
  EXPECT_EQ(reader.body.find(secret), std::string::npos);
}

TEST_F(OpsTest, NamespacesCountsByStateAndOnlyWhatTheTokenMaySee) {
  auto admin = as(admin_);
  ASSERT_EQ(admin.send("PUT", "/v1/ns/shop/counters/r", R"({"start":0,"max":99})").status, 201);
  ASSERT_EQ(admin.send("PUT", "/v1/ns/shop/counters/s", R"({"start":0,"max":99})").status, 201);
  // once records in mail: one live, one dead, one pending, one completed, one that lapses.
  auto begin = [&](const std::string& key, int lease_ms) {
    auto r = admin.send("POST", "/v1/ns/mail/once/begin",
                        R"({"key":")" + key + R"(","lease_ms":)" + std::to_string(lease_ms) + "}");
    EXPECT_EQ(r.str("outcome"), "acquired") << r.body;
    return r.num("token");
  };
  begin("live", 600000);
  auto t = begin("dead", 60000);
  admin.send("POST", "/v1/ns/mail/once/fail",
             R"({"key":"dead","token":)" + std::to_string(t) + R"(,"error":"x","retry":false})");
  t = begin("pending", 60000);
  admin.send("POST", "/v1/ns/mail/once/fail",
             R"({"key":"pending","token":)" + std::to_string(t) + R"(,"error":"x"})");
  t = begin("done", 60000);
  admin.send("POST", "/v1/ns/mail/once/complete",
             R"({"key":"done","token":)" + std::to_string(t) + R"(,"result":1})");
  begin("lapses", 1000);
  ASSERT_EQ(admin.send("POST", "/v1/ns/locks-only/locks/l/acquire", "{}").status, 200);

  // The lapsing lease ends 1 s after it was granted: poll until the overview calls it expired.
  Reply all;
  ASSERT_TRUE(eventually([&] {
    all = admin.send("GET", "/v1/namespaces");
    if (all.status != 200) return false;
    auto& items = all.at("items").as_array();
    return items.size() == 3 && items[1].at("once").at("expired").to_number<int>() == 1;
  })) << all.body;
  auto& items = all.at("items").as_array();
  EXPECT_EQ(items[0].at("ns").as_string(), "locks-only");
  EXPECT_EQ(items[0].at("locks_held").to_number<int>(), 1);
  EXPECT_EQ(items[1].at("ns").as_string(), "mail");
  const auto& once = items[1].at("once").as_object();
  EXPECT_EQ(once.at("processing").to_number<int>(), 1);
  EXPECT_EQ(once.at("expired").to_number<int>(), 1);
  EXPECT_EQ(once.at("pending").to_number<int>(), 1);
  EXPECT_EQ(once.at("completed").to_number<int>(), 1);
  EXPECT_EQ(once.at("dead").to_number<int>(), 1);
  EXPECT_EQ(once.at("capped").as_bool(), false);
  EXPECT_TRUE(items[1].at("oldest_expired_at").is_string());
  EXPECT_EQ(items[2].at("ns").as_string(), "shop");
  EXPECT_EQ(items[2].at("counters").to_number<int>(), 2);
  EXPECT_EQ(all.num("count_cap"), 100000);

  // A token scoped to one namespace sees that one only (even an empty one).
  auto [id, reader] = mint("shop", "reader");
  auto mine = as(reader).send("GET", "/v1/namespaces");
  ASSERT_EQ(mine.status, 200) << mine.body;
  ASSERT_EQ(mine.at("items").as_array().size(), 1u);
  EXPECT_EQ(mine.at("items").as_array()[0].at("ns").as_string(), "shop");
  auto [id2, empty_ns] = mint("nothing-yet", "writer");
  auto none = as(empty_ns).send("GET", "/v1/namespaces");
  ASSERT_EQ(none.at("items").as_array().size(), 1u);
  EXPECT_EQ(none.at("items").as_array()[0].at("counters").to_number<int>(), 0);
}

TEST_F(OpsTest, AuditFiltersByActorAndActionAndPagesNewestFirst) {
  auto admin = as(admin_);
  auto me = admin.send("GET", "/v1/whoami").str("id");
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(
        admin.send("PUT", "/v1/ns/shop/counters/c" + std::to_string(i), R"({"start":0,"max":9})")
            .status,
        201);
  }
  ASSERT_EQ(admin.send("POST", "/v1/ns/shop/locks/l/force-release", "{}").status, 200);
  // A reader's forbidden admin call is audited under its own id.
  auto [rid, reader] = mint("shop", "reader");
  EXPECT_EQ(as(reader).send("POST", "/v1/ns/shop/locks/l/force-release", "{}").status, 403);

  auto by_action = admin.send("GET", "/v1/admin/audit?action=force-release");
  ASSERT_EQ(by_action.status, 200) << by_action.body;
  ASSERT_EQ(by_action.at("items").as_array().size(), 1u) << by_action.body;
  EXPECT_EQ(by_action.at("items").as_array()[0].at("actor").as_string(), me);

  ASSERT_TRUE(eventually([&] {  // failure audits are written without delaying the answer
    auto r = admin.send("GET", "/v1/admin/audit?actor=" + rid);
    return r.status == 200 && r.at("items").as_array().size() == 1 &&
           r.at("items").as_array()[0].at("action").as_string() == "forbidden";
  }));

  // Newest first, two per page: PUTs c4, c3, then c2, c1 …
  auto page1 = admin.send("GET", "/v1/admin/audit?order=newest&limit=2&action=counters");
  ASSERT_EQ(page1.status, 200) << page1.body;
  auto& p1 = page1.at("items").as_array();
  ASSERT_EQ(p1.size(), 2u);
  EXPECT_EQ(p1[0].at("detail").as_string(), "/v1/ns/shop/counters/c4");
  EXPECT_EQ(p1[1].at("detail").as_string(), "/v1/ns/shop/counters/c3");
  ASSERT_TRUE(page1.json.as_object().contains("next_before"));
  EXPECT_FALSE(page1.json.as_object().contains("next_after"));
  auto page2 = admin.send("GET", "/v1/admin/audit?order=newest&limit=2&action=counters&before=" +
                                     std::to_string(page1.num("next_before")));
  auto& p2 = page2.at("items").as_array();
  ASSERT_EQ(p2.size(), 2u);
  EXPECT_EQ(p2[0].at("detail").as_string(), "/v1/ns/shop/counters/c2");

  auto bad = admin.send("GET", "/v1/admin/audit?order=sideways");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.error_field(), "order");
  EXPECT_EQ(admin.send("GET", "/v1/admin/audit?ns=bad/ns").error_field(), "ns");
  // Still admin only.
  EXPECT_EQ(as(reader).send("GET", "/v1/admin/audit?actor=x").status, 403);
}

TEST_F(OpsTest, LockListShowsWaitersAndMetricsHaveTheAlertingSeries) {
  auto admin = as(admin_);
  ASSERT_EQ(admin.send("POST", "/v1/ns/shop/locks/l/acquire", R"({"owner":"a"})").status, 200);
  // One request waits for the lock on another connection.
  std::thread waiter([&] {
    ApiClient other(server_.url(), "shop", admin_);
    other.send("POST", "/v1/ns/shop/locks/l/acquire", R"({"owner":"b","wait_ms":20000})");
  });
  Reply list;
  EXPECT_TRUE(eventually([&] {
    list = admin.send("GET", "/v1/ns/shop/locks");
    return list.status == 200 && list.at("items").as_array().size() == 1 &&
           list.at("items").as_array()[0].at("waiters").to_number<int>() == 1;
  })) << list.body;
  // The list counts a waiter from its arrival; the gauge counts it once it is parked (after its
  // first store call, which a slower store such as PostgreSQL may still be making).
  Reply metrics;
  EXPECT_TRUE(eventually([&] {
    metrics = admin.send("GET", "/metrics");
    return metrics.status == 200 &&
           metrics.body.find("\nichido_lock_waiters 1\n") != std::string::npos;
  })) << metrics.body;
  EXPECT_NE(metrics.body.find("\nichido_store_write_failed 0\n"), std::string::npos);
  EXPECT_NE(metrics.body.find("\nichido_store_commit_seconds_total "), std::string::npos);
  EXPECT_NE(metrics.body.find("# TYPE ichido_once_records gauge"), std::string::npos);
  ASSERT_EQ(admin.send("POST", "/v1/ns/shop/locks/l/force-release", "{}").status, 200);
  waiter.join();
}

}  // namespace
}  // namespace ichido::testing

namespace ichido::testing {
namespace {

// The lines of `log` that are request log lines of the given format.
std::vector<std::string> request_lines(const std::string& log, bool json) {
  std::vector<std::string> out;
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    if (json ? line.find("\"route\":") != std::string::npos
             : line.find(" ns=") != std::string::npos && line.find(" token=") != std::string::npos)
      out.push_back(line);
  }
  return out;
}

TEST(RequestLog, JsonLinesNameRouteStatusDurationAndTokenIdNeverTheSecretOrTheQuery) {
  TempDir dir;
  ServerProcess server(dir.path() + "/data", {"--log-format", "json"}, /*auth=*/true);
  std::string err;
  ASSERT_TRUE(server.start(&err)) << err;
  std::string token = slurp(dir.path() + "/data/admin.token");
  while (!token.empty() && token.back() == '\n') token.pop_back();
  ApiClient admin(server.url(), "shop", token);
  const std::string id = admin.send("GET", "/v1/whoami").str("id");
  ASSERT_EQ(admin.send("PUT", "/v1/ns/shop/counters/r", R"({"start":0,"max":9})").status, 201);
  EXPECT_EQ(admin.send("GET", "/v1/ns/shop/counters/r/issued?key=secret-customer-key").status, 200);
  EXPECT_EQ(ApiClient(server.url(), "shop", "wrong").send("GET", "/v1/ns/shop/counters").status,
            401);
  ASSERT_EQ(server.stop(), 0);  // the log is written out before the process exits
  const auto lines = request_lines(server.log(), true);
  ASSERT_EQ(lines.size(), 4u) << server.log();
  for (const auto& l : lines) {
    EXPECT_EQ(l.find(token), std::string::npos) << l;
    EXPECT_EQ(l.find("secret-customer-key"), std::string::npos) << l;
    EXPECT_EQ(l.find("wrong"), std::string::npos) << l;
  }
  auto put = boost::json::parse(lines[1]).as_object();
  EXPECT_EQ(put.at("method").as_string(), "PUT");
  EXPECT_EQ(put.at("route").as_string(), "/v1/ns/{ns}/counters/{name}");
  EXPECT_EQ(put.at("ns").as_string(), "shop");
  EXPECT_EQ(put.at("status").to_number<int>(), 201);
  EXPECT_EQ(put.at("token").as_string(), id);
  EXPECT_GE(put.at("duration_ms").to_number<double>(), 0.0);
  EXPECT_TRUE(put.at("at").is_string());
  EXPECT_TRUE(put.at("remote").as_string().starts_with("127.0.0.1:"));
  auto denied = boost::json::parse(lines[3]).as_object();
  EXPECT_EQ(denied.at("status").to_number<int>(), 401);
  EXPECT_EQ(denied.at("token").as_string(), "");
  EXPECT_EQ(denied.at("route").as_string(), "/v1/ns/shop/counters");  // no route before auth
  // The server's own messages are JSON too.
  EXPECT_NE(server.log().find("{\"at\":"), std::string::npos);
  EXPECT_NE(server.log().find("\"level\":\"info\""), std::string::npos);
}

TEST(RequestLog, TextByDefaultAndOffWhenAsked) {
  TempDir dir;
  ServerProcess text(dir.path() + "/a", {});
  std::string err;
  ASSERT_TRUE(text.start(&err)) << err;
  ApiClient a(text.url(), "shop");
  ASSERT_EQ(a.send("PUT", "/v1/ns/shop/counters/r", R"({"start":0,"max":9})").status, 201);
  ASSERT_EQ(text.stop(), 0);
  const auto lines = request_lines(text.log(), false);
  ASSERT_EQ(lines.size(), 1u) << text.log();
  EXPECT_NE(lines[0].find(" PUT /v1/ns/{ns}/counters/{name} ns=shop 201 "), std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find("ms token=-"), std::string::npos) << lines[0];  // --no-auth

  ServerProcess off(dir.path() + "/b", {"--request-log", "off"});
  ASSERT_TRUE(off.start(&err)) << err;
  ApiClient b(off.url(), "shop");
  ASSERT_EQ(b.send("PUT", "/v1/ns/shop/counters/r", R"({"start":0,"max":9})").status, 201);
  ASSERT_EQ(off.stop(), 0);
  EXPECT_TRUE(request_lines(off.log(), false).empty()) << off.log();
}

}  // namespace
}  // namespace ichido::testing

namespace ichido::testing {
namespace {

TEST(Retention, EachNamespaceKeepsFinishedOnceRecordsForItsOwnRetention) {
  TempDir dir;
  ServerProcess server(dir.path() + "/data", {"--once-retention", "2s"});
  std::string err;
  ASSERT_TRUE(server.start(&err)) << err;
  ApiClient c(server.url(), "x");
  auto settings = c.send("GET", "/v1/ns/keep/settings");
  ASSERT_EQ(settings.status, 200) << settings.body;
  EXPECT_TRUE(settings.at("once_retention_ms").is_null());
  EXPECT_EQ(settings.num("effective_once_retention_ms"), 2000);
  auto put = c.send("PUT", "/v1/ns/keep/settings", R"({"once_retention_ms":3600000})");
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(put.num("once_retention_ms"), 3600000);
  EXPECT_EQ(put.num("effective_once_retention_ms"), 3600000);

  auto finish = [&](const std::string& ns, const std::string& key) {
    auto b = c.send("POST", "/v1/ns/" + ns + "/once/begin", R"({"key":")" + key + "\"}");
    ASSERT_EQ(b.str("outcome"), "acquired") << b.body;
    auto done = c.send(
        "POST", "/v1/ns/" + ns + "/once/complete",
        R"({"key":")" + key + R"(","token":)" + std::to_string(b.num("token")) + R"(,"result":1})");
    ASSERT_EQ(done.status, 200) << done.body;
  };
  finish("keep", "k1");
  finish("default", "d1");
  // The default namespace's record goes after about 2 s; the other one stays.
  EXPECT_TRUE(eventually([&] { return c.send("GET", "/v1/ns/default/once?key=d1").status == 404; },
                         std::chrono::seconds(30)));
  EXPECT_EQ(c.send("GET", "/v1/ns/keep/once?key=k1").status, 200);

  // The setting survives a restart; null gives the namespace the server's default back.
  ASSERT_EQ(server.stop(), 0);
  ASSERT_TRUE(server.start(&err)) << err;
  ApiClient again(server.url(), "x");
  EXPECT_EQ(again.send("GET", "/v1/ns/keep/settings").num("once_retention_ms"), 3600000);
  EXPECT_EQ(again.send("GET", "/v1/ns/keep/once?key=k1").status, 200);
  auto cleared = again.send("PUT", "/v1/ns/keep/settings", R"({"once_retention_ms":null})");
  ASSERT_EQ(cleared.status, 200) << cleared.body;
  EXPECT_EQ(cleared.num("effective_once_retention_ms"), 2000);
  EXPECT_TRUE(eventually([&] { return again.send("GET", "/v1/ns/keep/once?key=k1").status == 404; },
                         std::chrono::seconds(30)));
}

TEST(Retention, BadSettingsAreRefusedAndChangeNothing) {
  TempDir dir;
  ServerProcess server(dir.path() + "/data", {}, /*auth=*/true);
  std::string err;
  ASSERT_TRUE(server.start(&err)) << err;
  std::string token = slurp(dir.path() + "/data/admin.token");
  while (!token.empty() && token.back() == '\n') token.pop_back();
  ApiClient admin(server.url(), "x", token);
  ASSERT_EQ(admin.send("PUT", "/v1/ns/a/settings", R"({"once_retention_ms":86400000})").status,
            200);
  for (const char* body :
       {R"({"once_retention_ms":999})", R"({"once_retention_ms":1.5})",
        R"({"once_retention_ms":"30d"})", R"({})", R"({"once_retention_ms":315360000001})"}) {
    auto r = admin.send("PUT", "/v1/ns/a/settings", body);
    EXPECT_EQ(r.status, 400) << body;
    EXPECT_EQ(r.error_field(), "once_retention_ms") << body << r.body;
  }
  EXPECT_EQ(
      admin.send("PUT", "/v1/ns/bad%20ns/settings", R"({"once_retention_ms":1000})").error_field(),
      "ns");
  auto created = admin.send("POST", "/v1/admin/tokens", R"({"ns":"a","role":"writer"})");
  ApiClient writer(server.url(), "a", created.str("token"));
  EXPECT_EQ(writer.send("PUT", "/v1/ns/a/settings", R"({"once_retention_ms":1000})").status, 403);
  EXPECT_EQ(writer.send("GET", "/v1/ns/a/settings").num("once_retention_ms"), 86400000);
  // The change was audited.
  auto audit = admin.send("GET", "/v1/admin/audit?action=settings");
  ASSERT_GE(audit.at("items").as_array().size(), 1u) << audit.body;
  EXPECT_EQ(audit.at("items").as_array()[0].at("action").as_string(), "PUT /v1/ns/{ns}/settings");
}

}  // namespace
}  // namespace ichido::testing
