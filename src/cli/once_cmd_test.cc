// Unit tests of `ichido once …`: durations, options -> request mapping, usage errors. `once run`
// itself is exercised end to end in tests/integration/once_test.cc.
#include "cli/once_cmd.h"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <cstdlib>
#include <sstream>

#include "cli/app.h"
#include "cli/duration.h"

namespace ichido::cli {
namespace {

namespace json = boost::json;

TEST(Duration, UnitsAndBareSeconds) {
  EXPECT_EQ(parse_duration_ms("1500ms"), 1500);
  EXPECT_EQ(parse_duration_ms("60s"), 60000);
  EXPECT_EQ(parse_duration_ms("60"), 60000) << "a bare number is seconds";
  EXPECT_EQ(parse_duration_ms("5m"), 300000);
  EXPECT_EQ(parse_duration_ms("30d"), std::int64_t{30} * 24 * 3600 * 1000);
  EXPECT_FALSE(parse_duration_ms("0s"));
  EXPECT_FALSE(parse_duration_ms("-1s"));
  EXPECT_FALSE(parse_duration_ms("1.5s"));
}

TEST(SizeBytes, BinaryAndDecimalUnitsAndNoOverflow) {
  EXPECT_EQ(parse_size_bytes("0"), 0u);
  EXPECT_EQ(parse_size_bytes("64MiB"), 64u << 20);
  EXPECT_EQ(parse_size_bytes("1GB"), 1000000000u);
  EXPECT_EQ(parse_size_bytes("2TiB"), std::uint64_t{2} << 40);
  EXPECT_EQ(parse_size_bytes("3TB"), std::uint64_t{3000000000000});
  EXPECT_FALSE(parse_size_bytes("1000000000TiB")) << "overflows 64 bits";
  EXPECT_FALSE(parse_size_bytes("5 MiB"));
  EXPECT_FALSE(parse_size_bytes("MiB"));
}

class OnceCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("ICHIDO_URL");
    unsetenv("ICHIDO_NS");
  }
  std::optional<int> parse(std::vector<std::string> args) {
    args.insert(args.begin(), "ichido");
    return cli_.parse(args, out_);
  }
  Request request_of(std::vector<std::string> args) {
    auto done = parse(std::move(args));
    EXPECT_FALSE(done.has_value()) << serr_.str();
    if (!cli_.plan().http) {
      ADD_FAILURE() << "no HTTP call planned";
      return {};
    }
    return cli_.plan().http->request;
  }
  static json::value body_of(const Request& r) { return json::parse(r.body); }

  server::ServeConfig served_;
  Cli cli_{{.serve = [this](const server::ServeConfig& c) {
    served_ = c;
    return 0;
  }}};
  std::ostringstream sout_, serr_;
  Output out_{sout_, serr_};
};

TEST_F(OnceCliTest, BeginMapsEveryOption) {
  Request r =
      request_of({"once", "begin", "<m/1@example.com>", "--ns", "mail", "--owner", "A", "--lease",
                  "90s", "--fingerprint", "fp", "--wait", "10s", "--max-attempts", "3"});
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/v1/ns/mail/once/begin");
  json::object body = body_of(r).as_object();
  EXPECT_EQ(body.at("request_id").as_string().size(), 32u) << "a fresh request_id per invocation";
  body.erase("request_id");
  EXPECT_EQ(body, json::parse(R"({"key": "<m/1@example.com>", "owner": "A",
      "lease_ms": 90000, "fingerprint": "fp", "wait_ms": 10000, "max_attempts": 3})"));
  EXPECT_EQ(r.read_timeout, std::chrono::milliseconds(40000)) << "the wait plus the usual slack";
}

// Runs `once begin KEY --ns mail` against a fake answer; returns the exit code.
class OnceBeginOutcomeTest : public OnceCliTest {
 protected:
  int begin_answered(const std::string& body) {
    EXPECT_FALSE(parse({"once", "begin", "<m 1@example.com>", "--ns", "mail"}).has_value());
    return cli_.run(out_, [body](const Request&) {
      HttpResult r;
      r.response = HttpResponse{200, body, {}};
      return r;
    });
  }
};

TEST_F(OnceBeginOutcomeTest, AcquiredExitsZeroWithOnlyTheTokenOnStdout) {
  EXPECT_EQ(begin_answered(R"({"outcome":"acquired","token":42,"attempt":1,
      "lease_expires_at":"2026-04-01T09:31:00.000Z"})"),
            kExitOk);
  EXPECT_EQ(sout_.str(), "42\n");
  EXPECT_EQ(serr_.str(), "acquired (attempt 1) until 2026-04-01T09:31:00.000Z\n");
}

