// A CLI11 option that takes a human duration ("30s", "1500ms", "5m"; a bare number is seconds)
// and stores milliseconds — one helper for --wait, --lease, --grace in every command group.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "cli/duration.h"

namespace ichido::cli {

// `ms` is std::int64_t or std::optional<std::int64_t>. With `allow_zero` ("wait" options),
// "0" and "0s" mean no wait; otherwise only positive durations are accepted (leases).
template <class T>
CLI::Option* add_duration(CLI::App& cmd, const std::string& flag, T& ms, const std::string& what,
                          bool allow_zero) {
  return cmd
      .add_option_function<std::string>(
          flag,
          [&ms, flag, allow_zero](const std::string& text) {
            auto v = allow_zero ? parse_wait_ms(text) : parse_duration_ms(text);
            if (!v) {
              throw CLI::ValidationError(flag,
                                         "'" + text + "' is not a duration like 1500ms, 60s, 5m");
            }
            ms = *v;
          },
          what + " (e.g. 30s, 500ms, 2m; a bare number means seconds)")
      ->type_name("DURATION");
}

}  // namespace ichido::cli
