#include "service/once_service.h"

#include <algorithm>
#include <boost/asio/cancellation_state.hpp>
#include <boost/asio/this_coro.hpp>
#include <chrono>

#include "core/fields.h"
#include "core/names.h"
#include "service/call_store.h"

namespace ichido::service {
namespace {

Result<void> validate_token(std::int64_t token) {
  return core::check(core::field::kOnceToken, token);
}

}  // namespace

Result<void> validate_once_ref(const OnceRef& ref) {
  ICHIDO_TRY(core::validate_name(ref.ns, "ns"));
  return core::validate_key(ref.key, "key");
}

std::string OnceService::wait_key(const OnceRef& ref) {
  std::string k = ref.ns;
  k.push_back('\0');  // never part of a namespace name
  k += ref.key;
  return k;
}

boost::asio::awaitable<Result<BeginOnceReply>> OnceService::begin(BeginOnceCmd cmd,
                                                                  std::int64_t wait_ms,
                                                                  Client* client) {
  using steady = std::chrono::steady_clock;
  if (auto r = validate_once_ref(cmd.ref); !r.ok()) co_return std::move(r).error();
  if (auto r = core::validate_owner(cmd.begin.owner); !r.ok()) co_return std::move(r).error();
  if (auto r = core::validate_lease_ms(cmd.begin.lease_ms); !r.ok()) co_return std::move(r).error();
  if (auto r = core::validate_max_attempts(cmd.begin.max_attempts); !r.ok()) {
    co_return std::move(r).error();
  }
  if (cmd.begin.fingerprint) {
    if (auto r = core::validate_fingerprint(*cmd.begin.fingerprint); !r.ok()) {
      co_return std::move(r).error();
    }
  }
  if (auto r = core::validate_wait_ms(wait_ms); !r.ok()) co_return std::move(r).error();
  if (cmd.begin.request_id) {
    if (auto r = core::validate_request_id(*cmd.begin.request_id); !r.ok()) {
      co_return std::move(r).error();
    }
  }

  // Cancellation (the client went away) is checked, never thrown: a throw between a wake-up and
  // its hand-over would strand the other waiters.
  co_await boost::asio::this_coro::throw_if_cancelled(false);
  boost::asio::cancellation_state cs = co_await boost::asio::this_coro::cancellation_state;
  auto gone = [&] { return client_gone(cs, client); };

  const std::string key = wait_key(cmd.ref);
  const auto deadline = steady::now() + std::chrono::milliseconds(wait_ms);
  bool woken = false;  // this round follows a notification addressed to us (H1)
  for (;;) {
    const std::uint64_t seen = waits_.generation(key);
    BeginOnceCmd attempt = cmd;
    auto r = co_await call_store<BeginOnceReply>(
        [&](auto cb) { store_.begin_once(std::move(attempt), std::move(cb)); });
    if (!r.ok()) {
      if (woken) waits_.notify_one(key);  // H1: pass the wake-up on
      co_return r;
    }
    if (r->outcome == core::BeginOutcome::dead) waits_.notify_all(key);  // may have just died
    // A wake-up from another node carries no verdict (it wakes one waiter per key, decision
    // 075): the one that finds the record finished tells the others, who get the same answer.
    if (woken && r->outcome == core::BeginOutcome::completed) waits_.notify_all(key);
    if (r->outcome == core::BeginOutcome::acquired && !r->replayed && gone()) {
      // H2: granted to a client that is gone. Undo it (the attempt is not spent) and hand the
      // item on to the next waiter, as the lock service releases a grant nobody will use.
      AbandonOnceCmd undo{cmd.ref, r->record.token};
      auto undone = co_await call_store<bool>(
          [&](auto cb) { store_.abandon_once(std::move(undo), std::move(cb)); });
      if (undone.ok() && *undone) waits_.notify_one(key);
      co_return Error(errc::internal, "The request was cancelled because its client went away.");
    }
    if (r->outcome == core::BeginOutcome::acquired && !r->replayed) {
      // H3: the item changed hands; the others waiting need not sleep past its new lease.
      waits_.shorten(key, steady::now() + std::chrono::milliseconds(cmd.begin.lease_ms + 1));
    }
    if (r->outcome != core::BeginOutcome::in_progress) co_return r;
    if (woken && gone()) waits_.notify_one(key);  // H1
    const auto now = steady::now();
    if (now >= deadline || gone()) co_return r;
    // Wake up when the holder's lease lapses, at the latest (+1 ms: the lease is live up to and
    // including lease_expires_at - 1).
    const auto lease_end = now + std::chrono::milliseconds(r->retry_after_ms + 1);
    // H3: a waiter woken by a notification reads the holder's lease afresh (another node's
    // holder, say): the others follow it too.
    if (woken) waits_.shorten(key, lease_end);
    // Woken by a notification that brought nothing for it (another node's change, the re-check,
    // or a newcomer took the item first): it waits again in its old place, at the front.
    auto woke = co_await waits_.wait(key, std::min(deadline, lease_end), seen, /*front=*/woken);
    if (!woke.ok()) co_return std::move(woke).error();
    if (*woke == WakeReason::shutdown) co_return r;  // the server stops: answer "not now"
    woken = *woke == WakeReason::notified;
    if (*woke == WakeReason::cancelled || gone()) {
      if (woken) waits_.notify_one(key);  // H1: a wake-up meant for us goes to the next one
      co_return r;
    }
    // notified or timed out: ask again.
  }
}

boost::asio::awaitable<Result<core::OnceRecord>> OnceService::complete(CompleteOnceCmd cmd) {
  if (auto r = validate_once_ref(cmd.ref); !r.ok()) co_return std::move(r).error();
  if (auto r = validate_token(cmd.token); !r.ok()) co_return std::move(r).error();
  if (auto r = core::validate_result_json(cmd.result_json); !r.ok()) co_return std::move(r).error();
  const std::string key = wait_key(cmd.ref);
  auto r = co_await call_store<core::OnceRecord>(
      [&](auto cb) { store_.complete_once(std::move(cmd), std::move(cb)); });
  if (r.ok()) waits_.notify_all(key);
  co_return r;
}

boost::asio::awaitable<Result<core::OnceRecord>> OnceService::fail(FailOnceCmd cmd) {
  if (auto r = validate_once_ref(cmd.ref); !r.ok()) co_return std::move(r).error();
  if (auto r = validate_token(cmd.token); !r.ok()) co_return std::move(r).error();
  if (auto r = core::validate_error_text(cmd.error); !r.ok()) co_return std::move(r).error();
  const std::string key = wait_key(cmd.ref);
  auto r = co_await call_store<core::OnceRecord>(
      [&](auto cb) { store_.fail_once(std::move(cmd), std::move(cb)); });
  if (r.ok()) {
    if (r->state == core::OnceState::pending) {
      waits_.notify_one(key);
    } else {
      waits_.notify_all(key);
    }
  }
  co_return r;
}

boost::asio::awaitable<Result<core::OnceRecord>> OnceService::renew(RenewOnceCmd cmd) {
  if (auto r = validate_once_ref(cmd.ref); !r.ok()) co_return std::move(r).error();
  if (auto r = validate_token(cmd.token); !r.ok()) co_return std::move(r).error();
  if (auto r = core::validate_lease_ms(cmd.lease_ms); !r.ok()) co_return std::move(r).error();
  const std::string key = wait_key(cmd.ref);
  const auto lease_end =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(cmd.lease_ms + 1);
  auto r = co_await call_store<core::OnceRecord>(
      [&](auto cb) { store_.renew_once(std::move(cmd), std::move(cb)); });
  if (r.ok()) waits_.shorten(key, lease_end);  // H3: a renewal may shorten the lease
  co_return r;
}

boost::asio::awaitable<Result<core::OnceRecord>> OnceService::get(OnceRef ref) {
  if (auto r = validate_once_ref(ref); !r.ok()) co_return std::move(r).error();
  co_return co_await call_store<core::OnceRecord>(
      [&](auto cb) { store_.get_once(std::move(ref), std::move(cb)); });
}

boost::asio::awaitable<Result<OncePage>> OnceService::list(OnceQuery q) {
  if (auto r = core::validate_name(q.ns, "ns"); !r.ok()) co_return std::move(r).error();
  if (q.limit < 1 || q.limit > kMaxOnceLimit) {
    co_return invalid_field("limit", "The limit must be a whole number from 1 to 1000.");
  }
  if (!q.after.empty()) {
    if (auto r = core::validate_key(q.after, "after"); !r.ok()) co_return std::move(r).error();
  }
  co_return co_await call_store<OncePage>(
      [&](auto cb) { store_.list_once(std::move(q), std::move(cb)); });
}

boost::asio::awaitable<Result<core::OnceRecord>> OnceService::reset(ResetOnceCmd cmd) {
  if (auto r = validate_once_ref(cmd.ref); !r.ok()) co_return std::move(r).error();
  const std::string key = wait_key(cmd.ref);
  auto r = co_await call_store<core::OnceRecord>(
      [&](auto cb) { store_.reset_once(std::move(cmd), std::move(cb)); });
  if (r.ok()) waits_.notify_all(key);
  co_return r;
}

boost::asio::awaitable<Result<std::int64_t>> OnceService::purge(PurgeOnceCmd cmd) {
  co_return co_await call_store<std::int64_t>(
      [&](auto cb) { store_.purge_once(cmd, std::move(cb)); });
}

}  // namespace ichido::service
