// Unit tests of the ichido command line: URL parsing, options -> request mapping, output and exit
// codes (with a fake transport), and the HTTP client against a tiny in-process server.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "cli/app.h"
#include "cli/client.h"
#include "cli/command.h"
#include "cli/counter_cmd.h"
#include "cli/lock_cmd.h"

namespace ichido::cli {
namespace {

namespace json = boost::json;

// ---------------------------------------------------------------------------------------------
// Base URL parsing and encoding

TEST(ParseBaseUrl, HostPortAndPrefix) {
  BaseUrlResult r = parse_base_url("http://127.0.0.1:7878");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.url->host, "127.0.0.1");
  EXPECT_EQ(r.url->port, 7878);
  EXPECT_EQ(r.url->prefix, "");

  r = parse_base_url("http://ichido.example.com/tools/ichido/");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.url->host, "ichido.example.com");
  EXPECT_EQ(r.url->port, 80);
  EXPECT_EQ(r.url->prefix, "/tools/ichido");
  EXPECT_EQ(r.url->to_string(), "http://ichido.example.com:80/tools/ichido");
}

TEST(ParseBaseUrl, WithoutSchemeMeansHttp) {
  BaseUrlResult r = parse_base_url("localhost:9000");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.url->host, "localhost");
  EXPECT_EQ(r.url->port, 9000);
}

TEST(ParseBaseUrl, Ipv6Literal) {
  BaseUrlResult r = parse_base_url("http://[::1]:7878");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.url->host, "::1");
  EXPECT_EQ(r.url->to_string(), "http://[::1]:7878");
}

TEST(ParseBaseUrl, RejectsWhatItCannotUse) {
  for (const char* bad :
       {"", "ftp://h", "https://u:p@h:1", "http://u:p@h:1", "http://h:0", "http://h:99999",
        "http://h:12x", "http://h/?q=1", "http://h/#f", "http://:80", "http://"}) {
    BaseUrlResult r = parse_base_url(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_FALSE(r.error.empty()) << bad;
  }
}

TEST(ParseBaseUrl, HttpsWithDefaultPort443) {
  BaseUrlResult r = parse_base_url("https://ichido.example.com/ichido");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_TRUE(r.url->tls);
  EXPECT_EQ(r.url->port, 443);
  EXPECT_EQ(r.url->prefix, "/ichido");
  EXPECT_EQ(r.url->to_string(), "https://ichido.example.com:443/ichido");
  r = parse_base_url("https://127.0.0.1:8443");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_TRUE(r.url->tls);
  EXPECT_EQ(r.url->port, 8443);
  r = parse_base_url("127.0.0.1:8443");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_FALSE(r.url->tls) << "no scheme means http";
}

TEST(PercentEncode, EncodesAllButUnreserved) {
  EXPECT_EQ(percent_encode("AZaz09-._~"), "AZaz09-._~");
  EXPECT_EQ(percent_encode("<msg-id@example.com>"), "%3Cmsg-id%40example.com%3E");
  EXPECT_EQ(percent_encode("a/b c&d=e+f?#%"), "a%2Fb%20c%26d%3De%2Bf%3F%23%25");
  EXPECT_EQ(percent_encode("受付"), "%E5%8F%97%E4%BB%98");
}

// ---------------------------------------------------------------------------------------------
// Command line -> request

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("ICHIDO_URL");
    unsetenv("ICHIDO_NS");
    unsetenv("ICHIDO_TOKEN");
  }

  // Parses args (without the leading "ichido"); expects success and returns the request.
  Request request_of(std::vector<std::string> args) {
    args.insert(args.begin(), "ichido");
    std::optional<int> done = cli_.parse(args, out_);
    EXPECT_FALSE(done.has_value()) << "exit " << done.value_or(-1) << ": " << err_.str();
    if (!cli_.plan().http) {
      ADD_FAILURE() << "no HTTP call planned";
      return {};
    }
    return cli_.plan().http->request;
  }

  std::optional<int> parse(std::vector<std::string> args) {
    args.insert(args.begin(), "ichido");
    return cli_.parse(args, out_);
  }

  static json::value body_of(const Request& r) { return json::parse(r.body); }

  server::ServeConfig served_;
  std::vector<std::chrono::milliseconds> slept_;
  Cli cli_{{.serve =
                [this](const server::ServeConfig& c) {
                  served_ = c;
                  return 7;
                },
            .sleep = [this](std::chrono::milliseconds d) { slept_.push_back(d); }}};
  std::ostringstream sout_, serr_;
  Output out_{sout_, serr_};
  std::ostringstream& err_ = serr_;
};

TEST_F(CliTest, NextWithKeyAndNote) {
  Request r = request_of({"counter", "next", "receipts", "--key", "form-123", "--note", "hi"});
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/v1/ns/default/counters/receipts/next");
  EXPECT_EQ(body_of(r), json::parse(R"({"key": "form-123", "note": "hi"})"));
}

