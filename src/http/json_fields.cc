#include "http/json_fields.h"

#include <boost/json/parse.hpp>
#include <boost/json/parse_options.hpp>

namespace ichido::http {

Result<boost::json::object> parse_body(std::string_view body, boost::json::storage_ptr sp) {
  // RFC 8259 §8.1: a parser may ignore a UTF-8 byte order mark before the text. VBA's
  // ADODB.Stream and Windows tools write one; anywhere else it stays invalid JSON.
  if (body.substr(0, 3) == "\xEF\xBB\xBF") body.remove_prefix(3);
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos)
    return boost::json::object(std::move(sp));
  boost::json::parse_options opts;
  opts.max_depth = kMaxJsonDepth;
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(body, ec, std::move(sp), opts);
  if (ec) {
    return Error(errc::invalid_request,
                 "The request body is not valid JSON (" + ec.message() + "); send a JSON object.");
  }
  if (!v.is_object()) {
    return Error(errc::invalid_request, "The request body must be a JSON object.");
  }
  return std::move(v.as_object());
}

Result<std::optional<std::int64_t>> Fields::opt_int(const core::IntRule& rule) const {
  const auto* v = o_.if_contains(rule.field);
  if (!v || v->is_null()) return std::optional<std::int64_t>();
  std::int64_t n;
  if (v->is_int64()) {
    n = v->get_int64();
  } else if (v->is_uint64() && v->get_uint64() <= static_cast<std::uint64_t>(rule.max)) {
    n = static_cast<std::int64_t>(v->get_uint64());
  } else {
    return core::out_of_range(rule);  // a string, a fraction, a huge number: not this field
  }
  ICHIDO_TRY(core::check(rule, n));
  return std::optional<std::int64_t>(n);
}

Result<std::int64_t> Fields::req_int(const core::IntRule& rule) const {
  auto v = opt_int(rule);
  if (!v.ok()) return std::move(v).error();
  if (!*v) {
    std::string f(rule.field);
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

Result<std::int64_t> parse_query_int(std::string_view text, const core::IntRule& rule) {
  if (text.empty() || text.size() > 16) return core::out_of_range(rule);
  std::int64_t n = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return core::out_of_range(rule);
    n = n * 10 + (c - '0');
  }
  ICHIDO_TRY(core::check(rule, n));
  return n;
}

}  // namespace ichido::http
