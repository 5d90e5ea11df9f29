// Fuzz target (c): JSON command decoding. The first byte picks a command route (counters,
// tokens, once records, locks); the rest is its JSON body, decoded by the real handlers (Fields,
// config decoding, validation) against an in-memory store. Invariants: no crash, every answer is
// JSON with a status the API documents, and a 4xx never changes the state (the counter, the once
// records and the locks of the namespace).
//
// A body that is a JSON object gets its "wait_ms" forced to 0: the waits run on real timers (up
// to minutes) and would stall the fuzzer without exercising more decoding.
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>

#include "fuzz_world.h"

namespace {

using namespace ichido;
using fuzzing::World;
namespace bh = boost::beast::http;

std::unique_ptr<World> world;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Fresh often: the memory store copies its whole state per write.
  if (!world || ++world->uses > 100) {
    world = std::make_unique<World>();
    world->call(bh::verb::put, "/v1/ns/f/counters/c", R"({"max":1000,"format":"C-{seq}"})");
    // A record in progress (token 1) and a held lock (token 2), for complete/fail/renew/release.
    world->call(bh::verb::post, "/v1/ns/f/once/begin", R"({"key":"k","owner":"o"})");
    world->call(bh::verb::post, "/v1/ns/f/locks/l/acquire", R"({"owner":"o"})");
  }
  if (size == 0) return 0;
  struct Route {
    bh::verb verb;
    const char* target;
  };
  static const Route routes[] = {
      {bh::verb::put, "/v1/ns/f/counters/n"},       {bh::verb::post, "/v1/ns/f/counters/c/next"},
      {bh::verb::post, "/v1/ns/f/counters/c/void"}, {bh::verb::post, "/v1/ns/f/counters/c/set"},
      {bh::verb::post, "/v1/admin/tokens"},         {bh::verb::post, "/v1/ns/f/once/begin"},
      {bh::verb::post, "/v1/ns/f/once/complete"},   {bh::verb::post, "/v1/ns/f/once/fail"},
      {bh::verb::post, "/v1/ns/f/once/renew"},      {bh::verb::post, "/v1/ns/f/once/reset"},
      {bh::verb::post, "/v1/ns/f/locks/l/acquire"}, {bh::verb::post, "/v1/ns/f/locks/l/release"},
      {bh::verb::post, "/v1/ns/f/locks/l/renew"},
  };
  const Route& r = routes[data[0] % (sizeof routes / sizeof routes[0])];
  std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  {
    boost::system::error_code jec;
    auto v = boost::json::parse(body, jec);
    if (!jec && v.is_object() && v.as_object().contains("wait_ms")) {
      v.as_object()["wait_ms"] = 0;
      body = boost::json::serialize(v);
    }
  }
  auto snapshot = [&] {
    return world->call(bh::verb::get, "/v1/ns/f/counters/c", "").body() +
           world->call(bh::verb::get, "/v1/ns/f/once?limit=1000", "").body() +
           world->call(bh::verb::get, "/v1/ns/f/locks", "").body();
  };
  const std::string before = snapshot();
  auto res = world->call(r.verb, r.target, body);
  static const std::set<unsigned> documented = {200, 201, 400, 404, 409, 413, 422, 429};
  if (!documented.count(res.result_int())) std::abort();
  boost::system::error_code ec;
  boost::json::parse(res.body(), ec);
  if (ec) std::abort();
  if (res.result_int() >= 400 && snapshot() != before) {
    std::abort();  // a rejected command changed state
  }
  return 0;
}
