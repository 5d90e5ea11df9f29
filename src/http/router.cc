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

bool matches(const Route& r, const std::vector<std::string>& segs, Params* params) {
  if (r.parts.size() != segs.size()) return false;
  for (std::size_t i = 0; i < segs.size(); ++i) {
    const auto& p = r.parts[i];
    if (p.size() >= 2 && p.front() == '{' && p.back() == '}') {
      if (params) (*params)[p.substr(1, p.size() - 2)] = segs[i];
    } else if (p != segs[i]) {
      return false;
    }
  }
  return true;
}

}  // namespace

void Router::add(beast_http::verb method, std::string pattern, Handler handler) {
  const auto role = method == beast_http::verb::get ? core::Role::reader : core::Role::writer;
  routes_.push_back(Route{method, pattern, split(pattern), std::move(handler), role});
}

void Router::add_admin(beast_http::verb method, std::string pattern, Handler handler) {
  routes_.push_back(Route{method, pattern, split(pattern), std::move(handler), core::Role::admin});
}

void Router::add_any_scope(std::string pattern, Handler handler) {
  Route r{beast_http::verb::get, pattern, split(pattern), std::move(handler), core::Role::reader};
  r.any_scope = true;
  routes_.push_back(std::move(r));
}

Match Router::match(const Request& req) const {
  Match m;
  std::string allow;
  for (const auto& r : routes_) {
    if (!matches(r, req.segments, nullptr)) continue;
    if (r.method != req.method) {
      if (!allow.empty()) allow += ", ";
      allow += std::string(beast_http::to_string(r.method));
      continue;
    }
    matches(r, req.segments, &m.params);
    m.route = &r;
    return m;
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
