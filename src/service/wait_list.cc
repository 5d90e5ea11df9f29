#include "service/wait_list.h"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <functional>

namespace ichido::service {

namespace asio = boost::asio;

struct WaitList::Waiter {
  explicit Waiter(asio::any_io_executor ex) : timer(std::move(ex)) {}
  asio::steady_timer timer;  // touched only on its executor
  bool notified = false;     // guarded by WaitList::mu_
  bool shutdown = false;     // guarded by WaitList::mu_
  // When the wait ends unless woken (guarded by WaitList::mu_): shorten() moves it earlier.
  std::chrono::steady_clock::time_point deadline;
};

void WaitList::wake(const std::shared_ptr<Waiter>& w) {
  w->notified = true;
  asio::post(w->timer.get_executor(), [w] { w->timer.cancel(); });
}

std::uint64_t& WaitList::stripe(const std::string& key) const {
  return generations_[std::hash<std::string>{}(key) % kStripes];
}

std::uint64_t WaitList::generation(const std::string& key) const {
  MutexLock lk(mu_);
  return stripe(key);
}

asio::awaitable<Result<WakeReason>> WaitList::wait(const std::string& key,
                                                   std::chrono::steady_clock::time_point deadline,
                                                   std::uint64_t seen_generation, bool front) {
  auto ex = co_await asio::this_coro::executor;
  const asio::cancellation_state cs = co_await asio::this_coro::cancellation_state;
  auto w = std::make_shared<Waiter>(ex);
  w->deadline = deadline;
  w->timer.expires_at(deadline);
  {
    MutexLock lk(mu_);
    if (closing_) co_return WakeReason::shutdown;
    if (seen_generation != stripe(key)) co_return WakeReason::notified;
    auto& q = by_key_[key];
    if (q.size() >= max_per_key_ || total_ >= max_total_) {
      if (q.empty()) by_key_.erase(key);
      co_return Error(errc::too_many_waiters,
                      "Too many requests are already waiting here; retry later with backoff.");
    }
    if (front) {
      q.push_front(w);
    } else {
      q.push_back(w);
    }
    ++total_;
  }
  bool cancelled = false;
  for (;;) {
    auto [ec] = co_await w->timer.async_wait(asio::as_tuple(asio::use_awaitable));
    MutexLock lk(mu_);
    if (w->shutdown) co_return WakeReason::shutdown;              // shutdown() already removed it
    if (w->notified) co_return WakeReason::notified;              // notify_* already removed it
    cancelled = cs.cancelled() != asio::cancellation_type::none;  // the client went away
    // Otherwise a stopped timer was shorten()'s: wait again, until the (new) deadline.
    if (cancelled || ec != asio::error::operation_aborted ||
        std::chrono::steady_clock::now() >= w->deadline) {
      break;
    }
    w->timer.expires_at(w->deadline);
  }
  MutexLock lk(mu_);
  auto it = by_key_.find(key);
  if (it != by_key_.end()) {
    auto& q = it->second;
    q.erase(std::remove(q.begin(), q.end(), w), q.end());
    if (q.empty()) by_key_.erase(it);
    --total_;
  }
  co_return cancelled ? WakeReason::cancelled : WakeReason::timed_out;
}

std::size_t WaitList::notify_front_of_each(std::string_view prefix) {
  MutexLock lk(mu_);
  for (auto& g : generations_) ++g;
  std::size_t n = 0;
  for (auto it = by_key_.begin(); it != by_key_.end();) {
    if (!std::string_view(it->first).starts_with(prefix)) {
      ++it;
      continue;
    }
    auto w = it->second.front();
    it->second.pop_front();
    --total_;
    wake(w);
    ++n;
    it = it->second.empty() ? by_key_.erase(it) : std::next(it);
  }
  return n;
}

bool WaitList::notify_one(const std::string& key) {
  MutexLock lk(mu_);
  ++stripe(key);
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return false;
  auto w = it->second.front();
  it->second.pop_front();
  if (it->second.empty()) by_key_.erase(it);
  --total_;
  wake(w);
  return true;
}

std::size_t WaitList::notify_all(const std::string& key) {
  MutexLock lk(mu_);
  ++stripe(key);
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return 0;
  const std::size_t n = it->second.size();
  for (auto& w : it->second) wake(w);
  total_ -= n;
  by_key_.erase(it);
  return n;
}

std::size_t WaitList::shorten(const std::string& key,
                              std::chrono::steady_clock::time_point deadline) {
  MutexLock lk(mu_);
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return 0;
  std::size_t n = 0;
  for (auto& w : it->second) {
    if (w->deadline <= deadline) continue;
    w->deadline = deadline;
    asio::post(w->timer.get_executor(), [w] { w->timer.cancel(); });
    ++n;
  }
  return n;
}

void WaitList::shutdown() {
  MutexLock lk(mu_);
  closing_ = true;
  for (auto& [key, q] : by_key_) {
    for (auto& w : q) {
      w->shutdown = true;
      wake(w);
    }
  }
  by_key_.clear();
  total_ = 0;
}

std::size_t WaitList::waiting(const std::string& key) const {
  MutexLock lk(mu_);
  auto it = by_key_.find(key);
  return it == by_key_.end() ? 0 : it->second.size();
}

std::size_t WaitList::total() const {
  MutexLock lk(mu_);
  return total_;
}

}  // namespace ichido::service
