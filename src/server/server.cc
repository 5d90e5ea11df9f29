// Composition root: wires store, services, HTTP server, signals and drain.
#include <cstdio>
#include <iostream>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "http/api.h"
#include "http/server.h"
#include "server/config.h"
#include "server/listen_address.h"
#include "store/sqlite/sqlite_store.h"

namespace ichido::server {
namespace {

void log(const std::string& msg) {
  std::cerr << format_rfc3339(SystemClock::instance().now_ms()) << " ichido: " << msg << std::endl;
}

}  // namespace

int run_server(const ServeConfig& cfg) {
  auto addr = parse_listen_address(cfg.listen);
  if (!addr.ok()) {
    log(addr.error().message);
    return 2;
  }
  if (!addr->loopback) {
    log("refusing to listen on " + cfg.listen +
        ": authentication is not available yet, so ichido only listens on a loopback address "
        "(127.0.0.1 or ::1).");
    return 2;
  }
  store::sqlite::Options sopt;
  sopt.dir = cfg.data_dir;
  auto store = store::sqlite::SqliteStore::open(sopt);
  if (!store.ok()) {
    log("cannot open the store: " + store.error().message);
    return 1;
  }
  log("store opened at " + (*store)->db_path());

  const int threads = cfg.threads > 0 ? cfg.threads
                                      : std::max(1u, std::thread::hardware_concurrency());
  boost::asio::io_context ioc(threads);
  http::Metrics metrics;
  http::ApiOptions api_options;
  api_options.locks.max_waiters_per_lock = cfg.max_waiters_per_lock;
  api_options.locks.max_waiters_total = cfg.max_waiters;
  http::Api api(**store, metrics, api_options);
  http::Limits limits;
  limits.max_body_bytes = cfg.max_body_bytes;
  limits.max_header_bytes = cfg.max_header_bytes;
  limits.read_timeout_ms = cfg.read_timeout_ms;
  limits.idle_timeout_ms = cfg.idle_timeout_ms;
  limits.max_connections = cfg.max_connections;
  http::HttpServer server(ioc, api, metrics, limits);
  auto ep = server.listen(addr->host, addr->port);
  if (!ep.ok()) {
    log(ep.error().message);
    (*store)->close();
    return 1;
  }
  server.start();

  // SIGTERM/SIGINT: stop accepting, let in-flight requests finish (up to drain_timeout_ms),
  // then stop the I/O threads; the store is closed after them. A second signal stops at once.
  boost::asio::signal_set signals(ioc, SIGINT, SIGTERM);
  boost::asio::steady_timer drain_timer(ioc);
  const auto drain_deadline_ms = cfg.drain_timeout_ms;
  std::function<void(int)> on_signal;
  std::function<void()> watch;
  auto deadline = std::chrono::steady_clock::time_point::max();
  watch = [&] {
    if (server.active() == 0 || std::chrono::steady_clock::now() >= deadline) {
      ioc.stop();
      return;
    }
    drain_timer.expires_after(std::chrono::milliseconds(20));
    drain_timer.async_wait([&](boost::system::error_code) { watch(); });
  };
  on_signal = [&](int sig) {
    if (deadline != std::chrono::steady_clock::time_point::max()) {
      log("second signal: stopping now");
      ioc.stop();
      return;
    }
    log(std::string("received ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") +
        ": draining connections");
    deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(drain_deadline_ms);
    server.begin_drain();
    watch();
    signals.async_wait([&](boost::system::error_code ec, int s) {
      if (!ec) on_signal(s);
    });
  };
  signals.async_wait([&](boost::system::error_code ec, int s) {
    if (!ec) on_signal(s);
  });

  std::string shown = ep->address().is_v6() ? "[" + ep->address().to_string() + "]"
                                            : ep->address().to_string();
  std::printf("ichido listening on %s:%u\n", shown.c_str(), static_cast<unsigned>(ep->port()));
  std::fflush(stdout);
  log("listening on " + shown + ":" + std::to_string(ep->port()) + " with " +
      std::to_string(threads) + " I/O threads (no authentication: loopback only)");

  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back([&] { ioc.run(); });
  ioc.run();
  for (auto& t : pool) t.join();

  (*store)->close();
  log("stopped cleanly");
  return 0;
}

}  // namespace ichido::server
