#include "cli/child.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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
