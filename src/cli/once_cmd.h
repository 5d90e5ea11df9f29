// `ichido once …`: process each item exactly once (see docs/API.md, "Once"). The *_call functions
// map parsed options to one HTTP call; `once run` (once_run.cc) wraps a whole command in begin →
// run → complete/fail, renewing the lease while it runs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/command.h"

namespace ichido::cli {

// Exit codes (command.h) of `once begin`: 0 acquired (the token on stdout), kExitCompleted (10)
// completed (the stored result on stdout), kExitTempFail (75) in progress elsewhere, kExitDead
// (65) dead. `once run`: its command's code, 0 when already completed, 75, 65, 126/127.

struct OnceBeginArgs {
  std::string key;
  std::optional<std::string> owner;
  std::optional<std::int64_t> lease_ms;
  std::optional<std::string> fingerprint;
  std::optional<std::int64_t> wait_ms;
  std::optional<std::int64_t> max_attempts;
  // Sent as "request_id" (docs/API.md, "Retrying a claim whose answer was lost"): one per
  // invocation, the same on each of its retries. Empty: none is sent and the call is not retried.
  std::string request_id;
};

struct OnceCompleteArgs {
  std::string key;
  std::int64_t token = 0;
  std::optional<std::string> result;  // JSON text; checked before sending
};

struct OnceFailArgs {
  std::string key;
  std::int64_t token = 0;
  std::optional<std::string> error;
  bool no_retry = false;
};

struct OnceRenewArgs {
  std::string key;
  std::int64_t token = 0;
  std::optional<std::int64_t> lease_ms;
};

struct OnceListArgs {
  std::optional<std::string> state;
  std::optional<std::int64_t> limit;
  std::optional<std::string> after;
};

struct OnceRunArgs {
  std::string key;
  std::int64_t lease_ms = 60000;
  std::int64_t wait_ms = 0;
  std::optional<std::string> owner;  // default: HOST:PID
  std::optional<std::string> fingerprint;
  std::vector<std::string> command;  // after "--"
};

// "/v1/ns/{ns}/once" with ns percent-encoded.
std::string once_path(std::string_view ns);

HttpCall once_begin_call(std::string_view ns, const OnceBeginArgs& args);
// The exit code of a begin answer (see above).
int once_begin_exit_code(const boost::json::value& answer);
// Errors (as a usage error string, empty when fine): --result that is not JSON.
std::string once_complete_check(const OnceCompleteArgs& args);
HttpCall once_complete_call(std::string_view ns, const OnceCompleteArgs& args);
HttpCall once_fail_call(std::string_view ns, const OnceFailArgs& args);
HttpCall once_renew_call(std::string_view ns, const OnceRenewArgs& args);
HttpCall once_get_call(std::string_view ns, std::string_view key);
HttpCall once_list_call(std::string_view ns, const OnceListArgs& args);
HttpCall once_reset_call(std::string_view ns, std::string_view key);

// `ichido once run`: see add_once_commands' help text. Returns the process exit code.
int once_run(const ConnectionOptions& conn, const OnceRunArgs& args, Output& o);

void add_once_commands(CommandTree& tree);

}  // namespace ichido::cli
