// `ichido lock …`: named locks with leases and fencing tokens (see docs/API.md, "Locks").
// acquire/release/renew/get/list/force-release map to one HTTP call each; `lock run` is flock(1)
// across machines: wait for the lock, run a command while renewing the lease, release on exit.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/command.h"
#include "cli/duration.h"  // parse_wait_ms

namespace ichido::cli {

// Exit codes (command.h): `lock acquire` and `lock run` exit kExitTempFail (75) when the wait
// ended without the lock; `lock run` exits kExitLockLost (76) when the lease was lost while the
// command ran, and otherwise with the command's own code.

struct LockAcquireArgs {
  std::string name;
  std::string owner;
  std::int64_t wait_ms = 0;
  std::optional<std::int64_t> lease_ms;
  // Sent as "request_id" (docs/API.md, "Retrying a claim whose answer was lost"): one per
  // invocation, the same on each of its retries. Empty: none is sent and the call is not retried.
  std::string request_id;
};

struct LockRunArgs {
  std::string name;
  std::string owner;       // default: "HOST:PID"
  std::string request_id;  // default: a new random one
  std::int64_t wait_ms = 30000;
  std::int64_t lease_ms = 30000;
  std::int64_t grace_ms = 10000;  // after SIGTERM on a lost lease, SIGKILL follows this late
  std::vector<std::string> command;
};

std::string lock_path(std::string_view ns, std::string_view name = {});

HttpCall lock_acquire_call(std::string_view ns, const LockAcquireArgs& args);
HttpCall lock_release_call(std::string_view ns, std::string_view name, std::int64_t token);
HttpCall lock_renew_call(std::string_view ns, std::string_view name, std::int64_t token,
                         std::optional<std::int64_t> lease_ms);
HttpCall lock_get_call(std::string_view ns, std::string_view name,
                       std::optional<std::int64_t> token);
HttpCall lock_list_call(std::string_view ns);
HttpCall lock_force_release_call(std::string_view ns, std::string_view name);

// Runs `lock run` to completion and returns the process exit code.
int lock_run(const ConnectionOptions& conn, const LockRunArgs& args, Output& o);

void add_lock_commands(CommandTree& tree);

}  // namespace ichido::cli
