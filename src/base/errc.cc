#include "ichido/errc.h"

namespace ichido {

std::string_view to_string(errc code) {
  switch (code) {
    case errc::invalid_request:
      return "invalid_request";
    case errc::key_required:
      return "key_required";
    case errc::body_too_large:
      return "body_too_large";
    case errc::headers_too_large:
      return "headers_too_large";
    case errc::uri_too_long:
      return "uri_too_long";
    case errc::route_not_found:
      return "route_not_found";
    case errc::method_not_allowed:
      return "method_not_allowed";
    case errc::unauthenticated:
      return "unauthenticated";
    case errc::forbidden:
      return "forbidden";
    case errc::counter_not_found:
      return "counter_not_found";
    case errc::counter_exists:
      return "counter_exists";
    case errc::counter_exhausted:
      return "counter_exhausted";
    case errc::value_mismatch:
      return "value_mismatch";
    case errc::value_below_issued:
      return "value_below_issued";
    case errc::value_not_issued:
      return "value_not_issued";
    case errc::once_not_found:
      return "once_not_found";
    case errc::token_not_found:
      return "token_not_found";
    case errc::fingerprint_mismatch:
      return "fingerprint_mismatch";
    case errc::stale_token:
      return "stale_token";
    case errc::not_holder:
      return "not_holder";
    case errc::too_many_waiters:
      return "too_many_waiters";
    case errc::store_unavailable:
      return "store_unavailable";
    case errc::store_corrupt:
      return "store_corrupt";
    case errc::result_mismatch:
      return "result_mismatch";
    case errc::too_many_connections:
      return "too_many_connections";
    case errc::internal:
      return "internal";
  }
  return "internal";
}

}  // namespace ichido
