// Validation of the identifiers every request carries: namespaces, resource names and keys.
// Pure functions; the error names the JSON field (or path parameter) at fault.
#pragma once

#include <cstdint>
#include <string_view>

#include "ichido/result.h"

namespace ichido::core {

// Largest integer a JSON number may carry in the API (2^53): beyond it, JavaScript clients
// (Apps Script) silently lose precision.
inline constexpr std::int64_t kMaxJsonInteger = std::int64_t{1} << 53;

inline constexpr std::size_t kMaxNameBytes = 128;
inline constexpr std::size_t kMaxKeyBytes = 512;

// Namespaces, counter and lock names: [A-Za-z0-9._-], 1–128 bytes, not "." or "..".
// `field` is "ns" or "name".
Result<void> validate_name(std::string_view value, std::string_view field);

// Idempotency keys and once keys: valid UTF-8, 1–512 bytes, no NUL.
Result<void> validate_key(std::string_view value, std::string_view field = "key");

// A claim's request_id (lock acquire, once begin; docs/API.md "Retrying a claim whose answer was
// lost"): valid UTF-8, 1–128 bytes, no NUL (field "request_id").
inline constexpr std::size_t kMaxRequestIdBytes = 128;
Result<void> validate_request_id(std::string_view value);

// True when `s` is well-formed UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF).
bool is_valid_utf8(std::string_view s);

}  // namespace ichido::core
