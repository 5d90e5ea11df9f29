// Decoding request bodies: JSON text -> object, and typed field access whose errors name the
// field (400 invalid_request, details.field). Absent and null fields read as "not given".
// Integers are read by their rule (core/fields.h, the one owner of each field's range and
// message): anything but a JSON integer in the rule's range — a string, a fraction, a negative,
// more than 2^53 — is the rule's one error, so the message always states the real range.
#pragma once

#include <boost/json/monotonic_resource.hpp>
#include <boost/json/object.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/fields.h"
#include "core/names.h"
#include "ichido/result.h"

namespace ichido::http {

inline constexpr int kMaxJsonDepth = 32;

// Parses a request body. An empty body reads as {}. One UTF-8 byte order mark (EF BB BF) at the
// very start is skipped (RFC 8259 §8.1); a BOM anywhere else is invalid JSON. Errors:
// invalid_request (not JSON, not an object, invalid UTF-8, nested deeper than kMaxJsonDepth).
// `sp`: where the object's memory comes from (the heap by default; a handler may pass a
// monotonic buffer on its stack when the object does not outlive it).
Result<boost::json::object> parse_body(std::string_view body, boost::json::storage_ptr sp = {});

class Fields {
 public:
  explicit Fields(const boost::json::object& o) : o_(o) {}

  Result<std::optional<std::int64_t>> opt_int(const core::IntRule& rule) const;
  Result<std::int64_t> req_int(const core::IntRule& rule) const;
  Result<std::optional<std::string>> opt_string(std::string_view name) const;
  Result<std::string> req_string(std::string_view name) const;
  Result<std::optional<bool>> opt_bool(std::string_view name) const;
  // The raw value, or nullptr when absent.
  const boost::json::value* raw(std::string_view name) const { return o_.if_contains(name); }

 private:
  const boost::json::object& o_;
};

// Parses `body` into a buffer on the calling thread's stack and returns make(Fields) — a
// Result<Command> whose command owns copies of what it keeps. For handlers, which are
// coroutines: a coroutine's locals live in its heap frame (kept while a request waits), and a
// body parsed with the default resource costs an allocation per object and long string; this
// buffer is gone when the command is made. A body larger than the buffer continues on the heap.
template <class Make>
auto command_from_body(std::string_view body, Make&& make)
    -> decltype(make(std::declval<const Fields&>())) {
  unsigned char buf[1024];
  boost::json::monotonic_resource mr(buf, sizeof buf);
  auto parsed = parse_body(body, &mr);
  if (!parsed.ok()) return std::move(parsed).error();
  return make(Fields(*parsed));
}

// In a function returning Result<…> (a command_from_body maker): declares `var` as the value of
// the Result `expr`, or returns its error.
#define ICHIDO_FIELD(var, expr)                         \
  auto var##_r = (expr);                                \
  if (!var##_r.ok()) return std::move(var##_r).error(); \
  auto& var = *var##_r

// Parses a query parameter by its rule: decimal digits only (no sign, no fraction), in range.
Result<std::int64_t> parse_query_int(std::string_view text, const core::IntRule& rule);

}  // namespace ichido::http
