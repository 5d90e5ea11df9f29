// Router: the route table. Patterns are literal segments and {placeholders}, one per segment
// ("/v1/ns/{ns}/counters/{name}/next"). A path no pattern matches is 404 route_not_found; a path
// that matches only with another method is 405 method_not_allowed (with an Allow header).
// Built once at start-up, then read-only: safe to share between threads.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "http/message.h"

namespace ichido::http {

using Params = std::map<std::string, std::string, std::less<>>;
using Handler = std::function<boost::asio::awaitable<Response>(const Request&, const Params&)>;

struct Route {
  beast_http::verb method;
  std::string pattern;
  std::vector<std::string> parts;
  Handler handler;
};

class Router {
 public:
  void add(beast_http::verb method, std::string pattern, Handler handler);
  boost::asio::awaitable<Response> dispatch(const Request& req) const;
  const std::vector<Route>& routes() const { return routes_; }

 private:
  std::vector<Route> routes_;
};

// Splits and percent-decodes a request target (origin form). Errors: invalid_request.
Result<void> parse_target(std::string_view target, Request& out);

}  // namespace ichido::http
