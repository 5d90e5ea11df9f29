// `ichido serve --config FILE`: the file format, precedence of flags, and errors that name the
// file, the line and the key. Settings from the environment (ICHIDO_<FLAG>) and their place
// between the command line and the file.
#include "cli/serve_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <utility>
#include <vector>

#include "cli/app.h"

namespace ichido::cli {
namespace {

TEST(ConfigParse, KeysValuesQuotesCommentsAndTheServeSection) {
  auto r = parse_config(
      "# ichido\n\n[serve]\nlisten = \"0.0.0.0:7878\"  # all interfaces\ndata='/var/lib/ichido'\n"
      "tls_cert = \"/etc/a \\\"b\\\".pem\"\nmax-connections = 20000\r\nmetrics-open = true\n",
      "f.conf");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->size(), 5u);
  EXPECT_EQ((*r)[0].key, "listen");
  EXPECT_EQ((*r)[0].value, "0.0.0.0:7878");
  EXPECT_EQ((*r)[0].line, 4);
  EXPECT_EQ((*r)[1].value, "/var/lib/ichido");
  EXPECT_EQ((*r)[2].key, "tls-cert");
  EXPECT_EQ((*r)[2].value, "/etc/a \"b\".pem");
  EXPECT_EQ((*r)[3].value, "20000");
  EXPECT_EQ((*r)[4].value, "true");
}

TEST(ConfigParse, ErrorsNameTheFileAndLine) {
  auto expect_error = [](const std::string& text, const std::string& part) {
    auto r = parse_config(text, "x.conf");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.error().message.find(part), std::string::npos) << r.error().message;
  };
  expect_error("listen = 1\n\nlisten = 2\n", "x.conf:3: 'listen' is given twice");
  expect_error("[server]\n", "x.conf:1: unknown section [server]");
  expect_error("just words\n", "x.conf:1: expected key = value");
  expect_error("data = \"/tmp\n", "x.conf:1: the string value of 'data' has no closing \"");
  expect_error("data = /tmp/a b\n", "put it in \"quotes\"");
  expect_error("data = \"a\" b\n", "unexpected text after the value of 'data'");
  expect_error("Data = 1\n", "'Data' is not a key");
  expect_error("data =\n", "the value of 'data' is missing");
}

class ServeConfigFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ichido-conf-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    ASSERT_GE(fd, 0);
    ::close(fd);
    path_ = tmpl;
  }
  void TearDown() override { std::remove(path_.c_str()); }
  void write(const std::string& text) { std::ofstream(path_) << text; }
  std::optional<int> parse(std::vector<std::string> args) {
    args.insert(args.begin(), "ichido");
    return cli_.parse(args, out_);
  }

  std::string path_;
  server::ServeConfig served_;
  Cli cli_{{.serve = [this](const server::ServeConfig& c) {
    served_ = c;
    return 0;
  }}};
  std::ostringstream sout_, serr_;
  Output out_{sout_, serr_};
};

TEST_F(ServeConfigFile, FillsTheConfigAndFlagsWin) {
  write(
      "listen = \"0.0.0.0:9000\"\ndata = \"/srv/ichido\"\nmetrics-open = true\n"
      "once-retention = 90d\nlog-format = json\nrequest-log = off\nmax-connections = 20\n");
  ASSERT_FALSE(parse({"serve", "--config", path_, "--listen", "127.0.0.1:1"}).has_value())
      << serr_.str();
  EXPECT_EQ(cli_.run(out_), 0);
  EXPECT_EQ(served_.listen, "127.0.0.1:1");  // the flag
  EXPECT_EQ(served_.data_dir, "/srv/ichido");
  EXPECT_TRUE(served_.metrics_open);
  EXPECT_EQ(served_.once_retention_ms, std::int64_t{90} * 24 * 3600 * 1000);
  EXPECT_EQ(served_.log_format, "json");
  EXPECT_FALSE(served_.request_log);
  EXPECT_EQ(served_.max_connections, 20u);
}

// --store-timeout: 5 s unless told; a duration from the settings file or the command line; out
// of 1s–10m a usage error naming it.
TEST_F(ServeConfigFile, StoreTimeoutIsADurationWithADefaultOfFiveSeconds) {
  ASSERT_FALSE(parse({"serve"}).has_value()) << serr_.str();
  EXPECT_EQ(cli_.run(out_), 0);
  EXPECT_EQ(served_.store_timeout_ms, 5000);
  write("store-timeout = 2s\n");
  ASSERT_FALSE(parse({"serve", "--config", path_}).has_value()) << serr_.str();
  EXPECT_EQ(cli_.run(out_), 0);
  EXPECT_EQ(served_.store_timeout_ms, 2000);
  ASSERT_FALSE(parse({"serve", "--store-timeout", "1500ms"}).has_value()) << serr_.str();
  EXPECT_EQ(cli_.run(out_), 0);
  EXPECT_EQ(served_.store_timeout_ms, 1500);
  EXPECT_EQ(parse({"serve", "--store-timeout", "100ms"}), kExitUsage);
  EXPECT_NE(serr_.str().find("--store-timeout"), std::string::npos) << serr_.str();
}

