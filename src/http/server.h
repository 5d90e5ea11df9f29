// HttpServer: the socket side of the API. A listener accepts connections; each connection is a
// coroutine on its own strand that reads a request (with limits and timeouts), asks Api for the
// response and writes it, with keep-alive.
//
// Limits, all explicit: body size (413 before the body is read when Content-Length exceeds it),
// header size (431), idle keep-alive timeout, whole-request read timeout (a slow sender is cut
// off), connection count (connections beyond it are closed at once).
//
// Lifecycle: listen() → start() → ... → begin_drain(): stop accepting, close idle connections,
// let busy ones finish their request and close after the response. active() reaches 0.
// Thread-safety: begin_drain() and active() may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "http/api.h"
#include "http/metrics.h"

namespace ichido::http {

struct Limits {
  std::size_t max_body_bytes = 64 * 1024;
  std::size_t max_header_bytes = 16 * 1024;
  std::uint32_t read_timeout_ms = 30000;
  std::uint32_t idle_timeout_ms = 60000;
  std::size_t max_connections = 10000;
};

class HttpServer {
 public:
  HttpServer(boost::asio::io_context& ioc, Api& api, Metrics& metrics, Limits limits);
  ~HttpServer();

  // Binds and listens. Port 0 picks a free port; the bound endpoint is returned.
  Result<boost::asio::ip::tcp::endpoint> listen(const std::string& host, std::uint16_t port);
  void start();
  void begin_drain();
  std::size_t active() const;

  struct Conn;

 private:
  boost::asio::awaitable<void> accept_loop();
  boost::asio::awaitable<void> session(std::shared_ptr<Conn> conn);

  boost::asio::io_context& ioc_;
  Api& api_;
  Metrics& metrics_;
  const Limits limits_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::atomic<bool> draining_{false};

  mutable std::mutex mu_;
  std::unordered_map<std::uint64_t, std::weak_ptr<Conn>> conns_;  // guarded by mu_
  std::uint64_t next_id_ = 0;                                     // guarded by mu_
};

}  // namespace ichido::http
