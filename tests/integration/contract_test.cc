// A tour of every operation of docs/openapi.yaml against the real binary with auth on: each one's
// success, and the answers every operation can give — 401 without a token, 403 for a token of
// another namespace or role, 413 for a body over the limit. The statuses are asserted here; the
// answers themselves (body, Content-Type, headers) are checked against the document by the
// openapi_contract test, which reads what the server recorded (ICHIDO_CONTRACT_LOG,
// docs/decisions/110-contract-testing.md). This test makes sure every operation is exercised even
// where no other test needs its success path.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api_client.h"
#include "server_process.h"
#include "test_util.h"

namespace ichido::testing {
namespace {

class ContractTour : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string err;
    ASSERT_TRUE(server_.start(&err)) << err;
    admin_ = slurp(dir_.path() + "/data/admin.token");
    while (!admin_.empty() && admin_.back() == '\n') admin_.pop_back();
    auto r = as(admin_).send("POST", "/v1/admin/tokens", R"({"ns":"other","role":"writer"})");
    ASSERT_EQ(r.status, 201) << r.body;
    other_writer_ = r.str("token");
  }
  ApiClient as(const std::string& token) { return ApiClient(server_.url(), "shop", token); }

  TempDir dir_;
  ServerProcess server_{dir_.path() + "/data", {}, /*auth=*/true};
  std::string admin_;
  std::string other_writer_;
};

struct Call {
  std::string method, target, body;
  int status;
};

TEST_F(ContractTour, EveryOperationSucceedsAsDocumented) {
  auto admin = as(admin_);
  auto expect = [&](const Call& c) {
    auto r = admin.send(c.method, c.target, c.body);
    EXPECT_EQ(r.status, c.status) << c.method << " " << c.target << ": " << r.body;
    return r;
  };
  const std::string c = "/v1/ns/shop/counters/receipts";
  expect({"PUT", c, R"({"max":9999,"format":"R-{seq:4}"})", 201});
  expect({"PUT", c, R"({"max":9999,"format":"R-{seq:4}"})", 200});
  expect({"GET", c, "", 200});
  expect({"GET", "/v1/ns/shop/counters", "", 200});
  expect({"POST", c + "/next", R"({"key":"form-1","note":"web form"})", 200});
  expect({"POST", c + "/next", R"({"key":"form-1"})", 200});
  expect({"POST", c + "/next", "", 200});
  expect({"GET", c + "/issued?key=form-1", "", 200});
  expect({"GET", c + "/issued?after=0&limit=1", "", 200});
  expect({"POST", c + "/void", R"({"value":2,"reason":"spoiled"})", 200});
  expect({"POST", c + "/set", R"({"expected_last_value":2,"last_value":10})", 200});

  const std::string o = "/v1/ns/shop/once";
  auto begun = expect({"POST", o + "/begin", R"({"key":"<m1@example.jp>","owner":"pc-a"})", 200});
  const std::string token = std::to_string(begun.num("token"));
  expect({"POST", o + "/begin", R"({"key":"<m1@example.jp>","owner":"pc-b"})", 200});
  expect({"POST", o + "/renew",
          R"({"key":"<m1@example.jp>","lease_ms":60000,"token":)" + token + "}", 200});
  expect({"GET", o + "?key=%3Cm1%40example.jp%3E", "", 200});
  expect({"GET", o + "?state=processing", "", 200});
  expect({"POST", o + "/complete",
          R"({"key":"<m1@example.jp>","result":{"t":1},"token":)" + token + "}", 200});
  expect({"POST", o + "/begin", R"({"key":"<m1@example.jp>"})", 200});
  auto second = expect({"POST", o + "/begin", R"({"key":"m2","max_attempts":1})", 200});
  expect(
      {"POST", o + "/fail",
       R"({"key":"m2","error":"smtp timeout","token":)" + std::to_string(second.num("token")) + "}",
       200});
  expect({"POST", o + "/begin", R"({"key":"m2"})", 200});  // dead
  expect({"GET", o + "?state=dead&limit=10", "", 200});
  expect({"POST", o + "/reset", R"({"key":"m2"})", 200});

  const std::string l = "/v1/ns/shop/locks/printer";
  auto held = expect({"POST", l + "/acquire", R"({"owner":"pc-a","lease_ms":30000})", 200});
  const std::string lt = std::to_string(held.num("token"));
  expect({"POST", l + "/acquire", R"({"owner":"pc-b"})", 200});  // acquired: false
  expect({"GET", l + "?token=" + lt, "", 200});
  expect({"GET", "/v1/ns/shop/locks", "", 200});
  expect({"POST", l + "/renew", R"({"lease_ms":30000,"token":)" + lt + "}", 200});
  expect({"POST", l + "/release", R"({"token":)" + lt + "}", 200});
  expect({"POST", l + "/release", R"({"token":)" + lt + "}", 409});
  expect({"POST", l + "/acquire", "", 200});
  expect({"POST", l + "/force-release", "{}", 200});
  expect({"GET", l, "", 200});

  expect({"GET", "/v1/ns/shop/settings", "", 200});
  expect({"PUT", "/v1/ns/shop/settings", R"({"once_retention_ms":7776000000})", 200});
  auto minted = expect({"POST", "/v1/admin/tokens", R"({"ns":"shop","role":"reader"})", 201});
  expect({"GET", "/v1/admin/tokens", "", 200});
  expect({"DELETE", "/v1/admin/tokens/" + minted.str("id"), "", 200});
  expect({"GET", "/v1/admin/audit?order=newest&limit=5", "", 200});
  expect({"GET", "/v1/whoami", "", 200});
  expect({"GET", "/v1/namespaces", "", 200});
  expect({"GET", "/healthz", "", 200});
  expect({"GET", "/readyz", "", 200});
  expect({"GET", "/metrics", "", 200});
  expect({"GET", "/", "", 200});
  expect({"GET", "/app.js", "", 200});
}

