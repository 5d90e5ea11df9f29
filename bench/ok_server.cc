// ichido-ok-server: an HTTP/1.1 server that answers 200 {} to every request.
//
// Purpose: the loopback HTTP ceiling. It is the idiomatic Boost.Beast coroutine server (the shape
// of ichido's http/ layer: tcp_stream with timeouts, request_parser with a body limit, keep-alive)
// with no routing, JSON or store behind it, so `ichido-loadgen` against it shows what the network
// layer and the load generator alone cost on this machine. Like Dragonfly's ok_main.cc.
// Threads as in `ichido serve` (decision 139): one io_context per thread, the listener on the
// first, each accepted connection given to the next thread in turn and served there.
//
// Usage: ichido-ok-server [--listen 127.0.0.1:0] [--threads 1]. Prints
// "ichido-ok-server listening on HOST:PORT" on stdout when ready; SIGINT/SIGTERM stop it.
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "options.h"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

constexpr std::uint64_t kBodyLimit = 64 * 1024;
constexpr auto kIdleTimeout = std::chrono::seconds(30);
constexpr unsigned kMaxThreads = 8;

struct Limits {
  unsigned max_connections = 1024;
  std::atomic<unsigned> open{0};
};

asio::awaitable<void> session(beast::tcp_stream stream, Limits& limits) {
  beast::flat_buffer buffer;
  beast::error_code ec;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(kBodyLimit);
    stream.expires_after(kIdleTimeout);
    co_await http::async_read(stream, buffer, parser,
                              asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;  // closed by the peer, timed out, or malformed: drop the connection
    const auto& req = parser.get();
    http::response<http::string_body> res{http::status::ok, req.version()};
    res.set(http::field::server, "ichido-ok-server");
    res.set(http::field::content_type, "application/json");
    res.keep_alive(req.keep_alive());
    res.body() = "{}";
    res.prepare_payload();
    co_await http::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
    if (ec || !res.keep_alive()) break;
  }
  stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  --limits.open;
}

asio::awaitable<void> listen(tcp::acceptor& acceptor, Limits& limits,
                             const std::vector<asio::io_context*>& contexts) {
  beast::error_code ec;
  std::size_t next = 0;
  for (;;) {
    // Accepted straight onto the next thread's io_context, as http/server.cc does.
    asio::io_context& on = *contexts[next++ % contexts.size()];
    tcp::socket sock =
        co_await acceptor.async_accept(on, asio::redirect_error(asio::use_awaitable, ec));
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) continue;  // e.g. EMFILE: keep serving the connections we have
    if (limits.open.load() >= limits.max_connections) {
      sock.close(ec);
      continue;
    }
    ++limits.open;
    sock.set_option(tcp::no_delay(true), ec);
    asio::co_spawn(on, session(beast::tcp_stream(std::move(sock)), limits), asio::detached);
  }
}

int run(int argc, char** argv) {
  std::string listen_on = "127.0.0.1:0";
  unsigned threads = 1;
  Limits limits;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      std::printf(
          "usage: ichido-ok-server [--listen HOST:PORT] [--threads N] [--max-connections N]\n");
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "ichido-ok-server: bad option %s\n", argv[i]);
      return 2;
    }
    const std::string_view v = argv[++i];
    if (a == "--listen") {
      listen_on = v;
    } else if (a == "--threads") {
      const auto n = ichido::bench::parse_uint(v, 1, kMaxThreads);
      if (!n) return std::fprintf(stderr, "ichido-ok-server: bad --threads\n"), 2;
      threads = static_cast<unsigned>(*n);
    } else if (a == "--max-connections") {
      const auto n = ichido::bench::parse_uint(v, 1, 100000);
      if (!n) return std::fprintf(stderr, "ichido-ok-server: bad --max-connections\n"), 2;
      limits.max_connections = static_cast<unsigned>(*n);
    } else {
      std::fprintf(stderr, "ichido-ok-server: unknown option %s\n", argv[i - 1]);
      return 2;
    }
  }
  const auto colon = listen_on.rfind(':');
  const auto port =
      colon == std::string::npos
          ? std::nullopt
          : ichido::bench::parse_uint(std::string_view(listen_on).substr(colon + 1), 0, 65535);
  if (!port) {
    std::fprintf(stderr, "ichido-ok-server: --listen wants HOST:PORT\n");
    return 2;
  }
  std::string host = listen_on.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);

  asio::io_context ioc(1);
  std::vector<std::unique_ptr<asio::io_context>> more_ioc;  // threads 2..N
  for (unsigned t = 1; t < threads; ++t) more_ioc.push_back(std::make_unique<asio::io_context>(1));
  std::vector<asio::io_context*> contexts{&ioc};
  for (auto& c : more_ioc) contexts.push_back(c.get());
  beast::error_code ec;
  const auto addr = asio::ip::make_address(host, ec);
  if (ec) {
    std::fprintf(stderr, "ichido-ok-server: bad address '%s'\n", host.c_str());
    return 2;
  }
  tcp::acceptor acceptor(ioc);
  const tcp::endpoint ep(addr, static_cast<unsigned short>(*port));
  acceptor.open(ep.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(ep, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    std::fprintf(stderr, "ichido-ok-server: cannot listen on %s: %s\n", listen_on.c_str(),
                 ec.message().c_str());
    return 1;
  }
  const auto bound = acceptor.local_endpoint();
  std::printf("ichido-ok-server listening on %s:%u\n", bound.address().to_string().c_str(),
              static_cast<unsigned>(bound.port()));
  std::fflush(stdout);

  asio::signal_set signals(ioc, SIGINT, SIGTERM);
  signals.async_wait([&](beast::error_code, int) {
    beast::error_code ignored;
    acceptor.close(ignored);
    ioc.stop();  // open sessions are dropped: nothing here needs draining
  });
  asio::co_spawn(ioc, listen(acceptor, limits, contexts), asio::detached);

  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> keep;
  std::vector<std::thread> pool;
  for (auto& c : more_ioc) {
    keep.push_back(asio::make_work_guard(*c));
    pool.emplace_back([c = c.get()] { c->run(); });
  }
  ioc.run();
  keep.clear();
  for (auto& c : more_ioc) c->stop();
  for (auto& th : pool) th.join();
  std::fprintf(stderr, "ichido-ok-server: stopped\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ichido-ok-server: %s\n", e.what());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "ichido-ok-server: unknown failure\n");
    return 1;
  }
}
