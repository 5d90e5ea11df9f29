// Router: the route table. Patterns are literal segments and {placeholders}, one per segment
// ("/v1/ns/{ns}/counters/{name}/next"). A path no pattern matches is 404 route_not_found; a path
// that matches only with another method is 405 method_not_allowed (with an Allow header).
// Built once at start-up, then read-only: safe to share between threads.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/container/small_vector.hpp>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/auth.h"
#include "http/message.h"

namespace ichido::http {

// A matched route's parameters by placeholder name ("ns" → "shop"), in the pattern's order: views
// of the route's names and of the request's segments, valid while both are (a handler's call).
// A route has a few (at most three today), so they are kept inline: matching a request copies
// and allocates nothing for them.
class Params {
 public:
  using value_type = std::pair<std::string_view, std::string_view>;
  using const_iterator = const value_type*;

  Params() = default;
  Params(std::initializer_list<value_type> items) : items_(items) {}

  // The value of placeholder `name`; std::out_of_range when the route has none of that name.
  std::string_view at(std::string_view name) const;
  // The entry of placeholder `name`, or end().
  const_iterator find(std::string_view name) const;
  // The value of placeholder `name`, or "" when the route has none of that name.
  std::string_view get(std::string_view name) const {
    const auto it = find(name);
    return it == end() ? std::string_view() : it->second;
  }
  const_iterator begin() const { return items_.data(); }
  const_iterator end() const { return items_.data() + items_.size(); }
  bool empty() const { return items_.empty(); }
  std::size_t size() const { return items_.size(); }
  void add(std::string_view name, std::string_view value) { items_.emplace_back(name, value); }
  friend bool operator==(const Params& a, const Params& b) { return a.items_ == b.items_; }

 private:
  boost::container::small_vector<value_type, 3> items_;
};
using Handler = std::function<boost::asio::awaitable<Response>(const Request&, const Params&)>;

// Who may call a route: the least role needed (reader for GET, writer otherwise, unless the
// route is marked admin). Admin calls are also written to the audit log.
struct Route {
  beast_http::verb method;
  std::string pattern;
  std::vector<std::string> parts;
  Handler handler;
  core::Role role = core::Role::reader;
  // The namespace scope is not checked before the handler (which filters by req.principal
  // itself): calls about the caller or across the namespaces it may see.
  bool any_scope = false;
  // Set by Router::add*: for each of `parts`, its placeholder's name without braces ("ns" for
  // "{ns}"), or empty for a literal segment.
  std::vector<std::string> param_names;
  bool admin() const { return role == core::Role::admin; }
};

// The outcome of matching a request: a route and its parameters (views of the request: see
// Params), or the 404/405 answer.
struct Match {
  const Route* route = nullptr;
  Params params;
  std::optional<Response> error;
};

class Router {
 public:
  // Registers a route needing reader (GET) or writer (other methods).
  void add(beast_http::verb method, std::string pattern, Handler handler);
  // Registers a route needing an admin token.
  void add_admin(beast_http::verb method, std::string pattern, Handler handler);
  // Registers a GET route any active token may call whatever its scope (see Route::any_scope).
  void add_any_scope(std::string pattern, Handler handler);
  Match match(const Request& req) const;
  const std::vector<Route>& routes() const { return routes_; }

 private:
  void push(Route r);
  std::vector<Route> routes_;
};

// Splits and percent-decodes a request target (origin form, RFC 3986: "/" segments, then an
// optional "?" query; what Boost.URL's parse_origin_form accepts). Errors: invalid_request (and
// `out` unchanged) for anything else, e.g. a bad escape, a space, a fragment, a non-ASCII byte.
Result<void> parse_target(std::string_view target, Request& out);

}  // namespace ichido::http
