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

// Finds the program `command[0]` the way execvp(3) will (a name with a '/' as it is, otherwise
// in each directory of $PATH) before anything is claimed, so that a typo does not spend an
// attempt or hold a lock. Returns 0 when it can be executed; otherwise prints
// "ichido: cannot run NAME: REASON; nothing was claimed" and returns 127 (not found) or 126
// (found but not executable: a directory, no execute permission), like a shell.
int check_command(const std::vector<std::string>& command, Output& o);

// "HOST:PID" of this process: the owner a lock or once record gets when --owner is not given.
std::string default_owner();

// In a forked child: replaces the process with `command` (looked up in PATH). If that fails,
// writes "ichido: cannot run NAME: REASON" to stderr and exits 127, like a shell.
[[noreturn]] void exec_command(const std::vector<std::string>& command);

// How a waited-for child ended, as a shell reports it: its exit code, or 128 + the signal that
// killed it; `otherwise` for anything else.
int exit_code_of(int wait_status, int otherwise);

}  // namespace ichido::cli
