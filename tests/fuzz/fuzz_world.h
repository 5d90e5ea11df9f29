// The world the API fuzz targets run in: the real Api over an in-memory store with a fixed
// clock, and a way to run one request to its answer. An unanswered request aborts (a bug).
#pragma once

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "http/api.h"
#include "store/memory/memory_store.h"

namespace ichido::fuzzing {

struct World {
  ManualClock clock{1'780'000'000'000};
  store::memory::MemoryStore store{&clock};
  http::Metrics metrics;
  http::Api api{store, metrics};
  boost::asio::io_context ioc;
  int uses = 0;  // inputs since this world was made (the targets start afresh now and then)

  http::Answer call(const http::BeastRequest& req) {
    std::optional<http::Answer> res;
    boost::asio::co_spawn(
        ioc, [&]() -> boost::asio::awaitable<void> { res = co_await api.handle(req); },
        boost::asio::detached);
    ioc.run();
    ioc.restart();
    if (!res) std::abort();  // every request must be answered
    return std::move(*res);
  }
  http::Answer call(http::beast_http::verb v, const std::string& target, std::string body) {
    http::BeastRequest req{v, target, 11};
    req.body() = std::move(body);
    return call(req);
  }
};

}  // namespace ichido::fuzzing
