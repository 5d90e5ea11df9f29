#include "http/error_mapping.h"

#include <boost/json.hpp>

#include "http/message.h"

namespace ichido::http {

// Exhaustive on purpose: adding an errc without deciding its status fails to compile (-Wswitch).
unsigned http_status(errc code) {
  switch (code) {
    case errc::invalid_request:
      return 400;
    case errc::key_required:
      return 400;
    case errc::body_too_large:
      return 413;
    case errc::headers_too_large:
      return 431;
    case errc::uri_too_long:
      return 414;
    case errc::route_not_found:
      return 404;
    case errc::method_not_allowed:
      return 405;
    case errc::unauthenticated:
      return 401;
    case errc::forbidden:
      return 403;
    case errc::counter_not_found:
      return 404;
    case errc::counter_exists:
      return 409;
    case errc::counter_exhausted:
      return 409;
    case errc::value_mismatch:
      return 409;
    case errc::value_below_issued:
      return 409;
    case errc::value_not_issued:
      return 409;
    case errc::once_not_found:
      return 404;
    case errc::token_not_found:
      return 404;
    case errc::fingerprint_mismatch:
      return 422;
    case errc::stale_token:
      return 409;
    case errc::not_holder:
      return 409;
    case errc::too_many_waiters:
      return 429;
    case errc::store_unavailable:
      return 503;
    case errc::store_corrupt:
      return 500;
    case errc::result_mismatch:
      return 409;
    case errc::too_many_connections:
      return 503;
    case errc::internal:
      return 500;
  }
  return 500;
}

boost::json::value error_body(const Error& e) {
  boost::json::object details;
  if (!e.field.empty()) details["field"] = e.field;
  for (const auto& [k, v] : e.details) {
    if (const auto* i = std::get_if<std::int64_t>(&v))
      details[k] = *i;
    else
      details[k] = std::get<std::string>(v);
  }
  boost::json::object err;
  err["code"] = to_string(e.code);
  err["message"] = e.message;
  err["details"] = std::move(details);
  boost::json::object root;
  root["error"] = std::move(err);
  return root;
}

namespace {

template <class Json>
Response json_response(unsigned status, const Json& j) {
  Response r;
  r.status = status;
  r.body = boost::json::serialize(j);
  return r;
}

}  // namespace

Response Response::json(unsigned status, const boost::json::value& v) {
  return json_response(status, v);
}

Response Response::json(unsigned status, const boost::json::object& o) {
  return json_response(status, o);
}

Response Response::json(unsigned status, JsonWriter&& w) {
  Response r;
  r.status = status;
  r.body = std::move(w).take();
  return r;
}

Response Response::error(const Error& e) { return json(http_status(e.code), error_body(e)); }

Response Response::text(unsigned status, std::string body, std::string_view content_type) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  r.content_type = content_type;
  return r;
}

}  // namespace ichido::http
