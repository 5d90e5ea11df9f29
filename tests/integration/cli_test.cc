// The `ichido` command against a live server: HTTPS with a self-signed CA (--cacert,
// $ICHIDO_CACERT, a refused certificate), the exit codes a shell branches on (lock acquire 0/75,
// once begin 0/10/75/65) with stdout carrying only the token or the stored result, and
// `once run` whose server disappears after the command succeeded: it keeps retrying `complete`
// until the lease ends, then says plainly that the command succeeded and prints the command that
// records it, which works once the server is back.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <map>
#include <regex>

#include "api_client.h"
#include "server_process.h"
#include "test_util.h"

namespace ichido::testing {
namespace {

namespace json = boost::json;

struct CliRun {
  int code = -1;
  std::string out, err;
};

// Runs the ichido binary with `args` and extra environment variables; stdout and stderr apart.
CliRun run_cli(const std::vector<std::string>& args, const std::string& scratch,
               const std::map<std::string, std::string>& env = {}) {
  const std::string out_path = scratch + "/cli.out", err_path = scratch + "/cli.err";
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::unsetenv("ICHIDO_URL");
    ::unsetenv("ICHIDO_NS");
    ::unsetenv("ICHIDO_CACERT");
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> argv{const_cast<char*>(ichido_binary())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(ichido_binary(), argv.data());
    ::_exit(126);
  }
  CliRun r;
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  return r;
}

std::string read_token(const std::string& data_dir) {
  std::string t = slurp(data_dir + "/admin.token");
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
  return t;
}

TEST(CliHttps, TalksToATlsServerWithItsCaAndRefusesAnUnknownOne) {
  TempDir dir;
  const std::string cert = dir.path() + "/cert.pem", key = dir.path() + "/key.pem";
  ASSERT_EQ(make_self_signed_cert(dir.path()), "");
  ServerProcess server(dir.path() + "/data", {"--tls-cert", cert, "--tls-key", key},
                       /*auth=*/true);
  // On localhost: both loopback addresses, whichever the resolver gives first for the name.
  server.set_listen("localhost:0");
  std::string err;
  ASSERT_TRUE(server.start(&err)) << err;
  const std::string port = std::to_string(server.port());
  const std::map<std::string, std::string> env{{"ICHIDO_TOKEN", read_token(server.data_dir())}};

  // --cacert, by address and by name (the certificate names both).
  CliRun c = run_cli({"counter", "create", "r", "--ns", "s", "--format", "T-{seq:3}", "--url",
                      "https://127.0.0.1:" + port, "--cacert", cert},
                     dir.path(), env);
  EXPECT_EQ(c.code, 0) << c.err;
  c = run_cli({"counter", "next", "r", "--ns", "s", "--key", "k1", "--url",
               "https://localhost:" + port, "--cacert", cert},
              dir.path(), env);
  EXPECT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(c.out, "T-001\n");

  // $ICHIDO_CACERT and $ICHIDO_URL; `lock run` and `once run` use the same connection options.
  auto with_ca = env;
  with_ca["ICHIDO_CACERT"] = cert;
  with_ca["ICHIDO_URL"] = "https://127.0.0.1:" + port;
  c = run_cli({"counter", "next", "r", "--ns", "s", "--key", "k1"}, dir.path(), with_ca);
  EXPECT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(c.out, "T-001\n") << "same key, same number";
  c = run_cli(
      {"lock", "run", "job", "--ns", "s", "--", "sh", "-c", "echo held $ICHIDO_FENCING_TOKEN"},
      dir.path(), with_ca);
  EXPECT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(c.out.rfind("held ", 0), 0u) << c.out;
  c = run_cli({"once", "run", "nightly", "--ns", "s", "--", "echo", "done"}, dir.path(), with_ca);
  EXPECT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(c.out, "done\n");

  // Without the CA the certificate is refused: exit 3 at once (a refused certificate is not
  // retried), and the message says what to do.
  c = run_cli({"counter", "get", "r", "--ns", "s", "--url", "https://127.0.0.1:" + port},
              dir.path(), env);
  EXPECT_EQ(c.code, 3);
  EXPECT_NE(c.err.find("certificate verify failed"), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("--cacert FILE or set ICHIDO_CACERT"), std::string::npos) << c.err;
  EXPECT_EQ(c.err.find("retrying"), std::string::npos) << c.err;
  // A name the certificate does not carry is refused too, even with the right CA.
  c = run_cli(
      {"counter", "get", "r", "--ns", "s", "--url", "https://127.0.0.2:" + port, "--cacert", cert},
      dir.path(), env);
  EXPECT_NE(c.code, 0);
  // A CA file that holds no certificate is a clear error.
  c = run_cli(
      {"counter", "get", "r", "--ns", "s", "--url", "https://127.0.0.1:" + port, "--cacert", key},
      dir.path(), env);
  EXPECT_EQ(c.code, 3);
  EXPECT_NE(c.err.find("cannot use the CA file"), std::string::npos) << c.err;
  EXPECT_EQ(server.stop(), 0) << server.log();
}

class CliExitCodes : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string err;
    ASSERT_TRUE(server_.start(&err)) << err;
    url_ = server_.url().to_string();
  }
  // Runs ichido with `args` plus --url and --ns (before a "--" that starts a command).
  CliRun cli(std::vector<std::string> args) {
    auto at = std::find(args.begin(), args.end(), "--");
    args.insert(at, {"--url", url_, "--ns", "t"});
    return run_cli(args, dir_.path());
  }
  TempDir dir_;
  ServerProcess server_{dir_.path() + "/data"};
  std::string url_;
};