TEST_F(CliTest, NextWithoutKeySendsEmptyObject) {
  Request r = request_of({"counter", "next", "receipts"});
  EXPECT_EQ(body_of(r), json::object());
}

TEST_F(CliTest, NamespaceBeforeOrAfterTheSubcommand) {
  EXPECT_EQ(request_of({"--ns", "acct", "counter", "get", "r"}).target, "/v1/ns/acct/counters/r");
}

TEST_F(CliTest, NamespaceAfterTheSubcommand) {
  EXPECT_EQ(request_of({"counter", "get", "r", "--ns", "acct", "--json"}).target,
            "/v1/ns/acct/counters/r");
  EXPECT_TRUE(cli_.connection().json);
}

TEST(CliEnv, NamespaceAndUrlFromEnvironment) {
  setenv("ICHIDO_NS", "team-a", 1);
  setenv("ICHIDO_URL", "http://10.0.0.1:9", 1);
  Cli cli({});
  std::ostringstream o, e;
  Output out{o, e};
  ASSERT_FALSE(cli.parse({"ichido", "counter", "list"}, out).has_value()) << e.str();
  EXPECT_EQ(cli.plan().http->request.target, "/v1/ns/team-a/counters");
  EXPECT_EQ(cli.connection().url, "http://10.0.0.1:9");
  unsetenv("ICHIDO_NS");
  unsetenv("ICHIDO_URL");
}

TEST_F(CliTest, NamesArePercentEncodedInThePath) {
  // The server rejects such names; the CLI must still not build a different path from them.
  EXPECT_EQ(request_of({"counter", "get", "a/../b", "--ns", "x y"}).target,
            "/v1/ns/x%20y/counters/a%2F..%2Fb");
}

TEST_F(CliTest, CreateSendsOnlyGivenFields) {
  Request r = request_of({"counter", "create", "receipts"});
  EXPECT_EQ(r.method, "PUT");
  EXPECT_EQ(r.target, "/v1/ns/default/counters/receipts");
  EXPECT_EQ(body_of(r), json::object());
}

TEST_F(CliTest, CreateWithEveryOption) {
  Request r = request_of({"counter", "create", "receipts", "--start", "100", "--max", "9999",
                          "--format", "R-{yyyy}-{seq:4}", "--period", "year", "--timezone",
                          "Asia/Tokyo", "--require-key"});
  EXPECT_EQ(body_of(r), json::parse(R"({"start": 100, "max": 9999, "format": "R-{yyyy}-{seq:4}",
      "period": "year", "timezone": "Asia/Tokyo", "require_key": true})"));
}

TEST_F(CliTest, CreateAFiscalYearCounter) {
  Request r =
      request_of({"counter", "create", "invoices", "--format", "{era_initial}{era_year:2}-{seq:4}",
                  "--period", "fiscal_year", "--fiscal-year-start", "10"});
  EXPECT_EQ(body_of(r), json::parse(R"({"format": "{era_initial}{era_year:2}-{seq:4}",
      "period": "fiscal_year", "fiscal_year_start": 10})"));
  EXPECT_EQ(
      parse({"counter", "create", "r", "--period", "fiscal_year", "--fiscal-year-start", "13"}),
      kExitUsage);
  EXPECT_NE(err_.str().find("fiscal-year-start"), std::string::npos) << err_.str();
}

TEST_F(CliTest, CreateRejectsUnknownPeriod) {
  EXPECT_EQ(parse({"counter", "create", "r", "--period", "week"}), kExitUsage);
  EXPECT_NE(err_.str().find("period"), std::string::npos) << err_.str();
}

TEST_F(CliTest, CreateRejectsNonInteger) {
  EXPECT_EQ(parse({"counter", "create", "r", "--start", "1.5"}), kExitUsage);
}

TEST_F(CliTest, GetAndList) {
  Request get = request_of({"counter", "get", "r"});
  EXPECT_EQ(get.method, "GET");
  EXPECT_TRUE(get.body.empty());
}

TEST_F(CliTest, List) {
  Request list = request_of({"counter", "list"});
  EXPECT_EQ(list.method, "GET");
  EXPECT_EQ(list.target, "/v1/ns/default/counters");
}

TEST_F(CliTest, IssuedByKeyIsPercentEncoded) {
  Request r = request_of({"counter", "issued", "r", "--key", "<id@example.com> 受付&x=1"});
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(
      r.target,
      "/v1/ns/default/counters/r/issued?key=%3Cid%40example.com%3E%20%E5%8F%97%E4%BB%98%26x%3D1");
}

TEST_F(CliTest, IssuedPage) {
  Request r = request_of(
      {"counter", "issued", "r", "--after", "10", "--limit", "5", "--period", "2026-04"});
  EXPECT_EQ(r.target, "/v1/ns/default/counters/r/issued?after=10&limit=5&period=2026-04");
}

TEST_F(CliTest, IssuedKeyExcludesPaging) {
  EXPECT_EQ(parse({"counter", "issued", "r", "--key", "k", "--after", "3"}), kExitUsage);
}

