#include "cli/child.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ostream>

#include "cli/output.h"

namespace ichido::cli {

std::optional<BaseUrl> run_target(const ConnectionOptions& conn,
                                  const std::vector<std::string>& command, Output& o) {
  BaseUrlResult url = parse_base_url(conn.url);
  if (!url.ok()) {
    print_error("invalid_url", url.error, o.err);
    return std::nullopt;
  }
  if (command.empty()) {
    print_error("usage", "give the command to run after --", o.err);
    return std::nullopt;
  }
  return std::move(url.url);
}

namespace {

// 0: `path` is a file this process may execute; else 127 (absent) or 126 (there, not runnable).
int probe(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return kExitNotFound;
  if (!S_ISREG(st.st_mode) || ::access(path.c_str(), X_OK) != 0) return kExitCannotExecute;
  return 0;
}

}  // namespace

int check_command(const std::vector<std::string>& command, Output& o) {
  const std::string& name = command.at(0);
  int result = kExitNotFound;
  if (name.empty()) {
    result = kExitNotFound;
  } else if (name.find('/') != std::string::npos) {
    result = probe(name);
  } else {
    const char* env = std::getenv("PATH");
    // glibc's execvp uses this search path when PATH is unset.
    const std::string path = env != nullptr ? env : "/bin:/usr/bin";
    std::size_t start = 0;
    for (;;) {
      const std::size_t end = path.find(':', start);
      std::string dir = path.substr(start, end == std::string::npos ? end : end - start);
      if (dir.empty()) dir = ".";
      const int r = probe(dir + "/" + name);
      if (r == 0) return 0;
      if (r == kExitCannotExecute) result = kExitCannotExecute;
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  if (result == 0) return 0;
  o.err << "ichido: cannot run " << name << ": "
        << (result == kExitNotFound
                ? (name.find('/') != std::string::npos ? "no such file"
                                                       : "command not found (searched $PATH)")
                : "not an executable file (permission denied or a directory)")
        << "; nothing was claimed\n";
  return result;
}

std::string default_owner() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return std::string(host[0] ? host : "host") + ":" + std::to_string(::getpid());
}

void exec_command(const std::vector<std::string>& command) {
  std::vector<char*> argv;
  for (const auto& s : command) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  // Only async-signal-safe calls between fork and exit: no stdio, one write.
  const std::string msg = "ichido: cannot run " + command[0] + ": " + std::strerror(errno) + "\n";
  (void)!::write(STDERR_FILENO, msg.data(), msg.size());
  ::_exit(127);
}

int exit_code_of(int wait_status, int otherwise) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return otherwise;
}

}  // namespace ichido::cli
