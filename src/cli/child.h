// What `ichido once run` and `ichido lock run` share around the user's command: checking the
// arguments before anything is sent, starting the command, and reading how it ended.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/client.h"
#include "cli/command.h"

namespace ichido::cli {

// The server URL when --url is valid and a command was given after `--`; otherwise prints the
// usage error and returns nullopt (the caller exits with kExitUsage).
std::optional<BaseUrl> run_target(const ConnectionOptions& conn,
                                  const std::vector<std::string>& command, Output& o);

// "HOST:PID" of this process: the owner a lock or once record gets when --owner is not given.
std::string default_owner();

// In a forked child: replaces the process with `command` (looked up in PATH). If that fails,
// writes "ichido: cannot run NAME: REASON" to stderr and exits 127, like a shell.
[[noreturn]] void exec_command(const std::vector<std::string>& command);

// How a waited-for child ended, as a shell reports it: its exit code, or 128 + the signal that
// killed it; `otherwise` for anything else.
int exit_code_of(int wait_status, int otherwise);

}  // namespace ichido::cli