TEST_F(CliExitCodes, LockAcquireExitsZeroWithTheTokenOr75WithNothingOnStdout) {
  CliRun a = cli({"lock", "acquire", "printer", "--owner", "A", "--lease", "30s"});
  ASSERT_EQ(a.code, 0) << a.err;
  const std::string token = a.out.substr(0, a.out.find('\n'));
  EXPECT_EQ(a.out, token + "\n");
  EXPECT_GT(std::stoll(token), 0);
  CliRun b = cli({"lock", "acquire", "printer", "--owner", "B", "--wait", "200ms"});
  EXPECT_EQ(b.code, 75) << b.err;
  EXPECT_EQ(b.out, "");
  EXPECT_NE(b.err.find("not acquired: held by A until "), std::string::npos) << b.err;
  CliRun r = cli({"lock", "release", "printer", "--token", token});
  EXPECT_EQ(r.code, 0) << r.err;
  CliRun again = cli({"lock", "release", "printer", "--token", token});
  EXPECT_EQ(again.code, 1);
  EXPECT_NE(again.err.find("error: not_holder: this --token does not hold lock printer in "
                           "namespace t"),
            std::string::npos)
      << again.err;
  EXPECT_NE(again.err.find("ichido lock acquire printer --ns t"), std::string::npos) << again.err;
}

TEST_F(CliExitCodes, OnceBeginExitCodesLetAShellBranch) {
  const std::string key = "<CAF=x/y+z 受付@mail.example.co.jp>";
  CliRun a = cli({"once", "begin", key, "--owner", "A", "--lease", "30s"});
  ASSERT_EQ(a.code, 0) << a.err;
  const std::string token = a.out.substr(0, a.out.find('\n'));
  EXPECT_EQ(a.out, token + "\n") << "only the token on stdout";
  CliRun dup = cli({"once", "begin", key, "--owner", "B"});
  EXPECT_EQ(dup.code, 75) << dup.err;
  EXPECT_EQ(dup.out, "");
  CliRun done = cli({"once", "complete", key, "--token", token, "--result", R"({"ticket":"T-1"})"});
  ASSERT_EQ(done.code, 0) << done.err;
  CliRun later = cli({"once", "begin", key, "--owner", "B"});
  EXPECT_EQ(later.code, 10) << later.err;
  EXPECT_EQ(later.out, "{\"ticket\":\"T-1\"}\n");

  // Dead: one attempt allowed, failed without retry.
  CliRun d1 = cli({"once", "begin", "row-7", "--max-attempts", "1"});
  ASSERT_EQ(d1.code, 0) << d1.err;
  const std::string t1 = d1.out.substr(0, d1.out.find('\n'));
  ASSERT_EQ(cli({"once", "fail", "row-7", "--token", t1, "--error", "smtp down"}).code, 0);
  CliRun dead = cli({"once", "begin", "row-7"});
  EXPECT_EQ(dead.code, 65) << dead.err;
  EXPECT_EQ(dead.out, "");
  EXPECT_NE(dead.err.find("ichido once reset row-7 --ns t"), std::string::npos) << dead.err;
  CliRun run_dead = cli({"once", "run", "row-7", "--", "true"});
  EXPECT_EQ(run_dead.code, 65) << run_dead.err;
  EXPECT_NE(run_dead.err.find("ichido once reset row-7 --ns t"), std::string::npos) << run_dead.err;
}

// The command succeeds, then the server disappears (the command itself kills it): `once run`
// retries `complete` until the lease ends, then says the command succeeded and how to record it.
TEST(CliOnceRun, WhenCompleteCannotReachTheServerItSaysTheCommandSucceededAndHowToRecordIt) {
  TempDir dir;
  ServerProcess server(dir.path() + "/data");
  std::string err;
  ASSERT_TRUE(server.start(&err)) << err;
  const std::string url = server.url().to_string();
  const auto started = std::chrono::steady_clock::now();
  CliRun r =
      run_cli({"once", "run", "export 2026-04-01", "--url", url, "--ns", "t", "--lease", "3s", "--",
               "sh", "-c", "echo exported; kill -9 " + std::to_string(server.pid())},
              dir.path());
  const auto took = std::chrono::steady_clock::now() - started;
  server.kill9();  // reaps it
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_EQ(r.out, "exported\n");
  EXPECT_NE(r.err.find("THE COMMAND SUCCEEDED (exit 0)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("retrying in"), std::string::npos) << "complete was retried: " << r.err;
  EXPECT_GE(took, std::chrono::milliseconds(1500)) << "it kept trying for most of the lease";
  EXPECT_LT(took, std::chrono::seconds(20));
  const std::regex hint("ichido once complete 'export 2026-04-01' --token ([0-9]+) --ns t --url " +
                        url + " --result '\\{\"exit_code\":0\\}'");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m, hint)) << r.err;

  // The server comes back (same data, a new port): the printed command records the success.
  ServerProcess again(dir.path() + "/data");
  again.share_store(server);  // over PostgreSQL: the same schema (a no-op on the embedded store)
  ASSERT_TRUE(again.start(&err)) << err;
  std::string command = m[0].str();
  command.replace(command.find(url), url.size(), again.url().to_string());
  auto [code, out] = run_command(std::string(ichido_binary()) + command.substr(6) + " 2>&1");
  EXPECT_EQ(code, 0) << out;
  ApiClient api(again.url());
  auto rec = api.send("GET", "/v1/ns/t/once?key=export%202026-04-01");
  EXPECT_EQ(rec.str("state"), "completed") << rec.body;
  CliRun next = run_cli({"once", "run", "export 2026-04-01", "--url", again.url().to_string(),
                         "--ns", "t", "--", "echo", "ran again"},
                        dir.path());
  EXPECT_EQ(next.code, 0) << next.err;
  EXPECT_EQ(next.out, "") << "recorded: the command does not run a second time";
}

}  // namespace
}  // namespace ichido::testing
