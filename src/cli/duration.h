// Human durations on the command line: "1500ms", "30s", "5m", "12h", "90d" (a bare number is
// seconds). Used by --expires, --lease, --wait.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace ichido::cli {

// Milliseconds, or nullopt when `text` is not a positive duration below ~100 years.
std::optional<std::int64_t> parse_duration_ms(std::string_view text);

// Like parse_duration_ms, but a zero duration ("0", "0s", "00ms") is accepted as 0: for waits.
std::optional<std::int64_t> parse_wait_ms(std::string_view text);

}  // namespace ichido::cli
