// Test helper: runs an io_context by hand until a named condition holds — the service tests'
// way to wait for an event without sleeping. Fails (false) after `limit` instead of hanging.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>

namespace ichido::service {

inline bool run_until(boost::asio::io_context& ioc, const std::function<bool()>& done,
                      std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    ioc.restart();
    ioc.run_one_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace ichido::service
