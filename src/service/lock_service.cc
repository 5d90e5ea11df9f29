#include "service/lock_service.h"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/cancellation_state.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "base/secret.h"
#include "core/names.h"
#include "service/call_store.h"

namespace ichido::service {

namespace asio = boost::asio;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace {

Result<void> validate_lock_ref(const LockRef& ref) {
  ICHIDO_TRY(core::validate_name(ref.ns, "ns"));
  return core::validate_name(ref.name, "name");
}

Error cancelled_error() {
  return Error(errc::internal, "The request was cancelled because its client went away.");
}

Error too_many_waiters(std::size_t per_lock) {
  return Error(errc::too_many_waiters,
               "Too many requests are already waiting for this lock (at most " +
                   std::to_string(per_lock) + "); retry later with backoff.");
}

bool cancelled(const asio::cancellation_state& cs) {
  return cs.cancelled() != asio::cancellation_type::none;
}

void wake(const std::shared_ptr<LockService::Waiter>& w) {
  asio::post(w->timer.get_executor(), [w] { w->timer.cancel(); });
}

}  // namespace

std::string LockService::key_of(const LockRef& ref) { return ref.ns + '/' + ref.name; }

void LockService::give_turn_locked(Line& line) {
  if (line.turn_out || line.queue.empty()) return;
  auto w = line.queue.front();
  line.queue.pop_front();
  --total_;
  w->has_turn = true;
  line.turn_out = true;
  wake(w);
}

void LockService::wake_front_locked(Line& line) {
  if (line.queue.empty()) return;
  auto& w = line.queue.front();
  w->has_turn = true;  // D2: "ask the store again"
  wake(w);
}

void LockService::notify_locked(const std::string& key) {
  auto it = lines_.find(key);
  if (it == lines_.end()) return;
  if (queued_) {
    wake_front_locked(it->second);
    return;
  }
  ++it->second.gen;
  give_turn_locked(it->second);
}

void LockService::poke_front_locked(Line& line, TimePoint lease_end) {
  if (line.queue.empty()) return;
  auto& w = line.queue.front();
  if (lease_end >= w->lease_end) return;  // a later end is found when the earlier one fires
  w->lease_end = lease_end;
  w->poked = true;
  wake(w);
}

void LockService::return_turn_locked(const std::string& key, Line& line,
                                     std::optional<TimePoint> holder_lease_end) {
  line.turn_out = false;
  if (holder_lease_end) {
    poke_front_locked(line, *holder_lease_end);  // W4: the front learns when to retry
  } else {
    give_turn_locked(line);  // the lock's state is unknown: let the front find out
  }
  erase_if_idle_locked(key);
}

void LockService::leave_locked(const std::string& key, Line& line,
                               const std::shared_ptr<Waiter>& w) {
  auto it = std::find(line.queue.begin(), line.queue.end(), w);
  if (it != line.queue.end()) {
    const bool was_front = it == line.queue.begin();
    line.queue.erase(it);
    --total_;
    if (was_front && w->lease_end != TimePoint::max()) poke_front_locked(line, w->lease_end);
  }
  erase_if_idle_locked(key);
}

void LockService::erase_if_idle_locked(const std::string& key) {
  auto it = lines_.find(key);
  if (it != lines_.end() && it->second.queue.empty() && !it->second.turn_out) lines_.erase(it);
}

asio::awaitable<Result<AcquireLockOutcome>> LockService::not_acquired(LockRef ref) {
  auto s = co_await call_store<LockState>(
      [&](auto cb) { store_.get_lock(std::move(ref), std::move(cb)); });
  if (!s.ok()) co_return std::move(s).error();
  co_return AcquireLockOutcome{false, false, std::move(s->holder)};
}

asio::awaitable<void> LockService::release_for_gone_client(LockRef ref, std::int64_t token) {
  const std::string key = key_of(ref);
  // L9: kept (nothing changes) when the client's retry was answered this grant meanwhile.
  ReleaseLockCmd cmd{std::move(ref), token, /*for_gone_client=*/true};
  auto r = co_await call_store<Unit>(
      [&](auto cb) { store_.release_lock(std::move(cmd), std::move(cb)); });
  if (r.ok()) {
    MutexLock lk(mu_);
    notify_locked(key);
  }
}

asio::awaitable<Result<std::optional<AcquireLockOutcome>>> LockService::replay(
    const AcquireLockRequest& req) {
  AcquireLockCmd cmd{req.ref, req.owner, req.lease_ms, req.request_id, /*replay_only=*/true};
  auto r = co_await call_store<AcquireLockReply>(
      [&](auto cb) { store_.acquire_lock(std::move(cmd), std::move(cb)); });
  if (!r.ok()) co_return std::move(r).error();
  if (!r->replayed) co_return std::optional<AcquireLockOutcome>();
  co_return std::optional<AcquireLockOutcome>(AcquireLockOutcome{true, true, std::move(r->record)});
}

// W1–W5 with the turn: asks the store once. A coroutine of its own, so that what it needs (the
// command, the store's reply, the answers it may build: ≈ 3 KiB of frame with g++ 12) is freed
// before the request parks again — a parked request keeps only acquire()'s small frame.
// Sets `answered` and returns the answer; or, without an answer, leaves `turn` true (ask again:
// W3) or sets it false (`me`, made when null, is parked at the front of the line: W2).
asio::awaitable<Result<AcquireLockOutcome>> LockService::take_turn(
    const AcquireLockRequest& req, const std::string& key, TimePoint deadline, std::uint64_t& gen,
    std::shared_ptr<Waiter>& me, const asio::any_io_executor& ex, asio::cancellation_state cs,
    bool& turn, bool& answered) {
  answered = true;
  AcquireLockCmd cmd{req.ref, req.owner, req.lease_ms, req.request_id};
  auto r = co_await call_store<AcquireLockReply>(
      [&](auto cb) { store_.acquire_lock(std::move(cmd), std::move(cb)); });
  const TimePoint now = Clock::now();
  MutexLock lk(mu_);
  Line& line = lines_[key];  // present: a line with its turn out is never erased
  if (!r.ok()) {
    return_turn_locked(key, line, std::nullopt);
    co_return std::move(r).error();
  }
  const TimePoint lease_end =
      now + milliseconds(std::max<TimeMs>(0, r->record.lease_expires_at - r->now));
  if (r->acquired) {
    if (!r->replayed && client_gone(cs, req.client)) {
      // W5: granted to a client that is gone. Released (unless the client's retry was answered
      // this grant meanwhile: L9) with the turn kept, so the line does not ask the store about a
      // grant on its way out; then the front finds out (turn returned).
      lk.unlock();
      co_await release_for_gone_client(req.ref, r->record.token);
      MutexLock after(mu_);
      Line& same = lines_[key];  // present: its turn is out
      return_turn_locked(key, same, std::nullopt);
      co_return cancelled_error();
    }
    return_turn_locked(key, line, lease_end);
    lk.unlock();
    co_return AcquireLockOutcome{true, r->replayed, std::move(r->record)};
  }
  if (line.gen != gen && !cancelled(cs)) {  // W3: it may have been freed meanwhile
    gen = line.gen;
    answered = false;
    co_return AcquireLockOutcome{};
  }
  if (cancelled(cs) || now >= deadline || closing_) {
    return_turn_locked(key, line, lease_end);
    if (cancelled(cs)) co_return cancelled_error();
    co_return AcquireLockOutcome{false, false, std::move(r->record)};
  }
  if (line.queue.size() >= limits_.max_waiters_per_lock || total_ >= limits_.max_waiters_total) {
    return_turn_locked(key, line, lease_end);
    co_return too_many_waiters(limits_.max_waiters_per_lock);
  }
  if (!me) me = std::make_shared<Waiter>(ex, deadline);
  me->has_turn = false;
  me->poked = false;
  me->lease_end = lease_end;
  line.queue.push_front(me);  // W2: it was first
  ++total_;
  line.turn_out = false;
  turn = false;
  answered = false;
  co_return AcquireLockOutcome{};
}

asio::awaitable<Result<AcquireLockOutcome>> LockService::acquire(AcquireLockRequest req) {
  if (auto r = validate_lock_ref(req.ref); !r.ok()) co_return std::move(r).error();
  if (auto r = core::validate_lock_owner(req.owner); !r.ok()) co_return std::move(r).error();
  if (auto r = core::validate_wait_ms(req.wait_ms); !r.ok()) co_return std::move(r).error();
  if (auto r = core::validate_lease_ms(req.lease_ms); !r.ok()) co_return std::move(r).error();
  if (req.request_id) {
    if (auto r = core::validate_request_id(*req.request_id); !r.ok()) {
      co_return std::move(r).error();
    }
  }

  // Cancellation (the client went away) is checked at the points below, never thrown: a throw
  // in the middle could strand the turn and stall the whole line.
  co_await asio::this_coro::throw_if_cancelled(false);
  if (queued_) co_return co_await acquire_queued(std::move(req));
  asio::cancellation_state cs = co_await asio::this_coro::cancellation_state;
  auto ex = co_await asio::this_coro::executor;
  const std::string key = key_of(req.ref);
  const TimePoint deadline = Clock::now() + milliseconds(req.wait_ms);

  if (req.request_id) {
    bool line_busy = false;
    {
      MutexLock lk(mu_);
      auto it = lines_.find(key);
      line_busy = it != lines_.end() && (!it->second.queue.empty() || it->second.turn_out);
    }
    if (line_busy) {  // W6: a replay must not wait in line behind others (or for itself)
      auto again = co_await replay(req);
      if (!again.ok()) co_return std::move(again).error();
      if (*again) co_return std::move(**again);
    }
  }

  std::shared_ptr<Waiter> me;
  bool turn = false;
  std::uint64_t gen = 0;
  {
    MutexLock lk(mu_);
    Line& line = lines_[key];
    if (line.queue.empty() && !line.turn_out) {  // W1
      line.turn_out = true;
      turn = true;
      gen = line.gen;
    } else if (req.wait_ms > 0 && !closing_) {
      if (line.queue.size() >= limits_.max_waiters_per_lock ||
          total_ >= limits_.max_waiters_total) {
        co_return too_many_waiters(limits_.max_waiters_per_lock);
      }
      me = std::make_shared<Waiter>(ex, deadline);
      line.queue.push_back(me);
      ++total_;
    }
  }
  if (!turn && !me) co_return co_await not_acquired(req.ref);  // wait_ms 0 behind a line

  for (;;) {
    if (turn) {
      bool answered = false;
      auto step = co_await take_turn(req, key, deadline, gen, me, ex, cs, turn, answered);
      if (answered) co_return step;
      if (turn) continue;  // W3: it may have been freed meanwhile; ask again
    }

    TimePoint expiry;
    {
      MutexLock lk(mu_);
      expiry = std::min(me->deadline, me->lease_end);
    }
    me->timer.expires_at(expiry);
    auto [ec] = co_await me->timer.async_wait(asio::as_tuple(asio::use_awaitable));
    (void)ec;  // the reason is read from the flags below, under the mutex
    MutexLock lk(mu_);
    Line& line = lines_[key];  // present: `me` is in it or holds its turn
    if (me->has_turn) {
      me->has_turn = false;
      turn = true;
      gen = line.gen;
      continue;
    }
    if (cancelled(cs)) {
      leave_locked(key, line, me);
      co_return cancelled_error();
    }
    if (me->stop) {
      leave_locked(key, line, me);
      lk.unlock();
      co_return co_await not_acquired(req.ref);
    }
    if (me->poked) {
      me->poked = false;
      continue;
    }
    const TimePoint now = Clock::now();
    if (now >= me->deadline) {
      leave_locked(key, line, me);
      lk.unlock();
      co_return co_await not_acquired(req.ref);
    }
    if (now >= me->lease_end) {  // W4: the holder's lease ended; retry if nobody else is
      me->lease_end = TimePoint::max();
      if (!line.turn_out && !line.queue.empty() && line.queue.front() == me) {
        line.queue.pop_front();
        --total_;
        line.turn_out = true;
        turn = true;
        gen = line.gen;
      }
    }
  }
}

namespace {

// A not-acquired answer's holder: absent while the lock passes to a queued waiter (decision 021).
std::optional<core::LockRecord> holder_or_none(core::LockRecord r) {
  if (r.token == 0) return std::nullopt;
  return r;
}

}  // namespace

asio::awaitable<Result<AcquireLockOutcome>> LockService::leave_queue(const AcquireLockRequest& req,
                                                                     std::shared_ptr<Waiter> me,
                                                                     bool client_gone) {
  const std::string key = key_of(req.ref);
  {
    MutexLock lk(mu_);
    auto it = lines_.find(key);
    if (it != lines_.end()) {
      auto& q = it->second.queue;
      if (auto w = std::find(q.begin(), q.end(), me); w != q.end()) {
        q.erase(w);
        --total_;
      }
    }
  }
  auto r = co_await call_store<AcquireLockReply>([&](auto cb) {
    store_.leave_lock_queue(LeaveLockQueueCmd{req.ref, me->waiter_id, req.lease_ms}, std::move(cb));
  });
  {
    MutexLock lk(mu_);
    if (auto it = lines_.find(key); it != lines_.end()) {
      if (!r.ok() || !r->acquired) wake_front_locked(it->second);  // it may be the head now
      erase_if_idle_locked(key);
    }
  }
  if (!r.ok()) co_return std::move(r).error();
  if (r->acquired) {
    if (client_gone) {  // D3: granted to a client that is gone
      co_await release_for_gone_client(req.ref, r->record.token);
      co_return cancelled_error();
    }
    co_return AcquireLockOutcome{true, false, std::move(r->record)};
  }
  if (client_gone) co_return cancelled_error();
  co_return AcquireLockOutcome{false, false, holder_or_none(std::move(r->record))};
}

asio::awaitable<Result<AcquireLockOutcome>> LockService::acquire_queued(AcquireLockRequest req) {
  asio::cancellation_state cs = co_await asio::this_coro::cancellation_state;
  auto ex = co_await asio::this_coro::executor;
  const std::string key = key_of(req.ref);
  const TimePoint deadline = Clock::now() + milliseconds(req.wait_ms);

  std::shared_ptr<Waiter> me;
  {
    MutexLock lk(mu_);
    if (req.wait_ms > 0 && !closing_) {
      Line& line = lines_[key];
      if (line.queue.size() >= limits_.max_waiters_per_lock ||
          total_ >= limits_.max_waiters_total) {
        erase_if_idle_locked(key);
        co_return too_many_waiters(limits_.max_waiters_per_lock);
      }
      me = std::make_shared<Waiter>(ex, deadline);
      me->waiter_id = new_token_id();
      line.queue.push_back(me);  // D2: before the store call, so no wake-up is missed
      ++total_;
    }
  }
  AcquireLockCmd cmd{req.ref, req.owner, req.lease_ms, req.request_id};
  if (me) {
    cmd.waiter_id = me->waiter_id;
    cmd.wait_ms = req.wait_ms;
  }
  for (;;) {
    auto r = co_await call_store<AcquireLockReply>(
        [&](auto cb) { store_.acquire_lock(cmd, std::move(cb)); });
    const TimePoint now = Clock::now();
    if (!r.ok()) {
      if (me) {  // D4; a grant made for it meanwhile is its answer (or released if gone)
        auto left = co_await leave_queue(req, me, client_gone(cs, req.client));
        if (left.ok() && left->acquired) co_return left;
      }
      co_return std::move(r).error();
    }
    const TimePoint lease_end =
        now + milliseconds(std::max<TimeMs>(0, r->record.lease_expires_at - r->now));
    if (r->acquired) {
      if (me) {
        MutexLock lk(mu_);
        Line& line = lines_[key];
        const bool was_front = !line.queue.empty() && line.queue.front() == me;
        if (auto w = std::find(line.queue.begin(), line.queue.end(), me); w != line.queue.end()) {
          line.queue.erase(w);
          --total_;
        }
        if (was_front) poke_front_locked(line, lease_end);  // the next one waits for this lease
        erase_if_idle_locked(key);
      }
      if (!r->replayed && client_gone(cs, req.client)) {  // W5: granted to a gone client
        co_await release_for_gone_client(req.ref, r->record.token);
        co_return cancelled_error();
      }
      co_return AcquireLockOutcome{true, r->replayed, std::move(r->record)};
    }
    if (!me) co_return AcquireLockOutcome{false, false, holder_or_none(std::move(r->record))};

    // Queued (D2): park until asked to look again, the lease end (front only) or the deadline.
    {
      MutexLock lk(mu_);
      me->lease_end = r->record.token != 0 ? lease_end : TimePoint::max();
      // D2: the lock was granted to, or is reserved for, another waiter: when it is one of
      // this process's (it arrived here in another order than it was queued), tell it now.
      for (const auto* other : {&r->record.waiter, &r->head_waiter}) {
        if (!*other || **other == me->waiter_id) continue;
        for (auto& w : lines_[key].queue) {
          if (w->waiter_id == **other) {
            w->has_turn = true;
            wake(w);
          }
        }
      }
    }
    for (;;) {
      bool leave = false, poll = false;
      TimePoint expiry;
      {
        MutexLock lk(mu_);
        Line& line = lines_[key];  // present: `me` is in it
        const bool front = !line.queue.empty() && line.queue.front() == me;
        const TimePoint t = Clock::now();
        me->poked = false;
        if (cancelled(cs) || me->stop || t >= me->deadline) {
          leave = true;
        } else if (me->has_turn) {  // asked to look again (also while the store was answering)
          me->has_turn = false;
          poll = true;
        } else if (front && t >= me->lease_end) {
          me->lease_end = TimePoint::max();  // W4: the holder's lease ended
          poll = true;
        }
        expiry = front ? std::min(me->deadline, me->lease_end) : me->deadline;
      }
      if (leave) co_return co_await leave_queue(req, me, client_gone(cs, req.client));  // D3
      if (poll) break;
      me->timer.expires_at(expiry);
      auto [ec] = co_await me->timer.async_wait(asio::as_tuple(asio::use_awaitable));
      (void)ec;  // the reason is read from the flags above, under the mutex
    }
  }
}

asio::awaitable<Result<Unit>> LockService::release(ReleaseLockCmd cmd) {
  if (auto r = validate_lock_ref(cmd.ref); !r.ok()) co_return std::move(r).error();
  const std::string key = key_of(cmd.ref);
  auto r = co_await call_store<Unit>(
      [&](auto cb) { store_.release_lock(std::move(cmd), std::move(cb)); });
  if (r.ok()) {
    MutexLock lk(mu_);
    notify_locked(key);
  }
  co_return r;
}

asio::awaitable<Result<core::LockRecord>> LockService::renew(RenewLockCmd cmd) {
  if (auto r = validate_lock_ref(cmd.ref); !r.ok()) co_return std::move(r).error();
  if (auto r = core::validate_lease_ms(cmd.lease_ms); !r.ok()) co_return std::move(r).error();
  const std::string key = key_of(cmd.ref);
  const std::int64_t lease_ms = cmd.lease_ms;
  auto r = co_await call_store<core::LockRecord>(
      [&](auto cb) { store_.renew_lock(std::move(cmd), std::move(cb)); });
  if (r.ok()) {
    // A renewal may shorten the lease: the front waiter must not sleep past the new end.
    MutexLock lk(mu_);
    if (auto it = lines_.find(key); it != lines_.end()) {
      poke_front_locked(it->second, Clock::now() + milliseconds(lease_ms));
    }
  }
  co_return r;
}

asio::awaitable<Result<ForceReleaseReply>> LockService::force_release(ForceReleaseCmd cmd) {
  if (auto r = validate_lock_ref(cmd.ref); !r.ok()) co_return std::move(r).error();
  const std::string key = key_of(cmd.ref);
  auto r = co_await call_store<ForceReleaseReply>(
      [&](auto cb) { store_.force_release_lock(std::move(cmd), std::move(cb)); });
  if (r.ok()) {
    // Also when nothing was held: an operator's force-release is a cue for the head waiter to
    // look again (harmless when the lock is in fact held: it parks again at the front).
    MutexLock lk(mu_);
    notify_locked(key);
  }
  co_return r;
}

asio::awaitable<Result<LockStatus>> LockService::get(LockRef ref) {
  if (auto r = validate_lock_ref(ref); !r.ok()) co_return std::move(r).error();
  const std::size_t n = waiters(ref);
  auto s = co_await call_store<LockState>(
      [&](auto cb) { store_.get_lock(std::move(ref), std::move(cb)); });
  if (!s.ok()) co_return std::move(s).error();
  // With a store queue, the waiters of every process (D1); else this process's line.
  const std::size_t waiting = s->queued ? static_cast<std::size_t>(*s->queued) : n;
  co_return LockStatus{std::move(s->holder), waiting};
}

asio::awaitable<Result<std::vector<LockStatus>>> LockService::list(std::string ns) {
  if (auto r = core::validate_name(ns, "ns"); !r.ok()) co_return std::move(r).error();
  auto held = co_await call_store<std::vector<LockState>>(
      [&](auto cb) { store_.list_locks(ns, std::move(cb)); });
  if (!held.ok()) co_return std::move(held).error();
  std::vector<LockStatus> out;
  out.reserve(held->size());
  for (auto& s : *held) {
    // With a store queue, the waiters of every process (D1); else this process's line.
    const std::size_t waiting =
        s.queued ? static_cast<std::size_t>(*s.queued) : waiters(LockRef{ns, s.holder->name});
    out.push_back(LockStatus{std::move(s.holder), waiting});
  }
  co_return out;
}

void LockService::notify_external(const LockRef& ref) {
  MutexLock lk(mu_);
  notify_locked(key_of(ref));
}

void LockService::notify_external_all(const std::optional<std::string>& ns) {
  const std::string prefix = ns ? *ns + '/' : std::string();
  MutexLock lk(mu_);
  for (auto& [key, line] : lines_) {
    if (!key.starts_with(prefix)) continue;
    if (queued_) {
      wake_front_locked(line);
      continue;
    }
    ++line.gen;
    give_turn_locked(line);
  }
}

std::size_t LockService::waiters(const LockRef& ref) const {
  MutexLock lk(mu_);
  auto it = lines_.find(key_of(ref));
  if (it == lines_.end()) return 0;
  return it->second.queue.size() + (it->second.turn_out ? 1 : 0);
}

void LockService::shutdown() {
  MutexLock lk(mu_);
  closing_ = true;
  for (auto& [key, line] : lines_) {
    for (auto& w : line.queue) {
      w->stop = true;
      wake(w);
    }
  }
}

std::size_t LockService::total_waiters() const {
  MutexLock lk(mu_);
  return total_;
}

}  // namespace ichido::service
