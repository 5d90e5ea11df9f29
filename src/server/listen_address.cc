#include "server/listen_address.h"

#include <boost/asio/ip/address.hpp>

namespace ichido::server {

Result<ListenAddress> parse_listen_address(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return invalid_field("listen", "Invalid --listen '" + text + "': " + why +
                                       " (expected HOST:PORT, e.g. 127.0.0.1:7878).");
  };
  const auto colon = text.rfind(':');
  if (colon == std::string::npos) return bad("no port");
  std::string host = text.substr(0, colon);
  const std::string port = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos) {
    return bad("the port must be a number from 0 to 65535");
  }
  const unsigned long p = std::stoul(port);
  if (p > 65535) return bad("the port must be a number from 0 to 65535");
  const auto port16 = static_cast<std::uint16_t>(p);
  if (host == "localhost") return ListenAddress{{"127.0.0.1", "::1"}, port16, true, true};
  boost::system::error_code ec;
  const auto addr = boost::asio::ip::make_address(host, ec);
  if (ec) return bad("the host must be an IP address or localhost");
  return ListenAddress{{addr.to_string()}, port16, addr.is_loopback(), false};
}

}  // namespace ichido::server
