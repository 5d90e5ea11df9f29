// Retrying a call whose answer did not come, the same way in the CLI and in every client library
// (docs/decisions/081-client-retry-rules.md):
//
//   - retried: no answer at all (could not connect, timed out, connection lost), 503 (the store
//     is down or full: nothing changed), 429 (too many waiters), and 502/504 (a reverse proxy in
//     front of ichido could not reach it);
//   - never retried: every other answer, 4xx included: they are definitive;
//   - only calls that are safe to send twice are retried: GETs and PUTs, a counter `next` with a
//     key, `complete`/`renew` with a token, and `acquire`/`begin` carrying a `request_id` that
//     is the same on every retry of one invocation (docs/API.md, "Retrying a claim whose answer was
//     lost");
//   - the n-th retry (n = 0, 1, 2, ...) waits min(5 s, 0.5 s x (1 + n^2)) scaled by a random
//     factor in [0.5, 1] (jitter: many scripts failing together do not come back together), or
//     longer when the server asked for it (Retry-After).
//
// Thread-safety: the free functions are thread-safe; a RetryPolicy is a value.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "cli/client.h"
#include "cli/command.h"

namespace ichido::cli {

// How long to wait before the `retry`-th retry (0-based), before jitter: 500, 1000, 2500, 5000,
// 5000, ... ms.
std::chrono::milliseconds backoff_base(int retry);

// backoff_base(retry) scaled by a random factor in [0.5, 1].
std::chrono::milliseconds backoff_with_jitter(int retry);

// A fresh random request_id: 32 lowercase hex digits (128 bits from the OS's random source).
std::string new_request_id();

// True when `result` is worth another try of a call that is safe to repeat: no answer (unless the
// client knows a retry fails the same way: a refused certificate), or HTTP 429, 502, 503 or 504.
bool is_retryable(const HttpResult& result);

// Sleeps for the given time; tests pass one that records the delays instead.
using Sleeper = std::function<void(std::chrono::milliseconds)>;
void real_sleep(std::chrono::milliseconds d);

struct RetryPolicy {
  // In total, the first one included (retries wait ~0.5 s, 1 s, 2.5 s); 0: no bound but time.
  int attempts = 4;
  // Retry until this long after the first attempt began, the last try about 100 ms before that
  // (zero: no time bound, only `attempts`).
  std::chrono::milliseconds give_up_after{0};
};

// Changes a request before it is sent again, given the time since the first attempt began (e.g.
// to shorten a server-side wait by what has already been waited).
using Adjust = std::function<void(Request& request, std::chrono::milliseconds elapsed)>;

// For an acquire/begin body with "wait_ms": W: a retry waits only what is left of W, and its read
// timeout shrinks with it.
Adjust shrink_wait(std::int64_t wait_ms);

// Sends `request` through `transport` and retries it by the rules above while `policy` allows.
// Each retry is announced on `err` ("ichido: <why>; retrying in 1.2 s (attempt 2 of 4)").
// Returns the last result.
HttpResult send_with_retry(const Transport& transport, Request request, const RetryPolicy& policy,
                           std::ostream& err, const Sleeper& sleep = real_sleep,
                           const Adjust& adjust = nullptr);

}  // namespace ichido::cli
