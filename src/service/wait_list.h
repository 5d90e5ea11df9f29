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
// Lost wake-ups: a caller typically runs a command, sees "busy", then parks. A notification that
// lands between the command's answer and the parking would find nobody to wake. To close that
// gap, read generation(key) before the command and pass it to wait(): when a notification on the
// key came in between, wait() answers `notified` at once instead of parking. Generations are
// striped (keys may share a counter), which can only cause a spurious, harmless retry.
//
// Limits: at most max_per_key waiters on one key and max_total overall; beyond them wait()
// answers too_many_waiters at once.
// Shutdown: shutdown() wakes every waiter with `shutdown`, and every later wait() answers
// `shutdown` at once without parking, so a stopping server answers its waiters instead of
// cutting them off.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <array>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/mutex.h"
#include "ichido/result.h"

namespace ichido::service {

enum class WakeReason { notified, timed_out, cancelled, shutdown };

class WaitList {
 public:
  WaitList(std::size_t max_per_key, std::size_t max_total)
      : max_per_key_(max_per_key), max_total_(max_total) {}

  // Parks the calling coroutine until notified, until `deadline`, or until the coroutine's
  // cancellation slot fires — or answers `notified` at once, without parking, when
  // generation(key) is no longer `seen_generation` (a notification came after the caller read
  // it). Errors: too_many_waiters (then nothing was parked).
  // `front`: park as the oldest waiter of the key — for a waiter that was woken, found nothing
  // for it and waits again, so that a wake-up it could not use does not cost it its place.
  boost::asio::awaitable<Result<WakeReason>> wait(const std::string& key,
                                                  std::chrono::steady_clock::time_point deadline,
                                                  std::uint64_t seen_generation,
                                                  bool front = false);
  // Counts notify_one/notify_all calls on `key` (striped); read it before the command that may
  // make you wait.
  std::uint64_t generation(const std::string& key) const;

  // Wakes the oldest waiter of `key`; returns whether there was one.
  bool notify_one(const std::string& key);
  // Wakes every waiter of `key`; returns how many.
  std::size_t notify_all(const std::string& key);
  // Wakes the oldest waiter of every key that starts with `prefix` ("" = every key) and counts
  // a notification on every key (all generations move); returns how many were woken. For
  // changes whose exact key is unknown (another node's, decision 075).
  std::size_t notify_front_of_each(std::string_view prefix);
  // Every waiter of `key` parked until later than `deadline` wakes at `deadline` instead (then
  // `timed_out`, as at its own deadline), keeping its place: for when the thing it waits for
  // changes hands and may now lapse sooner (a new holder's shorter lease). Returns how many
  // were moved.
  std::size_t shorten(const std::string& key, std::chrono::steady_clock::time_point deadline);
  // Wakes every waiter with `shutdown`; later waits do not park. Idempotent.
  void shutdown();

  std::size_t waiting(const std::string& key) const;
  std::size_t total() const;

  struct Waiter;

 private:
  void wake(const std::shared_ptr<Waiter>& w) REQUIRES(mu_);
  std::uint64_t& stripe(const std::string& key) const REQUIRES(mu_);

  static constexpr std::size_t kStripes = 1024;

  const std::size_t max_per_key_;
  const std::size_t max_total_;
  mutable Mutex mu_;
  std::unordered_map<std::string, std::deque<std::shared_ptr<Waiter>>> by_key_ GUARDED_BY(mu_);
  std::size_t total_ GUARDED_BY(mu_) = 0;
  bool closing_ GUARDED_BY(mu_) = false;
  mutable std::array<std::uint64_t, kStripes> generations_ GUARDED_BY(mu_){};
};

}  // namespace ichido::service