TEST_F(CliTest, IssuedLimitIsBounded) {
  EXPECT_EQ(parse({"counter", "issued", "r", "--limit", "1001"}), kExitUsage);
}

TEST_F(CliTest, Void) {
  Request r = request_of({"counter", "void", "r", "17", "--period", "2026", "--reason", "typo"});
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/v1/ns/default/counters/r/void");
  EXPECT_EQ(body_of(r), json::parse(R"({"value": 17, "period": "2026", "reason": "typo"})"));
}

TEST_F(CliTest, VoidNeedsAValue) { EXPECT_EQ(parse({"counter", "void", "r"}), kExitUsage); }

TEST_F(CliTest, Set) {
  Request r = request_of({"counter", "set", "r", "--expected", "41", "--value", "100"});
  EXPECT_EQ(r.target, "/v1/ns/default/counters/r/set");
  EXPECT_EQ(body_of(r), json::parse(R"({"expected_last_value": 41, "last_value": 100})"));
}

TEST_F(CliTest, SetNeedsBothValues) {
  EXPECT_EQ(parse({"counter", "set", "r", "--expected", "41"}), kExitUsage);
}

TEST_F(CliTest, UsageErrors) {
  EXPECT_EQ(parse({}), kExitUsage);
  EXPECT_EQ(parse({"counter"}), kExitUsage);
  EXPECT_EQ(parse({"counter", "frobnicate"}), kExitUsage);
  EXPECT_EQ(parse({"counter", "next"}), kExitUsage);
}

TEST_F(CliTest, AnUnknownSubcommandNamesItselfAndItsGroup) {
  EXPECT_EQ(parse({"lock", "aquire", "x"}), kExitUsage);
  EXPECT_EQ(err_.str(),
            "error: usage: 'aquire' is not a command of 'ichido lock' (acquire, release, renew, "
            "get, list, force-release, run); see ichido lock --help\n");
}

TEST_F(CliTest, AnUnknownTopLevelCommandNamesItself) {
  EXPECT_EQ(parse({"--ns", "x", "locks", "acquire"}), kExitUsage);
  EXPECT_NE(err_.str().find("'locks' is not a command of 'ichido' (serve, counter, once, lock, "
                            "token"),
            std::string::npos)
      << err_.str();
}

TEST_F(CliTest, AGroupWithoutItsCommandSaysWhichItNeeds) {
  EXPECT_EQ(parse({"once"}), kExitUsage);
  EXPECT_NE(err_.str().find("'ichido once' needs a command (begin, complete"), std::string::npos)
      << err_.str();
}

TEST_F(CliTest, BadUrlIsAUsageError) {
  EXPECT_EQ(parse({"counter", "list", "--url", "ftp://x"}), kExitUsage);
  EXPECT_NE(err_.str().find("use http:// or https://"), std::string::npos) << err_.str();
}

TEST_F(CliTest, CacertMustBeAnExistingFile) {
  EXPECT_EQ(parse({"counter", "list", "--url", "https://x", "--cacert", "/nonexistent.pem"}),
            kExitUsage);
  EXPECT_NE(err_.str().find("--cacert"), std::string::npos) << err_.str();
}

TEST_F(CliTest, HelpListsExitCodesAndExamples) {
  EXPECT_EQ(parse({"--help"}), kExitOk);
  const std::string help = sout_.str();
  EXPECT_NE(help.find("Exit codes"), std::string::npos) << help;
  EXPECT_NE(help.find("ichido counter next receipts --key form-123"), std::string::npos);
  for (const char* line :
       {"\n  10   once begin: already completed", "\n  65   once begin, once run: dead",
        "\n  75   lock acquire, lock run: not acquired", "\n  76   lock run: the lease was lost",
        "\n  126  ", "\n  127  ", "ICHIDO_CACERT"}) {
    EXPECT_NE(help.find(line), std::string::npos) << line << " in\n" << help;
  }
}

TEST_F(CliTest, DurationsOutsideTheServersBoundsAreUsageErrorsInOptionTerms) {
  EXPECT_EQ(parse({"lock", "acquire", "l", "--lease", "500ms"}), kExitUsage);
  EXPECT_NE(err_.str().find("--lease: '500ms' is out of range: from 1s to 1h"), std::string::npos)
      << err_.str();
  EXPECT_EQ(parse({"once", "begin", "k", "--wait", "301s"}), kExitUsage);
  EXPECT_EQ(parse({"once", "run", "k", "--lease", "2h", "--", "true"}), kExitUsage);
}

TEST(ShellQuote, QuotesOnlyWhatAShellWouldSplitOrExpand) {
  EXPECT_EQ(shell_quote("nightly-2026-04-01"), "nightly-2026-04-01");
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote("<m@x>"), "'<m@x>'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(ns_hint("shop"), " --ns shop");
}

TEST_F(CliTest, SubcommandHelpHasAnExample) {
  EXPECT_EQ(parse({"counter", "next", "--help"}), kExitOk);
  EXPECT_NE(sout_.str().find("Example:"), std::string::npos) << sout_.str();
  EXPECT_NE(sout_.str().find("--key"), std::string::npos);
  EXPECT_NE(sout_.str().find("--url"), std::string::npos);
}

