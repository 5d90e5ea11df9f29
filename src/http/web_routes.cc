// The dashboard: GET / and the static files beside it, straight from the embedded table
// (web_assets.h). No token is needed for these files (they hold no data; the page's own API calls
// carry the token the operator pastes in). Every answer carries a strict Content-Security-Policy:
// scripts, styles and connections only from this origin, no inline script or style, no framing.
//
// Caching: the files change only with the binary, so each has a strong ETag (a hash of its
// bytes) and "Cache-Control: no-cache": browsers keep a copy but revalidate on every load, and an
// unchanged file costs a 304 without a body. An upgraded server is therefore picked up at once.
#include <boost/json.hpp>

#include "http/routes.h"
#include "http/web_assets.h"

namespace ichido::http {
namespace {

constexpr std::string_view kCsp =
    "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

// True when an If-None-Match header value names `etag` (or is "*").
bool etag_matches(std::string_view header, std::string_view etag) {
  if (header.empty()) return false;
  if (header == "*") return true;
  std::size_t pos = 0;
  while (pos < header.size()) {
    std::size_t end = header.find(',', pos);
    if (end == std::string_view::npos) end = header.size();
    std::string_view item = header.substr(pos, end - pos);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item.starts_with("W/")) item.remove_prefix(2);  // weak comparison, RFC 9110 13.1.2
    if (item == etag) return true;
    pos = end + 1;
  }
  return false;
}

Response asset_response(const WebAsset& a, const Request& req) {
  Response r;
  r.headers.emplace_back("Content-Security-Policy", std::string(kCsp));
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
  r.headers.emplace_back("X-Frame-Options", "DENY");
  r.headers.emplace_back("Cache-Control", "no-cache");
  r.headers.emplace_back("ETag", std::string(a.etag));
  r.content_type = a.content_type;
  if (etag_matches(req.if_none_match, a.etag)) {
    r.status = 304;
    return r;
  }
  r.status = 200;
  r.body = std::string(a.body);
  return r;
}

boost::asio::awaitable<Response> serve_file(std::string name, const Request& req) {
  for (const WebAsset& a : web_assets()) {
    if (a.path.substr(1) == name) co_return asset_response(a, req);
  }
  co_return Response::error(
      Error(errc::route_not_found, "No such route; see docs/openapi.yaml for the API's paths."));
}

}  // namespace

void add_web_routes(Router& router) {
  using verb = beast_http::verb;
  router.add(verb::get, "/",
             [](const Request& req, const Params&) { return serve_file("index.html", req); });
  // One pattern for every file (registered after the API, so /healthz, /metrics… match first).
  router.add(verb::get, "/{file}", [](const Request& req, const Params& p) {
    return serve_file(std::string(p.at("file")), req);
  });
}

}  // namespace ichido::http
