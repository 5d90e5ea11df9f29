#include "core/names.h"

#include <array>
#include <string>

namespace ichido::core {

namespace {

// The characters of a name: A-Z, a-z, 0-9, '.', '_', '-' (a table: every request checks one or
// two names).
constexpr auto kNameChar = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 256; ++c) {
    t[c] = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  }
  return t;
}();

}  // namespace

Result<void> validate_name(std::string_view value, std::string_view field) {
  // The field's name is copied into a message only when there is one to write.
  const auto refused = [field](std::string_view rule) {
    const std::string f(field);
    return invalid_field(f, "The " + f + std::string(rule));
  };
  if (value.empty() || value.size() > kMaxNameBytes) {
    return refused(" must be 1 to 128 characters of A-Z, a-z, 0-9, '.', '_' or '-'.");
  }
  if (value == "." || value == "..") return refused(" may not be '.' or '..'.");
  for (const char c : value) {
    if (!kNameChar[static_cast<unsigned char>(c)]) {
      return refused(" may only contain A-Z, a-z, 0-9, '.', '_' and '-'.");
    }
  }
  return {};
}

bool is_valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    const unsigned char c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    int n;
    std::uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (end - p < n + 1) return false;  // truncated sequence
    for (int i = 1; i <= n; ++i) {
      if ((p[i] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i] & 0x3F);
    }
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000)) return false;
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    p += n + 1;
  }
  return true;
}

Result<void> validate_key(std::string_view value, std::string_view field) {
  const std::string f(field);
  if (value.empty()) return invalid_field(f, "The " + f + " must not be empty.");
  if (value.size() > kMaxKeyBytes) {
    return invalid_field(f, "The " + f + " must be at most 512 bytes of UTF-8.");
  }
  if (value.find('\0') != std::string_view::npos) {
    return invalid_field(f, "The " + f + " must not contain a NUL character.");
  }
  if (!is_valid_utf8(value)) return invalid_field(f, "The " + f + " must be valid UTF-8.");
  return {};
}

Result<void> validate_request_id(std::string_view value) {
  if (value.empty() || value.size() > kMaxRequestIdBytes) {
    return invalid_field("request_id",
                         "The request_id must be 1 to 128 bytes of UTF-8 (send a fresh random id "
                         "per claim, e.g. a UUID, and the same one on every retry of it).");
  }
  if (value.find('\0') != std::string_view::npos) {
    return invalid_field("request_id", "The request_id must not contain a NUL character.");
  }
  if (!is_valid_utf8(value))
    return invalid_field("request_id", "The request_id must be valid UTF-8.");
  return {};
}

}  // namespace ichido::core