TEST_F(CliTest, ServeFillsTheConfig) {
  ASSERT_FALSE(parse({"serve",
                      "--listen",
                      "0.0.0.0:0",
                      "--data",
                      "/tmp/d",
                      "--no-auth",
                      "--threads",
                      "3",
                      "--max-body",
                      "1024",
                      "--max-header",
                      "2048",
                      "--read-timeout-ms",
                      "5",
                      "--idle-timeout-ms",
                      "6",
                      "--drain-timeout-ms",
                      "7",
                      "--max-connections",
                      "8"})
                   .has_value())
      << err_.str();
  EXPECT_EQ(cli_.run(out_), 7);  // the serve function's return value is the exit code
  EXPECT_EQ(served_.listen, "0.0.0.0:0");
  EXPECT_EQ(served_.data_dir, "/tmp/d");
  EXPECT_TRUE(served_.no_auth);
  EXPECT_EQ(served_.threads, 3);
  EXPECT_EQ(served_.max_body_bytes, 1024u);
  EXPECT_EQ(served_.max_header_bytes, 2048u);
  EXPECT_EQ(served_.read_timeout_ms, 5u);
  EXPECT_EQ(served_.idle_timeout_ms, 6u);
  EXPECT_EQ(served_.drain_timeout_ms, 7u);
  EXPECT_EQ(served_.max_connections, 8u);
}

TEST_F(CliTest, ServeDefaultsAreTheConfigDefaults) {
  ASSERT_FALSE(parse({"serve"}).has_value()) << err_.str();
  EXPECT_EQ(cli_.run(out_), 7);
  const server::ServeConfig defaults;
  EXPECT_EQ(served_.listen, defaults.listen);
  EXPECT_EQ(served_.data_dir, defaults.data_dir);
  EXPECT_EQ(served_.no_auth, defaults.no_auth);
  EXPECT_EQ(served_.max_body_bytes, defaults.max_body_bytes);
  EXPECT_EQ(served_.max_connections, defaults.max_connections);
}

TEST_F(CliTest, ServeTakesTheWaiterLimits) {
  ASSERT_FALSE(parse({"serve", "--max-waiters-per-lock", "5", "--max-waiters", "9"}).has_value())
      << err_.str();
  EXPECT_EQ(cli_.run(out_), 7);
  EXPECT_EQ(served_.max_waiters_per_lock, 5u);
  EXPECT_EQ(served_.max_waiters, 9u);
}

// --- lock ------------------------------------------------------------------------------------

TEST(LockDuration, ParsesUnitsBareSecondsAndZero) {
  EXPECT_EQ(parse_wait_ms("30s"), 30000);
  EXPECT_EQ(parse_wait_ms("30"), 30000);
  EXPECT_EQ(parse_wait_ms("250ms"), 250);
  EXPECT_EQ(parse_wait_ms("2m"), 120000);
  EXPECT_EQ(parse_wait_ms("1h"), 3600000);
  EXPECT_EQ(parse_wait_ms("0"), 0);
  EXPECT_EQ(parse_wait_ms("0s"), 0);
  EXPECT_EQ(parse_wait_ms("00ms"), 0);
  for (const char* bad : {"", "s", "-1s", "1.5s", "10x", "ms", "0x"}) {
    EXPECT_FALSE(parse_wait_ms(bad).has_value()) << bad;
  }
}

TEST_F(CliTest, LockAcquireSendsOwnerWaitLeaseAndAFreshRequestId) {
  Request r = request_of(
      {"lock", "acquire", "invoices", "--owner", "script-A", "--wait", "10s", "--lease", "45s"});
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/v1/ns/default/locks/invoices/acquire");
  json::object body = body_of(r).as_object();
  ASSERT_TRUE(body.contains("request_id"));
  const std::string id(body.at("request_id").as_string());
  EXPECT_EQ(id.size(), 32u);
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
  body.erase("request_id");
  EXPECT_EQ(body, json::parse(R"({"owner":"script-A","wait_ms":10000,"lease_ms":45000})"));
  EXPECT_GE(r.read_timeout, std::chrono::milliseconds(10000)) << "must outlast the wait";

  Cli other({});
  std::ostringstream o, e;
  Output out{o, e};
  ASSERT_FALSE(other.parse({"ichido", "lock", "acquire", "invoices"}, out).has_value());
  EXPECT_NE(body_of(other.plan().http->request).at("request_id"), json::value(id))
      << "every invocation has its own request_id";
}

TEST_F(CliTest, LockAcquireTakesAGivenRequestId) {
  Request r = request_of({"lock", "acquire", "l", "--request-id", "run-42"});
  EXPECT_EQ(body_of(r).at("request_id"), "run-42");
}

