// WaitList: requests parked until something changes on a key (a lock released, a once record
// completed), without a thread per waiter.
//
// A waiter is a coroutine suspended on an Asio timer that expires at its deadline; notify_one /
// notify_all wake waiters by cancelling their timers (posted to each waiter's own executor, as
// timers are not thread-safe). Waiters of one key are kept in arrival order, so notify_one
// serves them first come, first served.
//
// Whether a waiter was notified is decided under the mutex, so a notification racing with the
// deadline is never lost: the waiter reports `notified` and its caller retries its command.
// Cancellation (the client went away) wakes the waiter with `cancelled` and removes it.
//
// Limits: at most max_per_key waiters on one key and max_total overall; beyond them wait()
// answers too_many_waiters at once.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <boost/asio/awaitable.hpp>

#include "ichido/result.h"

namespace ichido::service {

enum class WakeReason { notified, timed_out, cancelled };

class WaitList {
 public:
  WaitList(std::size_t max_per_key, std::size_t max_total)
      : max_per_key_(max_per_key), max_total_(max_total) {}

  // Parks the calling coroutine until notified, until `deadline`, or until the coroutine's
  // cancellation slot fires. Errors: too_many_waiters (then nothing was parked).
  boost::asio::awaitable<Result<WakeReason>> wait(const std::string& key,
                                                  std::chrono::steady_clock::time_point deadline);

  // Wakes the oldest waiter of `key`; returns whether there was one.
  bool notify_one(const std::string& key);
  // Wakes every waiter of `key`; returns how many.
  std::size_t notify_all(const std::string& key);

  std::size_t waiting(const std::string& key) const;
  std::size_t total() const;

  struct Waiter;

 private:
  void wake(const std::shared_ptr<Waiter>& w);  // requires mu_ held

  const std::size_t max_per_key_;
  const std::size_t max_total_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::deque<std::shared_ptr<Waiter>>> by_key_;  // guarded by mu_
  std::size_t total_ = 0;                                                        // guarded by mu_
};

}  // namespace ichido::service
