// Human durations on the command line: "1500ms", "30s", "5m", "12h", "90d" (a bare number is
// seconds). Used by --expires, --lease, --wait.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace ichido::cli {

// Milliseconds, or nullopt when `text` is not a positive duration below ~100 years.
std::optional<std::int64_t> parse_duration_ms(std::string_view text);

// Bytes from "0", "4096", "512KiB", "64MiB", "1GiB" (or KB/MB/GB, powers of 1000; K/M/G are
// binary); nullopt when `text` is not such a size.
std::optional<std::uint64_t> parse_size_bytes(std::string_view text);

// Like parse_duration_ms, but a zero duration ("0", "0s", "00ms") is accepted as 0: for waits.
std::optional<std::int64_t> parse_wait_ms(std::string_view text);

}  // namespace ichido::cli
