#include "cli/duration.h"

namespace ichido::cli {

std::optional<std::int64_t> parse_duration_ms(std::string_view text) {
  std::size_t i = 0;
  std::int64_t n = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    if (n > 100'000'000'000) return std::nullopt;
    n = n * 10 + (text[i] - '0');
    ++i;
  }
  if (i == 0) return std::nullopt;
  const std::string_view unit = text.substr(i);
  std::int64_t scale;
  if (unit == "ms")
    scale = 1;
  else if (unit.empty() || unit == "s")
    scale = 1000;
  else if (unit == "m")
    scale = 60'000;
  else if (unit == "h")
    scale = 3'600'000;
  else if (unit == "d")
    scale = 86'400'000;
  else
    return std::nullopt;
  const std::int64_t ms = n * scale;
  if (ms <= 0 || ms > 100LL * 365 * 86'400'000) return std::nullopt;
  return ms;
}

std::optional<std::int64_t> parse_wait_ms(std::string_view text) {
  if (auto ms = parse_duration_ms(text)) return ms;
  const auto digits = text.find_first_not_of('0');
  const std::string_view unit = digits == std::string_view::npos ? "" : text.substr(digits);
  if (!text.empty() && digits != 0 &&
      (unit.empty() || unit == "ms" || unit == "s" || unit == "m" || unit == "h")) {
    return 0;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> parse_size_bytes(std::string_view text) {
  std::size_t i = 0;
  std::uint64_t n = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    if (n > (std::uint64_t{1} << 50)) return std::nullopt;
    n = n * 10 + static_cast<std::uint64_t>(text[i] - '0');
    ++i;
  }
  if (i == 0) return std::nullopt;
  const std::string_view unit = text.substr(i);
  struct Unit {
    std::string_view name;
    std::uint64_t factor;
  };
  static constexpr Unit kUnits[] = {{"", 1},
                                    {"B", 1},
                                    {"K", 1ull << 10},
                                    {"KiB", 1ull << 10},
                                    {"KB", 1000},
                                    {"M", 1ull << 20},
                                    {"MiB", 1ull << 20},
                                    {"MB", 1000000},
                                    {"G", 1ull << 30},
                                    {"GiB", 1ull << 30},
                                    {"GB", 1000000000},
                                    {"T", 1ull << 40},
                                    {"TiB", 1ull << 40},
                                    {"TB", 1000000000000}};
  for (const auto& u : kUnits) {
    if (unit == u.name) {
      if (n > UINT64_MAX / u.factor) return std::nullopt;
      return n * u.factor;
    }
  }
  return std::nullopt;
}

}  // namespace ichido::cli
