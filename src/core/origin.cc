#include "core/origin.h"

#include <cctype>

namespace ichido::core {
namespace {

Error bad(std::string_view text, const std::string& why) {
  return Error(errc::invalid_request, "'" + std::string(text) +
                                          "' is not an origin like https://example.com or " +
                                          "https://intranet.example.com:8443 (" + why + ")");
}

bool host_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

}  // namespace

Result<std::string> parse_origin_pattern(std::string_view text) {
  if (text == "*") {
    return Error(errc::invalid_request,
                 "'*' is refused: name each origin (scheme://host[:port]) whose pages may call "
                 "ichido (docs/decisions/102-cors.md)");
  }
  if (text == "null") {
    return Error(errc::invalid_request,
                 "'null' is refused: sandboxed pages and local files all send "
                 "Origin: null, so it would allow any of them");
  }
  std::string s(text);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string scheme;
  std::string_view rest;
  if (s.rfind("https://", 0) == 0) {
    scheme = "https";
  } else if (s.rfind("http://", 0) == 0) {
    scheme = "http";
  } else {
    return bad(text, "the scheme must be http:// or https://");
  }
  rest = std::string_view(s).substr(scheme.size() + 3);
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find_first_of("/?#") != std::string_view::npos) {
    return bad(text, "an origin has no path, query or fragment");
  }
  if (rest.find('@') != std::string_view::npos) return bad(text, "an origin has no user info");
  std::string_view host = rest;
  std::string_view port;
  if (!rest.empty() && rest.front() == '[') {  // an IPv6 literal
    const auto close = rest.find(']');
    if (close == std::string_view::npos) return bad(text, "the IPv6 address has no ']'");
    host = rest.substr(0, close + 1);
    const auto after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return bad(text, "unexpected text after the IPv6 address");
      port = after.substr(1);
      if (port.empty()) return bad(text, "the port is missing after ':'");
    }
    for (char c : host.substr(1, host.size() - 2)) {
      if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.') {
        return bad(text, "not an IPv6 address");
      }
    }
  } else {
    const auto colon = rest.find(':');
    if (colon != std::string_view::npos) {
      host = rest.substr(0, colon);
      port = rest.substr(colon + 1);
      if (port.empty()) return bad(text, "the port is missing after ':'");
    }
    std::string_view labels = host;
    if (labels.rfind("*.", 0) == 0) labels.remove_prefix(2);  // a subdomain pattern
    if (labels.empty()) return bad(text, "the host is missing");
    for (char c : labels) {
      if (!host_char(c)) {
        return bad(text, c == '*' ? "'*' may only be the first label, as in https://*.example.com"
                                  : "the host has a character a host name cannot have");
      }
    }
    if (labels.front() == '.' || labels.back() == '.' ||
        labels.find("..") != std::string_view::npos) {
      return bad(text, "the host has an empty label");
    }
    if (host.size() > labels.size() && labels.find('.') == std::string_view::npos) {
      return bad(text, "a subdomain pattern needs a domain with a dot, like *.example.com");
    }
  }
  if (!port.empty()) {
    if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos) {
      return bad(text, "the port must be a number from 1 to 65535");
    }
    const int n = std::stoi(std::string(port));
    if (n < 1 || n > 65535) return bad(text, "the port must be a number from 1 to 65535");
    if ((scheme == "http" && n == 80) || (scheme == "https" && n == 443)) {
      port = {};  // browsers leave the default port out of Origin
    } else {
      port = port.substr(port.find_first_not_of('0'));  // no leading zeros
    }
  }
  std::string out = scheme + "://" + std::string(host);
  if (!port.empty()) out += ":" + std::string(port);
  return out;
}

bool origin_matches(std::string_view pattern, std::string_view origin) {
  const auto sep = pattern.find("://*.");
  if (sep == std::string_view::npos) return pattern == origin;
  // scheme://*.domain[:port] against scheme://one.or.more.labels.domain[:port]
  const std::string_view prefix = pattern.substr(0, sep + 3);  // "https://"
  const std::string_view suffix = pattern.substr(sep + 4);     // ".example.com[:port]"
  if (origin.size() <= prefix.size() + suffix.size()) return false;
  if (origin.substr(0, prefix.size()) != prefix) return false;
  if (origin.substr(origin.size() - suffix.size()) != suffix) return false;
  const std::string_view sub =
      origin.substr(prefix.size(), origin.size() - prefix.size() - suffix.size());
  // The part the '*' stands for: host labels only (no port, no path smuggled in).
  for (char c : sub) {
    if (!host_char(c)) return false;
  }
  return sub.front() != '.' && sub.back() != '.';
}

}  // namespace ichido::core