TEST_F(ServeConfigFile, UnknownKeyIsAUsageErrorNamingKeyAndLine) {
  write("listen = \"0.0.0.0:9000\"\n\nlisten-port = 7\n");
  EXPECT_EQ(parse({"serve", "--config", path_}), kExitUsage);
  EXPECT_NE(serr_.str().find(path_ + ":3: unknown key 'listen-port'"), std::string::npos)
      << serr_.str();
}

TEST_F(ServeConfigFile, ABadValueNamesKeyAndLine) {
  write("threads = many\n");
  EXPECT_EQ(parse({"serve", "--config", path_}), kExitUsage);
  EXPECT_NE(serr_.str().find(path_ + ":1: 'threads'"), std::string::npos) << serr_.str();
  write("log-format = xml\n");
  EXPECT_EQ(parse({"serve", "--config", path_}), kExitUsage);
  EXPECT_NE(serr_.str().find(":1: 'log-format'"), std::string::npos) << serr_.str();
  write("no-auth = yes\n");
  EXPECT_EQ(parse({"serve", "--config", path_}), kExitUsage);
  EXPECT_NE(serr_.str().find("not true or false"), std::string::npos) << serr_.str();
}

TEST_F(ServeConfigFile, CorsOriginsFromTheFileOrTheCommandLineAreCanonical) {
  write("cors-origin = \"HTTPS://Sheets.Example.com:443/, http://127.0.0.1:8080\"\n");
  ASSERT_FALSE(parse({"serve", "--config", path_}).has_value()) << serr_.str();
  EXPECT_EQ(cli_.run(out_), 0);
  EXPECT_EQ(served_.cors_origins,
            (std::vector<std::string>{"https://sheets.example.com", "http://127.0.0.1:8080"}));
}

TEST_F(ServeConfigFile, CorsOriginsOnTheCommandLineWinOverTheFile) {
  write("cors-origin = \"http://127.0.0.1:8080\"\n");
  ASSERT_FALSE(parse({"serve", "--config", path_, "--cors-origin", "https://a.example",
                      "--cors-origin", "https://*.b.example"})
                   .has_value())
      << serr_.str();
  EXPECT_EQ(cli_.run(out_), 0);
  EXPECT_EQ(served_.cors_origins,
            (std::vector<std::string>{"https://a.example", "https://*.b.example"}));
}

TEST_F(ServeConfigFile, ABadCorsOriginInTheFileNamesTheLine) {
  write("\ncors-origin = \"https://ok.example, *\"\n");
  EXPECT_EQ(parse({"serve", "--config", path_}), kExitUsage);
  EXPECT_NE(serr_.str().find(path_ + ":2: 'cors-origin'"), std::string::npos) << serr_.str();
  EXPECT_NE(serr_.str().find("'*' is refused"), std::string::npos) << serr_.str();
}

TEST_F(ServeConfigFile, TheDefaultTimezoneIsUtcUnlessTheFileOrAFlagSetsAKnownZone) {
  write("listen = \"127.0.0.1:0\"\n");
  ASSERT_FALSE(parse({"serve", "--config", path_}).has_value()) << serr_.str();
  EXPECT_EQ(cli_.run(out_), 0);
  EXPECT_EQ(served_.default_timezone, "UTC");
  write("default-timezone = Asia/Tokyo\n");
  ASSERT_FALSE(parse({"serve", "--config", path_}).has_value()) << serr_.str();
  EXPECT_EQ(cli_.run(out_), 0);
  EXPECT_EQ(served_.default_timezone, "Asia/Tokyo");
  ASSERT_FALSE(
      parse({"serve", "--config", path_, "--default-timezone", "Europe/Paris"}).has_value())
      << serr_.str();
  EXPECT_EQ(cli_.run(out_), 0);
  EXPECT_EQ(served_.default_timezone, "Europe/Paris");  // the flag wins
}

