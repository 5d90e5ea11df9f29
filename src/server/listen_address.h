// Parsing of --listen values: "HOST:PORT", "[V6]:PORT", "localhost:PORT".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ichido/result.h"

namespace ichido::server {

struct ListenAddress {
  // Numeric addresses, one listener each. "localhost" is both loopback addresses, 127.0.0.1
  // then ::1, on one port: a client finds the server whichever of the two its resolver gives
  // first (decision 170).
  std::vector<std::string> hosts;
  std::uint16_t port = 0;
  bool loopback = false;   // every address is a loopback address
  bool localhost = false;  // given as "localhost": ::1 is skipped where IPv6 is unavailable
};

// Errors: invalid_request (field listen).
Result<ListenAddress> parse_listen_address(const std::string& text);

}  // namespace ichido::server
