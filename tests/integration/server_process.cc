#include "server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace ichido::testing {

const char* ichido_binary() { return ICHIDO_BINARY; }

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
    : data_dir_(std::move(data_dir)), extra_args_(std::move(extra_args)), auth_(auth) {}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) kill9();
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
  std::vector<std::string> args = {ichido_binary(), "serve",  "--listen",
                                   "127.0.0.1:0",   "--data", data_dir_};
  if (!auth_) args.push_back("--no-auth");
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    ::execv(argv[0], argv.data());
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

}  // namespace ichido::testing
