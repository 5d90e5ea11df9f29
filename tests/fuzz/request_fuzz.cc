// Fuzz target (a): the whole request path, raw bytes to response, on an in-memory store.
// The bytes are parsed as HTTP/1.1 by Beast (with the server's limits); a complete request is
// handed to Api::handle and the coroutine run to completion. Any crash, sanitizer report or
// unanswered request is a bug; every answer must be a valid HTTP response with a JSON body
// (or the metrics text).
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/json/parse.hpp>

#include "http/api.h"
#include "store/memory/memory_store.h"

namespace {

using namespace ichido;

struct World {
  ManualClock clock{1'780'000'000'000};
  store::memory::MemoryStore store{&clock};
  http::Metrics metrics;
  http::Api api{store, metrics};
  boost::asio::io_context ioc;
  int uses = 0;
};

std::unique_ptr<World> world;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // A fresh world now and then keeps the memory store small (it copies its state per write).
  if (!world || ++world->uses > 2000) {
    world = std::make_unique<World>();
    // A counter to hit, so requests get past "not found".
    http::BeastRequest put{http::beast_http::verb::put, "/v1/ns/f/counters/c", 11};
    put.body() = R"({"max":50,"format":"F-{seq:3}-{yyyy}","period":"month","timezone":"Asia/Tokyo"})";
    boost::asio::co_spawn(world->ioc, world->api.handle(put), boost::asio::detached);
    world->ioc.run();
    world->ioc.restart();
  }
  namespace bh = boost::beast::http;
  bh::request_parser<bh::string_body> parser;
  parser.eager(true);
  parser.body_limit(64 * 1024);
  parser.header_limit(16 * 1024);
  boost::system::error_code ec;
  parser.put(boost::asio::buffer(data, size), ec);
  if (!ec && !parser.is_done()) parser.put_eof(ec);
  if (ec || !parser.is_done()) return 0;
  auto req = parser.release();
  std::optional<http::BeastResponse> res;
  boost::asio::co_spawn(
      world->ioc, [&]() -> boost::asio::awaitable<void> { res = co_await world->api.handle(req); },
      boost::asio::detached);
  world->ioc.run();
  world->ioc.restart();
  if (!res) std::abort();  // every parsed request must be answered
  const unsigned status = res->result_int();
  if (status < 200 || status > 599) std::abort();
  if (res->at(bh::field::content_type) == "application/json") {
    boost::system::error_code jec;
    boost::json::parse(res->body(), jec);
    if (jec) std::abort();  // every JSON answer must be JSON
  }
  return 0;
}
