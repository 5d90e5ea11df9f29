// OnceService: the Once API as C++ calls. Validates what the rulebook cannot see from a single
// record (names, keys, lengths, ranges), runs the command on the store and awaits its durable
// answer, and holds begin's waiters.
//
// Waiting (begin with wait_ms > 0): when the store answers in_progress, the request parks on the
// WaitList under its (ns, key) — a suspended coroutine, no thread — until the first of:
//   - a complete / fail / reset of that key on this server notifies it,
//   - the current holder's lease lapses (the park deadline is min(wait deadline, the lease's
//     end), and follows the item when it changes hands: H3),
//   - wait_ms runs out;
// then it runs begin again and answers that (completed with the result, acquired, dead, or
// in_progress once wait_ms is spent). The WaitList generation read before each begin makes a
// notification that races with parking wake the waiter instead of being lost.
// Notifications: complete, dead and reset wake every waiter of the key (they all get the same
// answer); fail → pending wakes one (only one can acquire; the others keep their places).
// Hand-over, so that a wake-up is never lost on a waiter that cannot use it:
//   H1. A waiter woken by a notification that then cannot act on it — its client went away, or
//       its begin failed at the store — passes the wake-up on (notify_one).
//   H2. An acquisition made for a client that has gone is undone (Store::abandon_once: the
//       attempt is not spent) and handed on to the next waiter — unless the client's retry (same
//       request_id) was answered it meanwhile: then the retry holds it (core/once.h O9). "Gone"
//       is decided by looking at the connection itself after the store's answer (Client::gone),
//       so a client whose end of stream arrived while the acquisition committed is gone, on
//       whatever thread the commit ran (decision 160).
//   H3. Waiters follow the current holder's lease: when the item is acquired (or its lease is
//       renewed) here, every waiter of the key parked past the new lease's end wakes then
//       instead (WaitList::shorten), so nobody sleeps past a shorter lease that started after
//       it parked; a waiter woken by a notification that finds the item held passes the lease
//       it read on the same way (how another node's holder becomes known here).
// Other nodes (several nodes on PostgreSQL, decision 075): their complete / fail / reset of a key
// wakes the key's oldest waiter here (notify_external); one that then finds the record completed
// wakes the rest. notify_external_all wakes the oldest waiter of every key (the bounded re-check).
// Shutdown (WaitList::shutdown): parked begins answer their last in_progress at once.
//
// Lifecycle: built once at start-up; references the store and the wait list, which outlive it.
// Thread-safety: every method may be called concurrently from any executor.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "ichido/store.h"
#include "service/client.h"
#include "service/wait_list.h"

namespace ichido::service {

class OnceService {
 public:
  OnceService(Store& store, WaitList& waits) : store_(store), waits_(waits) {}

  // Errors: invalid_request (field), fingerprint_mismatch, too_many_waiters, store errors.
  // `client`: the caller's connection when it may wait, for H2's look before a grant is answered
  // (service/client.h); null: the coroutine's cancellation alone says whether it is gone.
  boost::asio::awaitable<Result<BeginOnceReply>> begin(BeginOnceCmd cmd, std::int64_t wait_ms,
                                                       Client* client = nullptr);
  boost::asio::awaitable<Result<core::OnceRecord>> complete(CompleteOnceCmd cmd);
  boost::asio::awaitable<Result<core::OnceRecord>> fail(FailOnceCmd cmd);
  boost::asio::awaitable<Result<core::OnceRecord>> renew(RenewOnceCmd cmd);
  boost::asio::awaitable<Result<core::OnceRecord>> get(OnceRef ref);
  boost::asio::awaitable<Result<OncePage>> list(OnceQuery q);
  // Admin: forgets the record (cmd.audit written atomically with it).
  boost::asio::awaitable<Result<core::OnceRecord>> reset(ResetOnceCmd cmd);
  // One retention batch (used by the server's background purge).
  boost::asio::awaitable<Result<std::int64_t>> purge(PurgeOnceCmd cmd);

  // A change of `ref` on another node: its oldest waiter asks the store again.
  void notify_external(const OnceRef& ref) { waits_.notify_one(wait_key(ref)); }
  // Every key (of `ns` when given): the oldest waiter of each asks again.
  void notify_external_all(const std::optional<std::string>& ns = std::nullopt) {
    waits_.notify_front_of_each(ns ? *ns + '\0' : std::string());
  }

  // The WaitList key of a once record.
  static std::string wait_key(const OnceRef& ref);

 private:
  Store& store_;
  WaitList& waits_;
};

// Validates the namespace and key of a once reference: errors name field "ns" or "key".
Result<void> validate_once_ref(const OnceRef& ref);

}  // namespace ichido::service
