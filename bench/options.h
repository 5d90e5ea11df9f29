// Small command-line helpers shared by the bench tools: bounded numbers and durations.
// Every parser returns std::nullopt on bad input instead of throwing; callers print usage.
#pragma once

#include <charconv>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ichido::bench {

// Parses a decimal integer in [lo, hi].
inline std::optional<std::uint64_t> parse_uint(std::string_view s, std::uint64_t lo,
                                               std::uint64_t hi) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || v < lo || v > hi) return std::nullopt;
  return v;
}

// Parses "250ms", "10s", "2m", "1.5s" or a bare number of seconds, bounded to [lo, hi].
inline std::optional<std::chrono::microseconds> parse_duration(std::string_view s,
                                                               std::chrono::microseconds lo,
                                                               std::chrono::microseconds hi) {
  double scale = 1e6;  // microseconds per unit; bare numbers are seconds
  if (s.ends_with("ms")) {
    scale = 1e3;
    s.remove_suffix(2);
  } else if (s.ends_with("us")) {
    scale = 1;
    s.remove_suffix(2);
  } else if (s.ends_with('s')) {
    s.remove_suffix(1);
  } else if (s.ends_with('m')) {
    scale = 60e6;
    s.remove_suffix(1);
  }
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || end != s.data() + s.size() || !(v >= 0))
    return std::nullopt;
  const double us = v * scale;
  if (us < static_cast<double>(lo.count()) || us > static_cast<double>(hi.count()))
    return std::nullopt;
  return std::chrono::microseconds(static_cast<std::int64_t>(us));
}

}  // namespace ichido::bench
