#include "server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "store/postgres/pg_conn.h"
#include "store/testing/pg_test_env.h"

namespace ichido::testing {

const char* ichido_binary() { return ICHIDO_BINARY; }

bool on_postgres() {
  const char* s = std::getenv("ICHIDO_TEST_STORE");
  return s && std::string(s) == "postgres";
}

namespace {

// The URL of the tests' PostgreSQL: pg_test_env.h's variables, else the file of the CTest
// fixture this build configured.
std::string test_pg_url() {
  auto u = store_testing::pg_test_url();
  if (u.url) return *u.url;
  std::ifstream in(ICHIDO_DEFAULT_PG_URL_FILE);
  std::string url;
  std::getline(in, url);
  return url;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q.push_back(c);
    }
  }
  return q + "'";
}

Result<std::unique_ptr<store::postgres::PgConn>> admin_conn(const std::string& url) {
  store::postgres::PgConn::Settings s;
  s.conninfo = url;
  return store::postgres::PgConn::connect(s);
}

}  // namespace

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "ichido-test-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) std::abort();
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

ServerProcess::ServerProcess(std::string data_dir, std::vector<std::string> extra_args, bool auth)
    : data_dir_(std::move(data_dir)), extra_args_(std::move(extra_args)), auth_(auth) {
  if (on_postgres()) {
    static std::atomic<int> n{0};
    pg_url_ = test_pg_url();
    pg_schema_ = "it_" + std::to_string(::getpid()) + "_" + std::to_string(n.fetch_add(1));
    // A new schema is a new store: a node directory reused from an earlier ServerProcess of the
    // test must not remember that one's store (decision 134 would refuse to start).
    std::error_code ec;
    std::filesystem::remove(data_dir_ + "/store.id", ec);
  }
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) kill9();
  if (owns_schema_ && !pg_schema_.empty() && !pg_url_.empty()) {
    if (auto c = admin_conn(pg_url_); c.ok()) {
      (void)(*c)->exec_script("DROP SCHEMA IF EXISTS \"" + pg_schema_ + "\" CASCADE");
    }
  }
}

void ServerProcess::share_store(const ServerProcess& other) {
  set_store(other.pg_url_, other.pg_schema_);
}

void ServerProcess::set_store(std::string url, std::string schema) {
  if (owns_schema_ && !pg_schema_.empty() && !pg_url_.empty()) {
    if (auto c = admin_conn(pg_url_); c.ok()) {
      (void)(*c)->exec_script("DROP SCHEMA IF EXISTS \"" + pg_schema_ + "\" CASCADE");
    }
  }
  pg_url_ = std::move(url);
  pg_schema_ = std::move(schema);
  owns_schema_ = false;
}

std::string ServerProcess::store_args() const {
  if (pg_schema_.empty()) return "--data " + shell_quote(data_dir_);
  return "--store " + shell_quote(pg_url_) + " --store-schema " + pg_schema_;
}

std::string ServerProcess::store_dump() const {
  if (pg_schema_.empty()) return "";
  auto c = admin_conn(pg_url_);
  if (!c.ok()) return "cannot connect: " + c.error().message;
  const store::postgres::Stmt tables{
      "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
      "WHERE n.nspname = $1 AND c.relkind = 'r' ORDER BY 1"};
  auto names = (*c)->query(tables, store::postgres::Params().text(pg_schema_));
  if (!names.ok()) return "cannot list tables: " + names.error().message;
  std::string out;
  for (int i = 0; i < names->rows(); ++i) {
    const store::postgres::Stmt rows{
        "SELECT coalesce(string_agg(row_to_json(t)::text, E'\\n'), "
        "'') FROM \"" +
        pg_schema_ + "\"." + names->str(i, 0) + " t"};
    auto r = (*c)->query(rows, store::postgres::Params());
    if (!r.ok()) return "cannot read " + names->str(i, 0) + ": " + r.error().message;
    out += names->str(i, 0) + ":\n" + r->str(0, 0) + "\n";
  }
  return out;
}

std::string ServerProcess::log() const {
  std::ifstream in(data_dir_ + ".log");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

cli::BaseUrl ServerProcess::url() const {
  cli::BaseUrl u;
  u.host = "127.0.0.1";
  u.port = port_;
  return u;
}

bool ServerProcess::start(std::string* error) {
  const std::string log_path = data_dir_ + ".log";
  const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    *error = "cannot create " + log_path;
    return false;
  }
  std::vector<std::string> args = {binary_.empty() ? std::string(ichido_binary()) : binary_,
                                   "serve",
                                   "--listen",
                                   listen_,
                                   "--data",
                                   data_dir_};
  if (!pg_schema_.empty()) {
    if (pg_url_.empty()) {
      *error = "ICHIDO_TEST_STORE=postgres but no PostgreSQL URL (did pg_cluster_start run?)";
      return false;
    }
    args.insert(args.end(), {"--store", pg_url_, "--store-schema", pg_schema_});
  }
  if (!auth_) args.push_back("--no-auth");
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The environment is built before fork(): the child of a multi-threaded test may only call
  // async-signal-safe functions until it execs.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    bool overridden = false;
    for (const auto& [k, v] : env_) overridden |= entry.rfind(k + "=", 0) == 0;
    if (!overridden) env_strings.push_back(entry);
  }
  for (const auto& [k, v] : env_) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(fd);
  if (pid < 0) {
    *error = "fork failed";
    return false;
  }
  pid_ = pid;
  // Readiness: the server prints its listening line once it accepts connections. Polling the
  // log is waiting for an event with a bound, not a sleep standing in for synchronisation.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  const std::string marker = "ichido listening on 127.0.0.1:";
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string text = log();
    if (auto at = text.find(marker); at != std::string::npos) {
      port_ = static_cast<std::uint16_t>(std::atoi(text.c_str() + at + marker.size()));
      return port_ != 0;
    }
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      *error = "server exited before it was ready:\n" + log();
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  *error = "server did not become ready within 20 s:\n" + log();
  kill9();
  return false;
}

int ServerProcess::stop() {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int ServerProcess::wait_exit() {
  if (pid_ <= 0) return -1;
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void ServerProcess::kill9() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

std::map<std::string, std::string> steady_threads(pid_t pid) {
  const std::string task = "/proc/" + std::to_string(pid) + "/task";
  auto list = [&] {
    std::map<std::string, std::string> by_tid;
    for (const auto& t : std::filesystem::directory_iterator(task)) {
      std::ifstream comm(t.path() / "comm");
      std::string name;
      std::getline(comm, name);
      if (comm) by_tid[t.path().filename().string()] = name;
    }
    return by_tid;
  };
  auto threads = list();
  for (int i = 0; i < 50; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto again = list();
    if (again == threads) break;
    threads = std::move(again);
  }
  return threads;
}

}  // namespace ichido::testing
