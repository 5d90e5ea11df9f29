// Browser origins for CORS (`serve --cors-origin`): which web pages may call the API with
// `fetch`. Pure functions; see docs/decisions/102-cors.md.
#pragma once

#include <string>
#include <string_view>

#include "ichido/result.h"

namespace ichido::core {

// Parses one --cors-origin value into its canonical form, the way a browser writes the Origin
// header: `scheme://host[:port]` with scheme http or https, the scheme and host lower-cased,
// the scheme's default port (80, 443) dropped, and one trailing '/' tolerated and dropped.
// `https://*.example.com` allows every subdomain of example.com (not example.com itself); `*`
// is only allowed as that first label. Errors: invalid_request saying what is wrong (a lone
// `*`, `null`, a path, a query, user info, another scheme, a bad host or port).
Result<std::string> parse_origin_pattern(std::string_view text);

// True when the Origin header value `origin` (compared byte for byte, as browsers send it
// canonical) is allowed by `pattern`, a result of parse_origin_pattern.
bool origin_matches(std::string_view pattern, std::string_view origin);

}  // namespace ichido::core
