// The one place that maps errc to an HTTP status and the JSON error body:
//   {"error": {"code": "snake_case", "message": "...", "details": {"field": "...", ...}}}
#pragma once

#include <boost/json/value.hpp>

#include "ichido/result.h"

namespace ichido::http {

unsigned http_status(errc code);
boost::json::value error_body(const Error& e);

}  // namespace ichido::http