TEST_F(CliTest, LockReleaseRenewGetListForceRelease) {
  Request rel = request_of({"lock", "release", "l", "--token", "7"});
  EXPECT_EQ(rel.target, "/v1/ns/default/locks/l/release");
  EXPECT_EQ(body_of(rel), json::parse(R"({"token":7})"));
}

TEST_F(CliTest, LockRenew) {
  Request r = request_of({"lock", "renew", "l", "--token", "7", "--lease", "2m"});
  EXPECT_EQ(r.target, "/v1/ns/default/locks/l/renew");
  EXPECT_EQ(body_of(r), json::parse(R"({"token":7,"lease_ms":120000})"));
}

TEST_F(CliTest, LockGetWithToken) {
  Request r = request_of({"lock", "get", "l", "--token", "9", "--ns", "acct"});
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.target, "/v1/ns/acct/locks/l?token=9");
}

TEST_F(CliTest, LockListAndForceRelease) {
  EXPECT_EQ(request_of({"lock", "list"}).target, "/v1/ns/default/locks");
  Request f = request_of({"lock", "force-release", "l"});
  EXPECT_EQ(f.method, "POST");
  EXPECT_EQ(f.target, "/v1/ns/default/locks/l/force-release");
}

TEST_F(CliTest, LockReleaseNeedsAToken) {
  EXPECT_EQ(parse({"lock", "release", "l"}), kExitUsage);
  EXPECT_EQ(parse({"lock", "acquire", "l", "--wait", "soon"}), kExitUsage);
}

TEST_F(CliTest, LockRunNeedsACommand) { EXPECT_EQ(parse({"lock", "run", "l"}), kExitUsage); }

// ---------------------------------------------------------------------------------------------
// Running a call: output and exit codes, with a fake transport

Transport answer(int status, std::string body, Request* seen = nullptr) {
  return [=](const Request& r) {
    if (seen != nullptr) *seen = r;
    HttpResult result;
    result.response = HttpResponse{status, body, {}};
    return result;
  };
}

TEST_F(CliTest, NextPrintsTheFormattedNumber) {
  ASSERT_FALSE(parse({"counter", "next", "r", "--key", "k"}).has_value());
  EXPECT_EQ(cli_.run(out_, answer(200, R"({"value":1,"formatted":"R-0001","replayed":false})")),
            kExitOk);
  EXPECT_EQ(sout_.str(), "R-0001\n");
  EXPECT_EQ(serr_.str(), "");
}

TEST_F(CliTest, NextSaysReplayedOnStderr) {
  ASSERT_FALSE(parse({"counter", "next", "r", "--key", "k"}).has_value());
  EXPECT_EQ(cli_.run(out_, answer(200, R"({"value":1,"formatted":"R-0001","replayed":true})")),
            kExitOk);
  EXPECT_EQ(sout_.str(), "R-0001\n");
  EXPECT_EQ(serr_.str(), "(replayed)\n");
}

TEST_F(CliTest, JsonPrintsTheBodyVerbatim) {
  ASSERT_FALSE(parse({"counter", "next", "r", "--json"}).has_value());
  const std::string body = R"({"value":1,"formatted":"R-0001","replayed":false})";
  EXPECT_EQ(cli_.run(out_, answer(200, body + "\n")), kExitOk);
  EXPECT_EQ(sout_.str(), body + "\n");
}

TEST_F(CliTest, ServerErrorIsExitOneWithCodeAndMessage) {
  ASSERT_FALSE(parse({"counter", "set", "r", "--expected", "1", "--value", "2"}).has_value());
  EXPECT_EQ(
      cli_.run(
          out_,
          answer(
              409,
              R"({"error":{"code":"value_mismatch","message":"Read it again.","details":{"last_value":41}}})")),
      kExitServerError);
  EXPECT_EQ(sout_.str(), "");
  EXPECT_EQ(serr_.str(), "error: value_mismatch: Read it again.\n  details: {\"last_value\":41}\n");
}

TEST_F(CliTest, ServerErrorWithJsonAlsoPrintsTheBody) {
  ASSERT_FALSE(parse({"counter", "void", "r", "3", "--json"}).has_value());
  const std::string body =
      R"({"error":{"code":"forbidden","message":"Ask an admin.","details":{}}})";
  EXPECT_EQ(cli_.run(out_, answer(403, body)), kExitServerError);
  EXPECT_EQ(sout_.str(), body + "\n");
  EXPECT_EQ(serr_.str(), "error: forbidden: Ask an admin.\n");
}

TEST_F(CliTest, ErrorsAboutJsonFieldsAreSaidInCommandLineTerms) {
  ASSERT_FALSE(parse({"counter", "next", "receipts", "--ns", "shop"}).has_value());
  EXPECT_EQ(cli_.run(out_, answer(400, R"({"error":{"code":"key_required","message":
      "This counter requires an idempotency key: send \"key\".","details":{"field":"key"}}})")),
            kExitServerError);
  EXPECT_NE(serr_.str().find("error: key_required: counter receipts requires --key"),
            std::string::npos)
      << serr_.str();
  EXPECT_EQ(serr_.str().find("send \"key\""), std::string::npos) << serr_.str();
}

