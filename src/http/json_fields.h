// Decoding request bodies: JSON text -> object, and typed field access whose errors name the
// field (400 invalid_request, details.field). Absent and null fields read as "not given".
// Integers must be JSON integers (no fraction, no exponent) within the field's range; the API's
// ceiling is 2^53 so JavaScript callers never lose precision.
#pragma once

#include <boost/json/object.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/names.h"
#include "ichido/result.h"

namespace ichido::http {

inline constexpr int kMaxJsonDepth = 32;

// Parses a request body. An empty body reads as {}. Errors: invalid_request (not JSON, not an
// object, invalid UTF-8, nested deeper than kMaxJsonDepth).
Result<boost::json::object> parse_body(std::string_view body);

class Fields {
 public:
  explicit Fields(const boost::json::object& o) : o_(o) {}

  Result<std::optional<std::int64_t>> opt_int(std::string_view name, std::int64_t min = 0,
                                              std::int64_t max = core::kMaxJsonInteger) const;
  Result<std::int64_t> req_int(std::string_view name, std::int64_t min = 0,
                               std::int64_t max = core::kMaxJsonInteger) const;
  Result<std::optional<std::string>> opt_string(std::string_view name) const;
  Result<std::string> req_string(std::string_view name) const;
  Result<std::optional<bool>> opt_bool(std::string_view name) const;
  // The raw value, or nullptr when absent.
  const boost::json::value* raw(std::string_view name) const { return o_.if_contains(name); }

 private:
  const boost::json::object& o_;
};

// Parses a non-negative decimal integer from a query parameter (no sign, no fraction).
Result<std::int64_t> parse_query_int(std::string_view text, std::string_view name, std::int64_t min,
                                     std::int64_t max);

}  // namespace ichido::http
