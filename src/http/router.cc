#include "http/router.h"

#include <boost/url/parse.hpp>

namespace ichido::http {
namespace {

std::vector<std::string> split(std::string_view pattern) {
  std::vector<std::string> out;
  if (pattern == "/") return out;
  std::size_t i = 1;  // skip the leading '/'
  while (i <= pattern.size()) {
    const auto j = pattern.find('/', i);
    const auto end = j == std::string_view::npos ? pattern.size() : j;
    out.emplace_back(pattern.substr(i, end - i));
    i = end + 1;
  }
  return out;
}

// True when every literal segment of `r` equals the request's (placeholders match anything).
bool path_matches(const Route& r, const std::vector<std::string>& segs) {
  if (r.parts.size() != segs.size()) return false;
  for (std::size_t i = 0; i < segs.size(); ++i) {
    if (r.param_names[i].empty() && r.parts[i] != segs[i]) return false;
  }
  return true;
}

}  // namespace

void Router::push(Route r) {
  r.param_names.clear();
  for (const auto& p : r.parts) {
    const bool placeholder = p.size() >= 2 && p.front() == '{' && p.back() == '}';
    r.param_names.push_back(placeholder ? p.substr(1, p.size() - 2) : std::string());
  }
  routes_.push_back(std::move(r));
}

void Router::add(beast_http::verb method, std::string pattern, Handler handler) {
  const auto role = method == beast_http::verb::get ? core::Role::reader : core::Role::writer;
  push(Route{method, pattern, split(pattern), std::move(handler), role});
}

void Router::add_admin(beast_http::verb method, std::string pattern, Handler handler) {
  push(Route{method, pattern, split(pattern), std::move(handler), core::Role::admin});
}

void Router::add_any_scope(std::string pattern, Handler handler) {
  Route r{beast_http::verb::get, pattern, split(pattern), std::move(handler), core::Role::reader};
  r.any_scope = true;
  push(std::move(r));
}

// The first route (in the order added) with the request's method whose path matches wins; its
// parameters are bound once. Only when none does are the routes walked again, for the 405's
// Allow header (the methods of the routes whose path matches, in the order added) or the 404.
Match Router::match(const Request& req) const {
  Match m;
  for (const auto& r : routes_) {
    if (r.method != req.method || !path_matches(r, req.segments)) continue;
    for (std::size_t i = 0; i < r.param_names.size(); ++i) {
      if (!r.param_names[i].empty()) m.params[r.param_names[i]] = req.segments[i];
    }
    m.route = &r;
    return m;
  }
  std::string allow;
  for (const auto& r : routes_) {
    if (!path_matches(r, req.segments)) continue;
    if (!allow.empty()) allow += ", ";
    allow += std::string(beast_http::to_string(r.method));
  }
  if (!allow.empty()) {
    Response res = Response::error(
        Error(errc::method_not_allowed,
              "This path does not accept " + req.method_string + "; use " + allow + "."));
    res.headers.emplace_back("Allow", allow);
    m.error = std::move(res);
  } else {
    m.error = Response::error(
        Error(errc::route_not_found, "No such route; see docs/openapi.yaml for the API's paths."));
  }
  return m;
}

Result<void> parse_target(std::string_view target, Request& out) {
  auto u = boost::urls::parse_origin_form(target);
  if (!u) {
    return Error(errc::invalid_request, "The request path is not a valid URL path.");
  }
  out.path = std::string(u->encoded_path());
  out.segments.clear();
  for (auto seg : u->encoded_segments()) out.segments.push_back(seg.decode());
  out.query.clear();
  for (auto p : u->params()) out.query.emplace(p.key, p.has_value ? p.value : std::string());
  return {};
}

}  // namespace ichido::http