// Every operation with a token check, once without a token (401) and once with a token of
// another namespace or a role too small (403); every one that takes a body, with one over the
// limit (413).
TEST_F(ContractTour, EveryOperationRefusesAsDocumented) {
  struct Op {
    std::string method, target;
    bool any_scope = false;  // whoami, namespaces: any token may call
    bool body = false;
  };
  const std::vector<Op> ops = {
      {"PUT", "/v1/ns/shop/counters/c", false, true},
      {"GET", "/v1/ns/shop/counters/c"},
      {"GET", "/v1/ns/shop/counters"},
      {"POST", "/v1/ns/shop/counters/c/next", false, true},
      {"GET", "/v1/ns/shop/counters/c/issued"},
      {"POST", "/v1/ns/shop/counters/c/void", false, true},
      {"POST", "/v1/ns/shop/counters/c/set", false, true},
      {"POST", "/v1/ns/shop/once/begin", false, true},
      {"POST", "/v1/ns/shop/once/complete", false, true},
      {"POST", "/v1/ns/shop/once/fail", false, true},
      {"POST", "/v1/ns/shop/once/renew", false, true},
      {"POST", "/v1/ns/shop/once/reset", false, true},
      {"GET", "/v1/ns/shop/once?key=k"},
      {"POST", "/v1/ns/shop/locks/l/acquire", false, true},
      {"POST", "/v1/ns/shop/locks/l/release", false, true},
      {"POST", "/v1/ns/shop/locks/l/renew", false, true},
      {"POST", "/v1/ns/shop/locks/l/force-release", false, true},
      {"GET", "/v1/ns/shop/locks/l"},
      {"GET", "/v1/ns/shop/locks"},
      {"GET", "/v1/ns/shop/settings"},
      {"PUT", "/v1/ns/shop/settings", false, true},
      {"POST", "/v1/admin/tokens", false, true},
      {"GET", "/v1/admin/tokens"},
      {"DELETE", "/v1/admin/tokens/x"},
      {"GET", "/v1/admin/audit"},
      {"GET", "/v1/whoami", true},
      {"GET", "/v1/namespaces", true},
  };
  auto nobody = as("");
  auto other = as(other_writer_);
  auto admin = as(admin_);
  const std::string huge = R"({"note":")" + std::string(70 * 1024, 'x') + "\"}";
  for (const auto& op : ops) {
    SCOPED_TRACE(op.method + " " + op.target);
    EXPECT_EQ(nobody.send(op.method, op.target, op.body ? "{}" : "").status, 401);
    if (!op.any_scope) {
      EXPECT_EQ(other.send(op.method, op.target, op.body ? "{}" : "").status, 403);
    }
    if (op.body) {
      EXPECT_EQ(admin.send(op.method, op.target, huge).status, 413);
    }
  }
  EXPECT_EQ(nobody.send("GET", "/metrics").status, 401);
}

}  // namespace
}  // namespace ichido::testing
