// ichido-once-wake: waiter wake-up latency of once records — how long after a holder's
// `complete` is sent does a `begin` parked with wait_ms get its answer?
//
// Each round, on a fresh key: connection A begins (acquired); connection B sends begin with
// wait_ms and blocks; the tool polls GET /metrics until ichido_once_waiters shows B parked (so B
// is really waiting, not racing the complete); then it stamps t0 and sends A's complete. B's
// thread stamps t1 when its answer (which must be `completed` with the result) is parsed.
// Latency = t1 - t0: the commit of the complete (one fsync), the wake-up, B's re-run of begin
// (a write job through group commit) and the HTTP round trips.
//
//   ichido-once-wake --url http://127.0.0.1:7878 [--rounds 300] [--ns bench] [--token T]
// --token: the bearer token of every call (a writer token of --ns; /metrics needs a reader);
// default $ICHIDO_TOKEN when set, else none (a server with --no-auth).
// Prints "once-wake rounds=N p50_ms=… p90_ms=… p99_ms=… max_ms=… errors=E" (and JSON with --json).
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/client.h"

namespace {

namespace json = boost::json;
using Clock = std::chrono::steady_clock;

int usage() {
  std::fprintf(stderr,
               "usage: ichido-once-wake --url URL [--rounds N] [--ns NS] [--token T] [--json]\n");
  return 2;
}

json::value body_of(const ichido::cli::HttpResult& r) {
  if (!r.ok() || r.response->status != 200) return nullptr;
  boost::system::error_code ec;
  json::value v = json::parse(r.response->body, ec);
  return ec ? json::value(nullptr) : v;
}

}  // namespace

int main(int argc, char** argv) {
  std::string url = "http://127.0.0.1:7878", ns = "bench";
  int rounds = 300;
  bool as_json = false;
  std::optional<std::string> token;  // nullopt: $ICHIDO_TOKEN when set
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json") {
      as_json = true;
    } else if (i + 1 < argc && a == "--url") {
      url = argv[++i];
    } else if (i + 1 < argc && a == "--ns") {
      ns = argv[++i];
    } else if (i + 1 < argc && a == "--token") {
      token = argv[++i];
    } else if (i + 1 < argc && a == "--rounds") {
      rounds = std::atoi(argv[++i]);
    } else {
      return usage();
    }
  }
  auto base = ichido::cli::parse_base_url(url);
  if (!base.ok() || rounds < 1) return usage();
  ichido::cli::ClientOptions copt;
  copt.token = token;
  copt.read_timeout = std::chrono::milliseconds(90000);
  ichido::cli::HttpClient holder(*base.url, copt), waiter(*base.url, copt), probe(*base.url, copt);
  const std::string path = "/v1/ns/" + ns + "/once";
  const std::string run =
      std::to_string(::getpid()) + "-" + std::to_string(Clock::now().time_since_epoch().count());
  std::vector<double> lat_ms;
  int errors = 0;
  for (int r = 0; r < rounds; ++r) {
    const std::string key = "wake-" + run + "-" + std::to_string(r);
    auto a = body_of(
        holder.post(path + "/begin", json::serialize(json::object{{"key", key}, {"owner", "A"}})));
    if (!a.is_object() || a.at("outcome") != "acquired") {
      ++errors;
      continue;
    }
    const auto token = a.at("token").to_number<std::int64_t>();
    Clock::time_point t1{};
    json::value answer;
    std::thread w([&] {
      auto res = waiter.post(
          path + "/begin",
          json::serialize(json::object{{"key", key}, {"owner", "B"}, {"wait_ms", 60000}}));
      t1 = Clock::now();
      answer = body_of(res);
    });
    bool parked = false;
    for (int i = 0; i < 20000 && !parked; ++i) {
      auto m = probe.get("/metrics");
      parked = m.ok() && m.response->body.find("\nichido_once_waiters 1\n") != std::string::npos;
      if (!parked) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    const auto t0 = Clock::now();
    auto done =
        holder.post(path + "/complete",
                    json::serialize(json::object{{"key", key}, {"token", token}, {"result", r}}));
    w.join();
    if (!parked || !done.ok() || done.response->status != 200 || !answer.is_object() ||
        answer.at("outcome") != "completed" || answer.at("result") != json::value(r)) {
      ++errors;
      continue;
    }
    lat_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(lat_ms.begin(), lat_ms.end());
  auto q = [&](double p) {
    if (lat_ms.empty()) return 0.0;
    return lat_ms[std::min(lat_ms.size() - 1, static_cast<std::size_t>(p * lat_ms.size()))];
  };
  if (as_json) {
    std::printf(
        "{\"workload\":\"once-wake\",\"rounds\":%zu,\"p50_ms\":%.3f,\"p90_ms\":%.3f,"
        "\"p99_ms\":%.3f,\"max_ms\":%.3f,\"errors\":%d}\n",
        lat_ms.size(), q(0.5), q(0.9), q(0.99), lat_ms.empty() ? 0.0 : lat_ms.back(), errors);
  } else {
    std::printf("once-wake rounds=%zu p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f max_ms=%.3f errors=%d\n",
                lat_ms.size(), q(0.5), q(0.9), q(0.99), lat_ms.empty() ? 0.0 : lat_ms.back(),
                errors);
  }
  return errors == 0 ? 0 : 1;
}