TEST_F(CliTest, AMissingCounterHintNamesTheNamespace) {
  ASSERT_FALSE(parse({"counter", "get", "receipts", "--ns", "shop"}).has_value());
  EXPECT_EQ(cli_.run(out_, answer(404, R"({"error":{"code":"counter_not_found","message":"x"}})")),
            kExitServerError);
  EXPECT_NE(serr_.str().find("ichido counter create receipts --ns shop"), std::string::npos)
      << serr_.str();
}

TEST_F(CliTest, NonApiErrorBodyFromAProxyIsRetriedThenShown) {
  ASSERT_FALSE(parse({"counter", "list"}).has_value());
  int calls = 0;
  EXPECT_EQ(cli_.run(out_,
                     [&](const Request&) {
                       ++calls;
                       return HttpResult{HttpResponse{502, "<html>Bad Gateway</html>\n", {}}, {}};
                     }),
            kExitServerError);
  EXPECT_EQ(calls, 4);
  EXPECT_NE(serr_.str().find("error: http_502: <html>Bad Gateway</html>\n"), std::string::npos)
      << serr_.str();
}

TEST_F(CliTest, UnreachableIsRetriedWithBackoffThenExitThree) {
  ASSERT_FALSE(parse({"counter", "list"}).has_value());
  int calls = 0;
  EXPECT_EQ(cli_.run(out_,
                     [&](const Request&) {
                       ++calls;
                       return HttpResult{std::nullopt, "refused"};
                     }),
            kExitUnreachable);
  EXPECT_EQ(calls, 4);
  ASSERT_EQ(slept_.size(), 3u);
  // 0.5 s x (1 + n^2), jittered down to half at most.
  const std::int64_t base[] = {500, 1000, 2500};
  for (int i = 0; i < 3; ++i) {
    EXPECT_GE(slept_[i].count(), base[i] / 2) << i;
    EXPECT_LE(slept_[i].count(), base[i]) << i;
  }
  EXPECT_NE(serr_.str().find("ichido: refused; retrying in "), std::string::npos) << serr_.str();
  EXPECT_NE(serr_.str().find("error: unreachable: refused\n"), std::string::npos);
}

TEST_F(CliTest, ARefusedCertificateIsNotRetried) {
  ASSERT_FALSE(parse({"counter", "list"}).has_value());
  int calls = 0;
  EXPECT_EQ(cli_.run(out_,
                     [&](const Request&) {
                       ++calls;
                       return HttpResult{std::nullopt, "certificate verify failed", true};
                     }),
            kExitUnreachable);
  EXPECT_EQ(calls, 1);
}

TEST_F(CliTest, FourHundredsAreNeverRetriedButFourTwentyNineIs) {
  ASSERT_FALSE(parse({"counter", "get", "r"}).has_value());
  int calls = 0;
  EXPECT_EQ(cli_.run(out_,
                     [&](const Request&) {
                       ++calls;
                       return HttpResult{HttpResponse{409, R"({"error":{"code":"x"}})", {}}, {}};
                     }),
            kExitServerError);
  EXPECT_EQ(calls, 1);
  calls = 0;
  ASSERT_FALSE(parse({"lock", "acquire", "l"}).has_value());
  EXPECT_EQ(cli_.run(out_,
                     [&](const Request&) {
                       ++calls;
                       if (calls < 3) {
                         return HttpResult{
                             HttpResponse{429, R"({"error":{"code":"too_many_waiters"}})", {}}, {}};
                       }
                       return HttpResult{HttpResponse{200, R"({"acquired":true,"token":5})", {}},
                                         {}};
                     }),
            kExitOk);
  EXPECT_EQ(calls, 3);
}

TEST_F(CliTest, AnUnkeyedNextAndAFailAreNotRetried) {
  for (std::vector<std::string> args :
       {std::vector<std::string>{"counter", "next", "r"},
        std::vector<std::string>{"once", "fail", "k", "--token", "3"},
        std::vector<std::string>{"lock", "release", "l", "--token", "3"}}) {
    Cli cli({.sleep = [](std::chrono::milliseconds) {}});
    std::ostringstream o, e;
    Output out{o, e};
    args.insert(args.begin(), "ichido");
    ASSERT_FALSE(cli.parse(args, out).has_value()) << e.str();
    int calls = 0;
    EXPECT_EQ(cli.run(out,
                      [&](const Request&) {
                        ++calls;
                        return HttpResult{std::nullopt, "connection reset"};
                      }),
              kExitUnreachable);
    EXPECT_EQ(calls, 1) << args[1] << " " << args[2];
  }
}

