#include "cli/retry.h"

#include <algorithm>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <charconv>
#include <cstdio>
#include <mutex>
#include <ostream>
#include <random>
#include <thread>

namespace ichido::cli {
namespace {

std::mutex g_rng_mu;
std::mt19937_64& rng() {  // guarded by g_rng_mu
  static std::mt19937_64 engine{std::random_device{}()};
  return engine;
}

// The delay the server asked for in a Retry-After header (seconds), or zero.
std::chrono::milliseconds retry_after(const HttpResult& r) {
  if (!r.ok()) return std::chrono::milliseconds(0);
  auto it = r.response->headers.find("retry-after");
  if (it == r.response->headers.end()) return std::chrono::milliseconds(0);
  unsigned seconds = 0;
  const std::string& v = it->second;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), seconds);
  if (ec != std::errc() || end != v.data() + v.size()) return std::chrono::milliseconds(0);
  return std::chrono::seconds(std::min(seconds, 60u));
}

std::string why(const HttpResult& r) {
  if (!r.ok()) return r.error;
  return "the server answered HTTP " + std::to_string(r.response->status);
}

}  // namespace

std::chrono::milliseconds backoff_base(int retry) {
  const std::int64_t n = std::clamp(retry, 0, 100);
  return std::chrono::milliseconds(std::min<std::int64_t>(5000, 500 * (1 + n * n)));
}

std::chrono::milliseconds backoff_with_jitter(int retry) {
  const auto base = backoff_base(retry).count();
  std::uniform_int_distribution<std::int64_t> half(base / 2, base);
  std::lock_guard lk(g_rng_mu);
  return std::chrono::milliseconds(half(rng()));
}

std::string new_request_id() {
  std::random_device dev;  // /dev/urandom on Linux
  std::string out;
  out.reserve(32);
  for (int i = 0; i < 4; ++i) {
    char buf[9];
    std::snprintf(buf, sizeof buf, "%08x", static_cast<unsigned>(dev()));
    out += buf;
  }
  return out;
}

bool is_retryable(const HttpResult& r) {
  if (!r.ok()) return !r.definitive;
  const int s = r.response->status;
  return s == 429 || s == 502 || s == 503 || s == 504;
}

void real_sleep(std::chrono::milliseconds d) { std::this_thread::sleep_for(d); }

Adjust shrink_wait(std::int64_t wait_ms) {
  return [wait_ms](Request& request, std::chrono::milliseconds elapsed) {
    boost::system::error_code ec;
    boost::json::value body = boost::json::parse(request.body, ec);
    if (ec || !body.is_object()) return;
    const std::int64_t left = std::max<std::int64_t>(0, wait_ms - elapsed.count());
    body.as_object()["wait_ms"] = left;
    request.body = boost::json::serialize(body);
    request.read_timeout = std::chrono::milliseconds(left + 30000);
  };
}

HttpResult send_with_retry(const Transport& transport, Request request, const RetryPolicy& policy,
                           std::ostream& err, const Sleeper& sleep, const Adjust& adjust) {
  const auto start = std::chrono::steady_clock::now();
  for (int attempt = 1;; ++attempt) {
    if (attempt > 1 && adjust) {
      adjust(request, std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - start));
    }
    HttpResult r = transport(request);
    if (!is_retryable(r) || (policy.attempts > 0 && attempt >= policy.attempts)) return r;
    auto delay = std::max(backoff_with_jitter(attempt - 1), retry_after(r));
    if (policy.give_up_after.count() > 0) {
      // Until a deadline: the last try goes just before it.
      const auto left =
          policy.give_up_after - std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::steady_clock::now() - start);
      if (left <= std::chrono::milliseconds(100)) return r;
      delay = std::min(delay, left - std::chrono::milliseconds(100));
    }
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.1f", static_cast<double>(delay.count()) / 1000.0);
    err << "ichido: " << why(r) << "; retrying in " << secs << " s (attempt " << attempt + 1;
    if (policy.attempts > 0) err << " of " << policy.attempts;
    err << ")\n";
    err.flush();
    sleep(delay);
  }
}

}  // namespace ichido::cli
