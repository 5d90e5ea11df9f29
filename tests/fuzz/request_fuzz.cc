// Fuzz target (a): the whole request path, raw bytes to response, on an in-memory store.
// The bytes are parsed as HTTP/1.1 by the server's parser (http::RequestParser: Beast's, keeping
// the header fields the API reads; with the server's limits); a complete request is
// handed to Api::handle and the coroutine run to completion. Any crash, sanitizer report or
// unanswered request is a bug; every answer must be a valid HTTP response with a JSON body
// (or the metrics text).
#include <boost/json/parse.hpp>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "fuzz_world.h"
#include "http/request_parser.h"

namespace {

using namespace ichido;
using fuzzing::World;

std::unique_ptr<World> world;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // A fresh world now and then keeps the memory store small (it copies its state per write).
  if (!world || ++world->uses > 2000) {
    world = std::make_unique<World>();
    // A counter to hit, so requests get past "not found".
    world->call(
        http::beast_http::verb::put, "/v1/ns/f/counters/c",
        R"({"max":50,"format":"F-{seq:3}-{yyyy}","period":"month","timezone":"Asia/Tokyo"})");
  }
  http::RequestParser parser;
  parser.eager(true);
  parser.body_limit(64 * 1024);
  parser.header_limit(16 * 1024);
  boost::system::error_code ec;
  parser.put(boost::asio::buffer(data, size), ec);
  if (!ec && !parser.is_done()) parser.put_eof(ec);
  if (ec || !parser.is_done()) return 0;
  const auto res = world->call(parser.release());  // aborts when a request goes unanswered
  const unsigned status = res.result_int();
  if (status < 200 || status > 599) std::abort();
  if (res.find("Content-Type") == "application/json") {
    boost::system::error_code jec;
    boost::json::parse(res.body(), jec);
    if (jec) std::abort();  // every JSON answer must be JSON
  }
  return 0;
}
