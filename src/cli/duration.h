// Durations on the command line: "1500ms", "60s", "5m", "2h", "30d". A unit is required, so that
// "30" can never silently mean 30 milliseconds where days were meant (--once-retention).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace ichido::cli {

// Milliseconds, or nullopt when `text` is not a whole number followed by ms, s, m, h or d, or
// exceeds 2^53 ms.
std::optional<std::int64_t> parse_duration_ms(std::string_view text);

}  // namespace ichido::cli
