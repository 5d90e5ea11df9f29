// Parsing of --listen values: "HOST:PORT", "[V6]:PORT", "localhost:PORT".
#pragma once

#include <cstdint>
#include <string>

#include "ichido/result.h"

namespace ichido::server {

struct ListenAddress {
  std::string host;  // a numeric address ("localhost" becomes 127.0.0.1)
  std::uint16_t port = 0;
  bool loopback = false;
};

// Errors: invalid_request (field listen).
Result<ListenAddress> parse_listen_address(const std::string& text);

}  // namespace ichido::server
