// A CLI11 option that takes a human duration ("30s", "1500ms", "5m"; a bare number is seconds)
// and stores milliseconds — one helper for --wait, --lease, --grace in every command group.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <limits>
#include <string>

#include "cli/duration.h"

namespace ichido::cli {

// The server's bounds (docs/API.md), checked here so that the error speaks of the option, not of a
// JSON field in milliseconds.
inline constexpr std::int64_t kLeaseMinMs = 1000;
inline constexpr std::int64_t kLeaseMaxMs = 3'600'000;
inline constexpr std::int64_t kWaitMaxMs = 300'000;

// "1s", "5m", "1h", "1500ms": the shortest exact spelling of `ms`, for messages.
inline std::string format_duration(std::int64_t ms) {
  if (ms % 3'600'000 == 0 && ms > 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms % 60'000 == 0 && ms > 0) return std::to_string(ms / 60'000) + "m";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

// `ms` is std::int64_t or std::optional<std::int64_t>. With `allow_zero` ("wait" options),
// "0" and "0s" mean no wait; otherwise only positive durations are accepted (leases).
// `min_ms`..`max_ms` bound the value (inclusive); outside them the option is a usage error.
template <class T>
CLI::Option* add_duration(CLI::App& cmd, const std::string& flag, T& ms, const std::string& what,
                          bool allow_zero, std::int64_t min_ms = 0,
                          std::int64_t max_ms = std::numeric_limits<std::int64_t>::max()) {
  return cmd
      .add_option_function<std::string>(
          flag,
          [&ms, flag, allow_zero, min_ms, max_ms](const std::string& text) {
            auto v = allow_zero ? parse_wait_ms(text) : parse_duration_ms(text);
            if (!v) {
              throw CLI::ValidationError(flag,
                                         "'" + text + "' is not a duration like 1500ms, 60s, 5m");
            }
            if (*v < min_ms || *v > max_ms) {
              throw CLI::ValidationError(
                  flag,
                  "'" + text + "' is out of range: " +
                      (max_ms == std::numeric_limits<std::int64_t>::max()
                           ? "at least " + format_duration(min_ms)
                           : "from " + format_duration(min_ms) + " to " + format_duration(max_ms)));
            }
            ms = *v;
          },
          what + " (e.g. 30s, 500ms, 2m; a bare number means seconds)")
      ->type_name("DURATION");
}

}  // namespace ichido::cli