TEST_F(OnceBeginOutcomeTest, CompletedExitsTenWithTheStoredResultOnStdout) {
  EXPECT_EQ(begin_answered(R"({"outcome":"completed","result":{"ticket":"T-1"},
      "completed_at":"2026-04-01T09:30:12.345Z"})"),
            kExitCompleted);
  EXPECT_EQ(sout_.str(), "{\"ticket\":\"T-1\"}\n");
}

TEST_F(OnceBeginOutcomeTest, InProgressExits75WithNothingOnStdout) {
  EXPECT_EQ(begin_answered(R"({"outcome":"in_progress","owner":"outlook-A",
      "lease_expires_at":"2026-04-01T09:31:00.000Z","retry_after_ms":59874})"),
            kExitTempFail);
  EXPECT_EQ(sout_.str(), "");
  EXPECT_NE(serr_.str().find("in progress elsewhere: owner outlook-A"), std::string::npos);
}

TEST_F(OnceBeginOutcomeTest, DeadExits65AndTheResetHintKeepsTheNamespace) {
  EXPECT_EQ(begin_answered(R"({"outcome":"dead","attempts":5,"last_error":"smtp timeout"})"),
            kExitDead);
  EXPECT_EQ(sout_.str(), "");
  EXPECT_NE(serr_.str().find("ichido once reset '<m 1@example.com>' --ns mail"), std::string::npos)
      << serr_.str();
}

TEST_F(OnceCliTest, CompleteSendsTheResultAsJson) {
  Request r = request_of({"once", "complete", "k", "--token", "17", "--result", R"({"a":[1]})"});
  EXPECT_EQ(r.target, "/v1/ns/default/once/complete");
  EXPECT_EQ(body_of(r), json::parse(R"({"key": "k", "token": 17, "result": {"a": [1]}})"));
  EXPECT_EQ(parse({"once", "complete", "k", "--token", "17", "--result", "not json"}), kExitUsage);
  EXPECT_EQ(parse({"once", "complete", "k"}), kExitUsage) << "--token is required";
}

TEST_F(OnceCliTest, FailRenewGetListReset) {
  EXPECT_EQ(
      body_of(request_of({"once", "fail", "k", "--token", "3", "--error", "e", "--no-retry"})),
      json::parse(R"({"key": "k", "token": 3, "error": "e", "retry": false})"));
  EXPECT_EQ(body_of(request_of({"once", "renew", "k", "--token", "3", "--lease", "2m"})),
            json::parse(R"({"key": "k", "token": 3, "lease_ms": 120000})"));
  EXPECT_EQ(request_of({"once", "get", "a b/ü"}).target, "/v1/ns/default/once?key=a%20b%2F%C3%BC");
  EXPECT_EQ(request_of({"once", "list", "--state", "expired", "--limit", "5"}).target,
            "/v1/ns/default/once?state=expired&limit=5");
  EXPECT_EQ(parse({"once", "list", "--state", "finished"}), kExitUsage);
  EXPECT_EQ(body_of(request_of({"once", "reset", "k"})), json::parse(R"({"key": "k"})"));
}

TEST_F(OnceCliTest, BadDurationsAreUsageErrors) {
  EXPECT_EQ(parse({"once", "begin", "k", "--lease", "soon"}), kExitUsage);
  EXPECT_EQ(parse({"serve", "--once-retention", "0s"}), kExitUsage);
}

TEST_F(OnceCliTest, ServeTakesTheRetention) {
  ASSERT_FALSE(parse({"serve", "--once-retention", "7d"}).has_value()) << serr_.str();
  EXPECT_EQ(cli_.run(out_), 0);
  EXPECT_EQ(served_.once_retention_ms, std::int64_t{7} * 24 * 3600 * 1000);
}

TEST_F(OnceCliTest, RunTakesTheCommandAfterTheDashes) {
  EXPECT_FALSE(parse({"once", "run", "k", "--lease", "5s", "--", "sh", "-c", "echo hi"}));
  EXPECT_TRUE(cli_.plan().local);
}

TEST_F(OnceCliTest, RunWithoutACommandIsAUsageError) {
  EXPECT_EQ(parse({"once", "run", "k"}), kExitUsage);
}

}  // namespace
}  // namespace ichido::cli
