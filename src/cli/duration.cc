#include "cli/duration.h"

namespace ichido::cli {

std::optional<std::int64_t> parse_duration_ms(std::string_view text) {
  std::size_t i = 0;
  std::int64_t n = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    if (n > (std::int64_t{1} << 53) / 10) return std::nullopt;
    n = n * 10 + (text[i] - '0');
    ++i;
  }
  if (i == 0) return std::nullopt;
  const std::string_view unit = text.substr(i);
  std::int64_t scale = 0;
  if (unit == "ms")
    scale = 1;
  else if (unit == "s")
    scale = 1000;
  else if (unit == "m")
    scale = 60 * 1000;
  else if (unit == "h")
    scale = 3600 * 1000;
  else if (unit == "d")
    scale = 24 * 3600 * 1000;
  else
    return std::nullopt;
  if (n > (std::int64_t{1} << 53) / scale) return std::nullopt;
  return n * scale;
}

}  // namespace ichido::cli
