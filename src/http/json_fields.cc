#include "http/json_fields.h"

#include <boost/json/parse.hpp>
#include <boost/json/parse_options.hpp>

namespace ichido::http {
namespace {

Error range_error(std::string_view name, std::int64_t min, std::int64_t max) {
  std::string f(name);
  std::string hi = max == core::kMaxJsonInteger ? "2^53" : std::to_string(max);
  return invalid_field(f, "The field '" + f + "' must be a whole number from " +
                              std::to_string(min) + " to " + hi + ".");
}

}  // namespace

Result<boost::json::object> parse_body(std::string_view body) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return boost::json::object();
  boost::json::parse_options opts;
  opts.max_depth = kMaxJsonDepth;
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(body, ec, {}, opts);
  if (ec) {
    return Error(errc::invalid_request,
                 "The request body is not valid JSON (" + ec.message() + "); send a JSON object.");
  }
  if (!v.is_object()) {
    return Error(errc::invalid_request, "The request body must be a JSON object.");
  }
  return std::move(v.as_object());
}

Result<std::optional<std::int64_t>> Fields::opt_int(std::string_view name, std::int64_t min,
                                                    std::int64_t max) const {
  const auto* v = o_.if_contains(name);
  if (!v || v->is_null()) return std::optional<std::int64_t>();
  std::int64_t n;
  if (v->is_int64()) {
    n = v->get_int64();
  } else if (v->is_uint64()) {
    if (v->get_uint64() > static_cast<std::uint64_t>(max)) return range_error(name, min, max);
    n = static_cast<std::int64_t>(v->get_uint64());
  } else {
    return range_error(name, min, max);
  }
  if (n < min || n > max) return range_error(name, min, max);
  return std::optional<std::int64_t>(n);
}

Result<std::int64_t> Fields::req_int(std::string_view name, std::int64_t min,
                                     std::int64_t max) const {
  auto v = opt_int(name, min, max);
  if (!v.ok()) return std::move(v).error();
  if (!*v) {
    std::string f(name);
    return invalid_field(f, "The field '" + f + "' is required.");
  }
  return **v;
}

Result<std::optional<std::string>> Fields::opt_string(std::string_view name) const {
  const auto* v = o_.if_contains(name);
  if (!v || v->is_null()) return std::optional<std::string>();
  if (!v->is_string()) {
    std::string f(name);
    return invalid_field(f, "The field '" + f + "' must be a string.");
  }
  const auto& s = v->get_string();
  return std::optional<std::string>(std::string(s.data(), s.size()));
}

Result<std::string> Fields::req_string(std::string_view name) const {
  auto v = opt_string(name);
  if (!v.ok()) return std::move(v).error();
  if (!*v) {
    std::string f(name);
    return invalid_field(f, "The field '" + f + "' is required.");
  }
  return std::move(**v);
}

Result<std::optional<bool>> Fields::opt_bool(std::string_view name) const {
  const auto* v = o_.if_contains(name);
  if (!v || v->is_null()) return std::optional<bool>();
  if (!v->is_bool()) {
    std::string f(name);
    return invalid_field(f, "The field '" + f + "' must be true or false.");
  }
  return std::optional<bool>(v->get_bool());
}

Result<std::int64_t> parse_query_int(std::string_view text, std::string_view name, std::int64_t min,
                                     std::int64_t max) {
  if (text.empty() || text.size() > 16) return range_error(name, min, max);
  std::int64_t n = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return range_error(name, min, max);
    n = n * 10 + (c - '0');
  }
  if (n < min || n > max) return range_error(name, min, max);
  return n;
}

}  // namespace ichido::http
