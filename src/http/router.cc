#include "http/router.h"

#include <algorithm>
#include <array>
#include <stdexcept>

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
// Compared from the last segment: routes of one length share their first ones ("v1", "ns") and
// differ at the end ("next", "acquire"), so a route that does not match is usually told by one
// comparison.
bool path_matches(const Route& r, const Segments& segs) {
  if (r.parts.size() != segs.size()) return false;
  for (std::size_t i = segs.size(); i-- > 0;) {
    if (r.param_names[i].empty() && r.parts[i] != segs[i]) return false;
  }
  return true;
}

// RFC 3986 pchar other than pct-encoded: unreserved / sub-delims / ":" / "@", as a table.
constexpr auto kPchar = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 256; ++c) {
    t[c] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  }
  for (char c : std::string_view("-._~!$&'()*+,;=:@")) t[static_cast<unsigned char>(c)] = true;
  return t;
}();

// What a byte of a target is to parse_target, by one table lookup: a pchar, '/', '%' (an escape
// starts), '?' or anything else (invalid).
enum CharClass : unsigned char { kInvalid, kPlain, kSlash, kPercent, kQuestion };
constexpr auto kClass = [] {
  std::array<CharClass, 256> t{};
  for (int c = 0; c < 256; ++c) t[c] = kPchar[c] ? kPlain : kInvalid;
  t['/'] = kSlash;
  t['%'] = kPercent;
  t['?'] = kQuestion;
  return t;
}();

CharClass class_of(char c) { return kClass[static_cast<unsigned char>(c)]; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// True when s[i] (a '%') starts a complete escape: two hex digits follow.
bool escape_at(std::string_view s, std::size_t i) {
  return i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0;
}

// Decodes an already validated segment, key or value into `out`; without a '%' (or a '+' that
// `plus_is_space` turns into ' ') it is a plain copy.
void decode_into(std::string_view s, bool plus_is_space, std::string& out) {
  if (s.find('%') == std::string_view::npos &&
      (!plus_is_space || s.find('+') == std::string_view::npos)) {
    out.assign(s);
    return;
  }
  out.clear();
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      out.push_back(static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2])));
      i += 2;
    } else {
      out.push_back(plus_is_space && s[i] == '+' ? ' ' : s[i]);
    }
  }
}

}  // namespace

std::string_view Params::at(std::string_view name) const {
  const auto it = find(name);
  if (it == end()) throw std::out_of_range("no route parameter " + std::string(name));
  return it->second;
}

Params::const_iterator Params::find(std::string_view name) const {
  return std::find_if(begin(), end(), [name](const value_type& v) { return v.first == name; });
}

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
      if (!r.param_names[i].empty()) m.params.add(r.param_names[i], req.segments[i]);
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

// The grammar is Boost.URL's parse_origin_form (which this replaced, for its cost: a parse, then a
// decode of every segment into a new string): origin-form = 1*( "/" segment ) [ "?" query ],
// segment = *pchar, query = *( pchar / "/" / "?" ), pct-encoded = "%" HEXDIG HEXDIG; anything
// else (a bad escape, a space, '#', a byte >= 0x80) is invalid_request and leaves `out` as it was.
// Segments are decoded as Boost.URL's encoded_segments() (a path starting "/./" drops its "."; the
// path "/" has no segments; '+' stays '+'); the query as its params(): split at '&', the key at the
// first '=', '+' decoded as a space, "?" alone one parameter with an empty key. router_test holds
// both to the same answers on random targets.
Result<void> parse_target(std::string_view target, Request& out) {
  const auto invalid = [] {
    return Error(errc::invalid_request, "The request path is not a valid URL path.");
  };
  const std::size_t q = std::min(target.find('?'), target.size());
  const std::string_view path = target.substr(0, q);
  if (path.empty() || path.front() != '/') return invalid();
  // One table lookup a byte; a path without an escape (most) is then cut into segments that are
  // made straight from it, with no search for '%' and no second copy.
  std::size_t slashes = 0;
  bool escaped = false;
  for (std::size_t i = 0; i < path.size(); ++i) {
    switch (class_of(path[i])) {
      case kPlain:
        break;
      case kSlash:
        ++slashes;
        break;
      case kPercent:
        if (!escape_at(path, i)) return invalid();
        escaped = true;
        i += 2;
        break;
      default:
        return invalid();
    }
  }
  for (std::size_t i = q + 1; i < target.size(); ++i) {
    switch (class_of(target[i])) {
      case kPlain:
      case kSlash:
      case kQuestion:
        break;
      case kPercent:
        if (!escape_at(target, i)) return invalid();
        i += 2;
        break;
      default:
        return invalid();
    }
  }

  out.path = path;
  out.segments.clear();
  if (path.size() > 1) {
    std::size_t i = path.starts_with("/./") ? 3 : 1;  // Boost.URL's "malleable" prefix
    out.segments.reserve(slashes);
    for (;;) {
      std::size_t end = i;
      while (end < path.size() && path[end] != '/') ++end;
      const std::string_view seg = path.substr(i, end - i);
      if (escaped) {
        decode_into(seg, false, out.segments.emplace_back());
      } else {
        out.segments.emplace_back(seg);  // nothing to decode in the whole path
      }
      if (end == path.size()) break;
      i = end + 1;
    }
  }
  out.query.clear();
  if (q < target.size()) {
    const std::string_view query = target.substr(q + 1);
    std::size_t i = 0;
    for (;;) {
      const std::size_t end = std::min(query.find('&', i), query.size());
      const std::string_view param = query.substr(i, end - i);
      const std::size_t eq = std::min(param.find('='), param.size());
      std::string key, value;
      decode_into(param.substr(0, eq), true, key);
      if (eq < param.size()) decode_into(param.substr(eq + 1), true, value);
      out.query.emplace(std::move(key), std::move(value));
      if (end == query.size()) break;
      i = end + 1;
    }
  }
  return {};
}

}  // namespace ichido::http