TEST_F(ServeConfigFile, AnUnknownDefaultTimezoneIsRefusedBeforeTheServerStarts) {
  write("\ndefault-timezone = \"Asia/Tokio\"\n");
  EXPECT_EQ(parse({"serve", "--config", path_}), kExitUsage);
  EXPECT_NE(serr_.str().find(path_ + ":2: 'default-timezone'"), std::string::npos) << serr_.str();
  EXPECT_NE(serr_.str().find("Asia/Tokio"), std::string::npos) << serr_.str();
  serr_.str("");
  EXPECT_EQ(parse({"serve", "--default-timezone", "JST+9"}), kExitUsage);
  EXPECT_NE(serr_.str().find("--default-timezone"), std::string::npos) << serr_.str();
}

TEST_F(ServeConfigFile, AMissingFileIsAUsageError) {
  EXPECT_EQ(parse({"serve", "--config", "/nonexistent/ichido.conf"}), kExitUsage);
  EXPECT_NE(serr_.str().find("cannot read the configuration file /nonexistent/ichido.conf"),
            std::string::npos)
      << serr_.str();
}

// Sets environment variables for one test and removes them after it.
class ScopedEnv {
 public:
  explicit ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars)
      : vars_(vars) {
    for (const auto& [k, v] : vars_) ::setenv(k, v, 1);
  }
  ~ScopedEnv() {
    for (const auto& [k, v] : vars_) ::unsetenv(k);
  }

 private:
  std::vector<std::pair<const char*, const char*>> vars_;
};

TEST_F(ServeConfigFile, EverySettingReadsItsEnvironmentVariable) {
  ScopedEnv env({{"ICHIDO_LISTEN", "0.0.0.0:7878"},
                 {"ICHIDO_DATA", "/var/lib/ichido"},
                 {"ICHIDO_TLS_CERT", "/c.pem"},
                 {"ICHIDO_TLS_KEY", "/k.pem"},
                 {"ICHIDO_METRICS_OPEN", "true"},
                 {"ICHIDO_LOG_FORMAT", "json"},
                 {"ICHIDO_ONCE_RETENTION", "90d"},
                 {"ICHIDO_MAX_CONNECTIONS", "20"},
                 {"ICHIDO_DRAIN_TIMEOUT_MS", "8000"},
                 {"ICHIDO_STORE", "postgres://db/ichido"}});
  ASSERT_FALSE(parse({"serve"}).has_value()) << serr_.str();
  EXPECT_EQ(cli_.run(out_), 0);
  EXPECT_EQ(served_.listen, "0.0.0.0:7878");
  EXPECT_EQ(served_.data_dir, "/var/lib/ichido");
  EXPECT_EQ(served_.tls_cert, "/c.pem");
  EXPECT_EQ(served_.tls_key, "/k.pem");
  EXPECT_TRUE(served_.metrics_open);
  EXPECT_EQ(served_.log_format, "json");
  EXPECT_EQ(served_.once_retention_ms, std::int64_t{90} * 24 * 3600 * 1000);
  EXPECT_EQ(served_.max_connections, 20u);
  EXPECT_EQ(served_.drain_timeout_ms, 8000u);
  EXPECT_EQ(served_.store_url, "postgres://db/ichido");
}

TEST_F(ServeConfigFile, TheCommandLineWinsOverTheEnvironmentWhichWinsOverTheFile) {
  write("listen = \"0.0.0.0:9000\"\ndata = \"/from/file\"\nthreads = 3\n");
  ScopedEnv env({{"ICHIDO_LISTEN", "127.0.0.1:2"}, {"ICHIDO_DATA", "/from/env"}});
  ASSERT_FALSE(parse({"serve", "--config", path_, "--listen", "127.0.0.1:1"}).has_value())
      << serr_.str();
  EXPECT_EQ(cli_.run(out_), 0);
  EXPECT_EQ(served_.listen, "127.0.0.1:1");  // the command line
  EXPECT_EQ(served_.data_dir, "/from/env");  // the environment over the file
  EXPECT_EQ(served_.threads, 3);             // the file where nothing else says
}

TEST_F(ServeConfigFile, TheConfigFileCanBeNamedByTheEnvironment) {
  write("data = \"/from/file\"\n");
  ScopedEnv env({{"ICHIDO_CONFIG", path_.c_str()}});
  ASSERT_FALSE(parse({"serve"}).has_value()) << serr_.str();
  EXPECT_EQ(cli_.run(out_), 0);
  EXPECT_EQ(served_.data_dir, "/from/file");
}

// --init replaces a lost store with a new, empty one: one start's decision, never a variable
// that every later start of a container would repeat.
TEST_F(ServeConfigFile, InitIsNotReadFromTheEnvironment) {
  ScopedEnv env({{"ICHIDO_INIT", "true"}});
  ASSERT_FALSE(parse({"serve"}).has_value()) << serr_.str();
  EXPECT_EQ(cli_.run(out_), 0);
  EXPECT_FALSE(served_.init);
}

}  // namespace
}  // namespace ichido::cli
