// Fuzz target (b): the counter format parser and renderer. Whatever the text, parse_format
// either fails with field "format" or yields pieces that render without overflow, and a format
// that parses always renders its sequence digits.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/counter.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ichido::core;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto pieces = parse_format(text);
  if (!pieces.ok()) {
    if (pieces.error().field != "format") std::abort();
    return 0;
  }
  for (const std::int64_t v : {std::int64_t{1}, std::int64_t{42}, kMaxJsonInteger}) {
    const std::string out = render(*pieces, v, LocalDate{2026, 12, 31});
    if (out.find(std::to_string(v)) == std::string::npos) std::abort();
  }
  return 0;
}
