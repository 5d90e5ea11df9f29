// The dashboard's static files (web/), embedded into the binary at build time by
// cmake/embed_web.cmake: no file is read from disk when serving them, and the binary is the
// whole deployment. The table is constant and safe to read from any thread.
#pragma once

#include <span>
#include <string_view>

namespace ichido::http {

struct WebAsset {
  std::string_view path;          // "/app.js": where it is served
  std::string_view content_type;  // "text/javascript; charset=utf-8"
  std::string_view etag;          // strong validator, quoted: "\"0123456789abcdef\""
  std::string_view body;
};

// Every embedded file; "/index.html" is also served at "/".
std::span<const WebAsset> web_assets();

}  // namespace ichido::http