TEST_F(CliTest, AcquireRetriesResendTheSameRequestIdAndShortenTheWait) {
  ASSERT_FALSE(parse({"lock", "acquire", "l", "--wait", "20s"}).has_value());
  std::vector<Request> sent;
  EXPECT_EQ(cli_.run(out_,
                     [&](const Request& r) {
                       sent.push_back(r);
                       if (sent.size() == 1) return HttpResult{std::nullopt, "timed out"};
                       return HttpResult{
                           HttpResponse{200, R"({"acquired":true,"token":8,"replayed":true})", {}},
                           {}};
                     }),
            kExitOk);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(body_of(sent[0]).at("request_id"), body_of(sent[1]).at("request_id"));
  EXPECT_LE(body_of(sent[1]).at("wait_ms").as_int64(), 20000);
  EXPECT_EQ(sout_.str(), "8\n");
  EXPECT_NE(serr_.str().find("(replayed)"), std::string::npos) << serr_.str();
}

TEST_F(CliTest, LockAcquireNotAcquiredExits75WithNothingOnStdout) {
  ASSERT_FALSE(parse({"lock", "acquire", "l"}).has_value());
  EXPECT_EQ(cli_.run(out_, answer(200, R"({"acquired":false,"holder":{"owner":"B",
      "lease_expires_at":"2026-04-01T09:00:00.000Z"}})")),
            kExitTempFail);
  EXPECT_EQ(sout_.str(), "");
  EXPECT_EQ(serr_.str(), "not acquired: held by B until 2026-04-01T09:00:00.000Z\n");
}

TEST_F(CliTest, LockAcquireAcquiredPrintsOnlyTheToken) {
  ASSERT_FALSE(parse({"lock", "acquire", "l"}).has_value());
  EXPECT_EQ(cli_.run(out_, answer(200, R"({"acquired":true,"token":17,
      "lease_expires_at":"2026-04-01T09:00:00.000Z"})")),
            kExitOk);
  EXPECT_EQ(sout_.str(), "17\n");
}

TEST_F(CliTest, LockAcquireExitCodeHoldsWithJsonToo) {
  ASSERT_FALSE(parse({"lock", "acquire", "l", "--json"}).has_value());
  EXPECT_EQ(cli_.run(out_, answer(200, R"({"acquired":false})")), kExitTempFail);
  EXPECT_EQ(sout_.str(), "{\"acquired\":false}\n");
}

TEST_F(CliTest, GetPrintsAlignedFields) {
  ASSERT_FALSE(parse({"counter", "get", "r"}).has_value());
  EXPECT_EQ(cli_.run(out_, answer(200, R"({"name":"r","last_value":3,"current_period":""})")),
            kExitOk);
  EXPECT_EQ(sout_.str(),
            "name:           r\n"
            "last_value:     3\n"
            "current_period: \n");
}

TEST_F(CliTest, ListPrintsATable) {
  ASSERT_FALSE(parse({"counter", "list"}).has_value());
  EXPECT_EQ(cli_.run(out_, answer(200, R"({"items":[
      {"name":"receipts","last_value":12,"max":9999,"format":"R-{seq:4}","period":"none",
       "current_period":"","issued_count":12,"voided_count":1},
      {"name":"inv","last_value":3,"max":99,"format":"{seq}","period":"year",
       "current_period":"2026","issued_count":3,"voided_count":0}]})")),
            kExitOk);
  EXPECT_EQ(sout_.str(),
            "NAME      LAST  MAX   FORMAT     PERIOD  CURRENT  ISSUED  VOIDED\n"
            "receipts  12    9999  R-{seq:4}  none             12      1\n"
            "inv       3     99    {seq}      year    2026     3       0\n");
}

TEST_F(CliTest, CreateSaysWhatHappened) {
  ASSERT_FALSE(parse({"counter", "create", "r"}).has_value());
  EXPECT_EQ(cli_.run(out_, answer(201, R"({"name":"r"})")), kExitOk);
  EXPECT_EQ(sout_.str(), "created counter r\n");
}

// ---------------------------------------------------------------------------------------------
// HttpClient against a tiny in-process server

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// Serves on 127.0.0.1:0 from one thread, one connection at a time. Answers each request with a
// JSON echo of it, keeps the connection alive, and drops it silently after `per_connection`
// requests (as a server closing an idle keep-alive connection does). With read_then_drop, it first
// reads one more request and drops the connection without answering it (as a server crashing
// mid-request would). With per_connection == 0 it reads requests but never answers.
class EchoServer {
 public:
  explicit EchoServer(int per_connection, bool read_then_drop = false)
      : per_connection_(per_connection), read_then_drop_(read_then_drop) {
    thread_ = std::thread([this] { serve(); });
  }
  ~EchoServer() {
    stop_ = true;
    beast::error_code ec;
    tcp::socket poke(ioc_);
    poke.connect(acceptor_.local_endpoint(), ec);  // wakes a blocked accept
    thread_.join();
  }
  BaseUrl url() const { return {"127.0.0.1", acceptor_.local_endpoint().port(), ""}; }
  int connections() const { return connections_; }
  int requests() const { return requests_; }

