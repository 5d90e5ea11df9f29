// HttpServer over several io_contexts (decision 139): connections are spread over the ones given
// to serve_connections_on(), in turn, and every request on them is answered there.
#include "http/server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <thread>
#include <vector>

#include "store/memory/memory_store.h"

namespace ichido::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;

TEST(HttpServerThreads, ConnectionsAreSpreadOverTheGivenContextsInTurn) {
  ManualClock clock{1'780'000'000'000};
  store::memory::MemoryStore store{&clock};
  Metrics metrics;
  Api api{store, metrics, ApiOptions{.clock = &clock}};
  asio::io_context listener(1), a(1), b(1);
  HttpServer server(listener, api, metrics, Limits{});
  server.serve_connections_on({&a, &b});
  auto ep = server.listen("127.0.0.1", 0);
  ASSERT_TRUE(ep.ok()) << ep.error().message;
  server.start();
  auto keep_a = asio::make_work_guard(a);
  auto keep_b = asio::make_work_guard(b);
  std::atomic<std::size_t> ran_a{0}, ran_b{0};
  std::vector<std::thread> threads;
  // Stops and joins the server's threads however the test ends (a client call that throws
  // included), so that no joinable thread outlives it.
  auto stop = [&] {
    keep_a.reset();
    keep_b.reset();
    listener.stop();
    a.stop();
    b.stop();
    for (auto& t : threads) t.join();
    threads.clear();
  };
  struct Stopper {
    decltype(stop)& f;
    ~Stopper() { f(); }
  } stopper{stop};
  threads.emplace_back([&] { listener.run(); });
  threads.emplace_back([&] { ran_a = a.run(); });
  threads.emplace_back([&] { ran_b = b.run(); });

  constexpr int kConnections = 4;
  constexpr int kRounds = 3;
  {
    asio::io_context client;
    std::vector<beast::tcp_stream> conns;
    for (int i = 0; i < kConnections; ++i) {
      conns.emplace_back(client);
      conns.back().connect(*ep);
    }
    for (int round = 0; round < kRounds; ++round) {
      for (auto& c : conns) {  // interleaved: each connection keeps its place on its thread
        beast::http::request<beast::http::empty_body> req{beast::http::verb::get, "/healthz", 11};
        req.set(beast::http::field::host, "127.0.0.1");
        beast::http::write(c, req);
        beast::flat_buffer buf;
        beast::http::response<beast::http::string_body> res;
        beast::http::read(c, buf, res);
        EXPECT_EQ(res.result_int(), 200u) << res.body();
      }
    }
  }
  server.begin_drain();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (server.active() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(server.active(), 0u);
  stop();
  // Two connections on each, three requests each: at least one handler per request there.
  EXPECT_GE(ran_a.load(), 2u * kRounds);
  EXPECT_GE(ran_b.load(), 2u * kRounds);
}

}  // namespace
}  // namespace ichido::http
