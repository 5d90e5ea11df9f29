#include "server_control.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace ichido::soak {
namespace {

constexpr const char* kListening = "ichido listening on ";

std::string read_from(const std::string& path, long long offset) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  in.seekg(offset);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

long long file_size(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<long long>(st.st_size) : 0;
}

// fork + exec with stdout and stderr appended to `out_fd`. Returns the pid, or -1.
pid_t spawn(const std::vector<std::string>& args, int out_fd) {
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    // If the driver dies (a CTest timeout, ^C), its servers die with it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::dup2(out_fd, STDOUT_FILENO);
    ::dup2(out_fd, STDERR_FILENO);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

std::string tail(const std::string& text, std::size_t n = 4000) {
  return text.size() <= n ? text : "…" + text.substr(text.size() - n);
}

}  // namespace

ProcessOutcome run_bounded(const std::vector<std::string>& args,
                           std::chrono::milliseconds timeout) {
  ProcessOutcome out;
  char tmpl[] = "/tmp/ichido-soak-out-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  if (fd < 0) {
    out.output = "mkstemp failed";
    return out;
  }
  const std::string path = tmpl;
  const pid_t pid = spawn(args, fd);
  ::close(fd);
  if (pid < 0) {
    ::unlink(path.c_str());
    out.output = "fork failed";
    return out;
  }
  // Waiting for an event (exit or the listening line) with a bound: polled, since the child
  // writes to a file.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      out.exited = true;
      if (WIFEXITED(status)) out.exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) out.signal = WTERMSIG(status);
      break;
    }
    out.output = read_from(path, 0);
    if (out.output.find(kListening) != std::string::npos) {
      out.listening = true;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  out.output = read_from(path, 0);
  ::unlink(path.c_str());
  return out;
}

ServerControl::ServerControl(std::string binary, std::string data_dir, std::string log_path,
                             std::vector<std::string> extra_args)
    : binary_(std::move(binary)),
      data_dir_(std::move(data_dir)),
      log_path_(std::move(log_path)),
      extra_args_(std::move(extra_args)) {}

ServerControl::~ServerControl() {
  if (running()) kill9();
}

std::string ServerControl::log_since_start() const { return read_from(log_path_, log_offset_); }

bool ServerControl::start(std::string* error, std::chrono::milliseconds timeout) {
  const std::uint16_t previous = port_.load();
  if (start_on(previous, error, timeout)) return true;
  // The old port may have been taken by another process while the server was down: a fresh
  // port is as good (clients read port() before every request).
  if (previous != 0 && log_since_start().find("in use") != std::string::npos) {
    return start_on(0, error, timeout);
  }
  return false;
}

pid_t ServerControl::launch(std::uint16_t port) {
  ++starts_;
  {
    std::ofstream mark(log_path_, std::ios::app);
    mark << "=== start " << starts_ << " on port " << port << "\n";
  }
  log_offset_ = file_size(log_path_);
  const int fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  std::vector<std::string> args = {
      binary_, "serve", "--listen", "127.0.0.1:" + std::to_string(port), "--data", data_dir_};
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  const pid_t pid = spawn(args, fd);
  ::close(fd);
  if (pid > 0) pid_.store(pid);
  return pid;
}

void ServerControl::start_then_kill(std::chrono::milliseconds delay) {
  if (launch(port_.load()) < 0) return;
  std::this_thread::sleep_for(delay);
  kill9();
}

bool ServerControl::alive(std::string* how) {
  const pid_t pid = pid_.load();
  if (pid <= 0) return false;
  int status = 0;
  if (::waitpid(pid, &status, WNOHANG) != pid) return true;
  pid_.store(-1);
  if (how) {
    *how = WIFEXITED(status) ? "code " + std::to_string(WEXITSTATUS(status))
                             : "signal " + std::to_string(WTERMSIG(status));
  }
  return false;
}

bool ServerControl::start_on(std::uint16_t port, std::string* error,
                             std::chrono::milliseconds timeout) {
  const pid_t pid = launch(port);
  if (pid < 0) {
    *error = "cannot start the server (fork or log file failed)";
    return false;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string text = log_since_start();
    if (auto at = text.find(std::string(kListening) + "127.0.0.1:"); at != std::string::npos) {
      const char* p = text.c_str() + at + std::string(kListening).size() + 10;
      port_.store(static_cast<std::uint16_t>(std::atoi(p)));
      return port_.load() != 0;
    }
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      pid_.store(-1);
      *error = "the server exited (" +
               (WIFEXITED(status) ? "code " + std::to_string(WEXITSTATUS(status))
                                  : "signal " + std::to_string(WTERMSIG(status))) +
               ") before it was ready:\n" + tail(log_since_start());
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  *error = "the server did not print its listening line within " + std::to_string(timeout.count()) +
           " ms:\n" + tail(log_since_start());
  kill9();
  return false;
}

void ServerControl::kill9() {
  const pid_t pid = pid_.load();
  if (pid <= 0) return;
  ::kill(pid, SIGCONT);  // harmless when running; a stopped process dies either way
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  pid_.store(-1);
}

int ServerControl::stop() {
  const pid_t pid = pid_.load();
  if (pid <= 0) return -1;
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  pid_.store(-1);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void ServerControl::sigstop() {
  if (const pid_t pid = pid_.load(); pid > 0) ::kill(pid, SIGSTOP);
}

void ServerControl::sigcont() {
  if (const pid_t pid = pid_.load(); pid > 0) ::kill(pid, SIGCONT);
}

}  // namespace ichido::soak