 private:
  void serve() {
    while (!stop_) {
      beast::error_code ec;
      tcp::socket s(ioc_);
      acceptor_.accept(s, ec);
      if (ec || stop_) return;
      ++connections_;
      beast::flat_buffer buf;
      for (int n = 0; per_connection_ == 0 || n < per_connection_; ++n) {
        http::request<http::string_body> req;
        http::read(s, buf, req, ec);
        if (ec) break;
        ++requests_;
        if (per_connection_ == 0) continue;  // never answer
        json::object echo;
        echo["method"] = std::string(req.method_string());
        echo["target"] = std::string(req.target());
        echo["auth"] = std::string(req[http::field::authorization]);
        echo["body"] = req.body();
        http::response<http::string_body> res{http::status::ok, 11};
        res.set(http::field::content_type, "application/json");
        res.body() = json::serialize(echo);
        res.keep_alive(true);
        res.prepare_payload();
        http::write(s, res, ec);
        if (ec) break;
      }
      if (read_then_drop_ && !ec) {
        http::request<http::string_body> req;
        http::read(s, buf, req, ec);
        if (!ec) ++requests_;
      }
      s.close(ec);
    }
  }

  asio::io_context ioc_;
  tcp::acceptor acceptor_{ioc_, {asio::ip::make_address("127.0.0.1"), 0}};
  const int per_connection_;
  const bool read_then_drop_;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::atomic<int> requests_{0};
  std::thread thread_;
};

TEST(HttpClient, ReusesOneConnection) {
  EchoServer server(100);
  HttpClient client(server.url(), {.token = "secret"});
  for (int i = 0; i < 3; ++i) {
    HttpResult r = client.post("/v1/x?key=a%2Fb", R"({"n":1})");
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.response->status, 200);
    EXPECT_EQ(r.response->headers["content-type"], "application/json");
    json::value echo = json::parse(r.response->body);
    EXPECT_EQ(echo.at("method"), "POST");
    EXPECT_EQ(echo.at("target"), "/v1/x?key=a%2Fb");
    EXPECT_EQ(echo.at("auth"), "Bearer secret");
    EXPECT_EQ(echo.at("body"), R"({"n":1})");
  }
  EXPECT_EQ(server.connections(), 1);
}

TEST(HttpClient, ReconnectsOnceWhenTheServerClosedTheConnection) {
  EchoServer server(1);
  HttpClient client(server.url(), {.token = ""});
  for (int i = 0; i < 3; ++i) {
    HttpResult r = client.get("/v1/y");
    ASSERT_TRUE(r.ok()) << i << ": " << r.error;
    EXPECT_EQ(json::parse(r.response->body).at("auth"), "");
  }
  EXPECT_EQ(server.connections(), 3);
}

TEST(HttpClient, ResendsAnIdempotentRequestOnceWhenTheConnectionDrops) {
  EchoServer server(1, /*read_then_drop=*/true);
  HttpClient client(server.url());
  ASSERT_TRUE(client.get("/v1/a").ok());
  HttpResult r = client.get("/v1/b");  // read and dropped on connection 1, answered on 2
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(json::parse(r.response->body).at("target"), "/v1/b");
  EXPECT_EQ(server.connections(), 2);
  EXPECT_EQ(server.requests(), 3);
}

TEST(HttpClient, NeverResendsAPost) {
  EchoServer server(1, /*read_then_drop=*/true);
  HttpClient client(server.url());
  ASSERT_TRUE(client.get("/v1/a").ok());
  HttpResult r = client.post("/v1/ns/d/counters/c/next", "{}");  // read, then dropped
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error.find("no answer"), std::string::npos) << r.error;
  EXPECT_EQ(server.connections(), 1);
  EXPECT_EQ(server.requests(), 2);
  HttpResult after = client.get("/v1/c");  // the client recovers on a fresh connection
  ASSERT_TRUE(after.ok()) << after.error;
}

TEST(HttpClient, PrefixIsPrepended) {
  EchoServer server(100);
  BaseUrl base = server.url();
  base.prefix = "/ichido";
  HttpClient client(base);
  HttpResult r = client.get("/v1/z");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(json::parse(r.response->body).at("target"), "/ichido/v1/z");
}

TEST(HttpClient, TokenFromEnvironment) {
  setenv("ICHIDO_TOKEN", "from-env", 1);
  EchoServer server(100);
  HttpClient client(server.url());
  unsetenv("ICHIDO_TOKEN");
  HttpResult r = client.get("/v1/z");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(json::parse(r.response->body).at("auth"), "Bearer from-env");
}

TEST(HttpClient, ReadTimeout) {
  EchoServer server(0);
  HttpClient client(server.url(), {.read_timeout = std::chrono::milliseconds(200)});
  HttpResult r = client.get("/v1/slow");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error.find("timed out"), std::string::npos) << r.error;
}

TEST(HttpClient, ConnectionRefused) {
  std::uint16_t port = 0;
  {
    asio::io_context ioc;
    tcp::acceptor a(ioc, {asio::ip::make_address("127.0.0.1"), 0});
    port = a.local_endpoint().port();
  }
  HttpClient client({"127.0.0.1", port, ""});
  HttpResult r = client.get("/healthz");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error.find("could not connect"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace ichido::cli
