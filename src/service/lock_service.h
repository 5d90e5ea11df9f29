// LockService: the Locks API as C++ — validation, the store's durable answers, and fair waiting.
//
// Waiting line. Each lock with requests waiting has a Line: a FIFO of parked waiters and a
// "turn". Only the holder of the turn asks the store to acquire while others wait, so requests
// are granted in arrival order:
//   W1. A newcomer takes the turn only when the line is empty and nobody holds the turn;
//       otherwise it parks at the tail (or, with wait_ms = 0, answers acquired=false at once).
//       So a newcomer never overtakes a queued waiter, even when the lock looks free.
//   W2. At most one request per lock holds the turn. It keeps it across a store round trip;
//       if the lock turns out busy it parks at the FRONT (it was first) and gives the turn back.
//   W3. Every event that may free the lock (release, force-release, and a parked front waiter's
//       timer reaching the holder's lease end) bumps the line's generation and hands the turn
//       to the front waiter if nobody holds it. A turn holder that finds the lock busy but sees
//       the generation moved during its store call retries at once, so no wake-up is lost.
//   W4. The front waiter's timer expires at min(its deadline, the holder's lease end): the lease
//       end timer is what hands a lapsed lock on, no polling. Whoever leaves the front (grant,
//       timeout, disconnect) passes the known lease end to the new front.
//   W5. A waiter that leaves (deadline, client gone) is removed from the line; a waiter that
//       leaves while holding the turn passes it on; a grant to a client already gone is
//       released again, so a disconnected client never keeps anyone waiting longer than needed
//       (its turn is held until that release is done). That release is made "for a gone client"
//       (core/lock.h L9): when the client's retry was answered the grant meanwhile (W6), the
//       retry holds it and the release changes nothing — in the store, so also across nodes.
//       Whether the client is gone when a grant comes back is decided by looking at the
//       connection itself (Client::gone), so a client whose end of stream arrived while the
//       grant committed is gone, on whatever thread the commit ran (decision 160).
//   W6. A request with a request_id that would park (or answer "not acquired" at once) first
//       asks the store whether it is a replay of the current grant (core/lock.h L8): a retry
//       whose first answer was lost gets that grant at once, without waiting for itself. The
//       check never grants, so it never overtakes the line.
//
// Waiting through the store's queue (stores that queue lock waiters durably, shared by every
// process on the store — PostgreSQL; core/lock.h Q1–Q4, docs/decisions/076). The order is the
// store's, across processes, so the turn above is not used:
//   D1. A request with wait_ms > 0 asks the store with a fresh waiter id: it is granted (free, or
//       its replay, and nobody live queued ahead) or queued in the store in the same transaction.
//       With wait_ms = 0 it is never queued, and still never overtakes a queued waiter (Q2).
//   D2. The line then only lists this process's queued requests, in arrival order. Every event
//       that may free the lock (a release here, a change announced by another process, the
//       store's periodic re-check, the front's timer at the holder's lease end) makes the
//       front ask the store again; asking again answers a grant a release made for it (Q3).
//       A reply that names another local waiter as granted wakes that one too.
//   D3. Leaving (deadline, client gone, shutdown) gives the place up in the store (Q4); a grant
//       made meanwhile is kept when the client is still there (answered acquired) and released
//       for a gone client (L9, as in W5) when it is gone. Then the new local front asks again.
//   D4. A store call that fails leaves the place too (best effort: a place nobody polls ends at
//       its wait deadline by itself).
//
// Shutdown: shutdown() wakes every parked waiter, which answers acquired=false with the holder
// (its normal "not now" answer) at once; afterwards nobody parks (a request that would wait
// answers the same at once). So a stopping server answers its waiters instead of cutting them.
//
// Waiters are coroutines parked on their own steady_timer (no thread per waiter). Timers are
// touched only on the waiter's executor, which must be a strand (each HTTP connection runs on
// one: an I/O thread's io_context, which that thread alone runs): wake-ups are posted there, so
// a wake-up posted between parking and the timer wait runs after the wait has started.
// Thread-safety: every method may be called from any thread / coroutine.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/mutex.h"
#include "ichido/store.h"
#include "service/client.h"

namespace ichido::service {

struct LockLimits {
  std::size_t max_waiters_per_lock = 10000;
  std::size_t max_waiters_total = 100000;
};

struct AcquireLockRequest {
  LockRef ref;
  std::string owner;
  std::int64_t wait_ms = 0;
  std::int64_t lease_ms = core::kLockDefaultLeaseMs;
  std::optional<std::string> request_id;  // W6
  // The caller's connection when it may wait, for W5's look before a grant is answered
  // (service/client.h); null: the coroutine's cancellation alone says whether it is gone.
  Client* client = nullptr;
};

struct AcquireLockOutcome {
  bool acquired = false;
  bool replayed = false;  // acquired: the caller's own current grant, answered again (W6)
  // acquired: the grant. Otherwise the live holder when known; empty in the instant the lock is
  // being handed from one holder to a queued waiter (see docs/decisions/021).
  std::optional<core::LockRecord> record;
};

struct LockStatus {
  std::optional<core::LockRecord> holder;  // live holder
  std::size_t waiters = 0;
};

class LockService {
 public:
  LockService(Store& store, LockLimits limits)
      : store_(store), limits_(limits), queued_(store.queues_lock_waiters()) {}

  // Acquire, waiting up to wait_ms in line. Errors: invalid_request (field), too_many_waiters,
  // store errors; errc::internal "cancelled" when the caller's coroutine was cancelled (its
  // client went away) — nobody is left waiting or holding on its behalf then.
  boost::asio::awaitable<Result<AcquireLockOutcome>> acquire(AcquireLockRequest req);
  boost::asio::awaitable<Result<Unit>> release(ReleaseLockCmd cmd);
  boost::asio::awaitable<Result<core::LockRecord>> renew(RenewLockCmd cmd);
  // Admin: ends any holder's lease now (cmd.audit written atomically with it).
  boost::asio::awaitable<Result<ForceReleaseReply>> force_release(ForceReleaseCmd cmd);
  boost::asio::awaitable<Result<LockStatus>> get(LockRef ref);
  // The held locks of `ns`, by name, each with its waiters (as get()).
  boost::asio::awaitable<Result<std::vector<LockStatus>>> list(std::string ns);

  // A change on another node (Store::watch_external_changes, decision 075) may have freed `ref`:
  // handled like a local release (W3). A spurious call costs the front waiter one store call.
  void notify_external(const LockRef& ref);
  // Every line (of `ns` when given): the bounded re-check after a lost notification.
  void notify_external_all(const std::optional<std::string>& ns = std::nullopt);

  std::size_t waiters(const LockRef& ref) const;
  std::size_t total_waiters() const;
  // Answers every parked waiter "not acquired" now; later requests do not wait. Idempotent.
  void shutdown();

  using TimePoint = std::chrono::steady_clock::time_point;

  // One parked request. Its timer is touched only on its own executor; the flags only under mu_.
  struct Waiter {
    Waiter(boost::asio::any_io_executor ex, TimePoint deadline_at)
        : timer(std::move(ex)), deadline(deadline_at) {}
    boost::asio::steady_timer timer;
    const TimePoint deadline;
    bool has_turn = false;                   // popped from the line and handed the turn (W3)
    bool poked = false;                      // lease_end moved earlier: re-arm the timer (W4)
    bool stop = false;                       // shutdown(): answer "not acquired" now
    TimePoint lease_end = TimePoint::max();  // the holder's lease end, when this waiter is front
    std::string waiter_id;                   // D1: its id in the store's queue
  };
  // The waiting line of one lock; exists while someone waits or holds the turn.
  struct Line {
    // Parked, first come first served. A list, not a deque: libstdc++'s deque allocates its map
    // and a 512-byte block when it is made, and a line is made for every uncontended acquire
    // (and erased after it), which parks no one.
    std::list<std::shared_ptr<Waiter>> queue;
    bool turn_out = false;  // W2: someone is asking the store right now
    std::uint64_t gen = 0;  // W3: bumped by every event that may free it
  };

 private:
  static std::string key_of(const LockRef& ref);

  void notify_locked(const std::string& key) REQUIRES(mu_);
  void give_turn_locked(Line& line) REQUIRES(mu_);
  void return_turn_locked(const std::string& key, Line& line,
                          std::optional<TimePoint> holder_lease_end) REQUIRES(mu_);
  void leave_locked(const std::string& key, Line& line, const std::shared_ptr<Waiter>& w)
      REQUIRES(mu_);
  void poke_front_locked(Line& line, TimePoint lease_end) REQUIRES(mu_);
  void erase_if_idle_locked(const std::string& key) REQUIRES(mu_);

  boost::asio::awaitable<void> release_for_gone_client(LockRef ref, std::int64_t token);
  boost::asio::awaitable<Result<AcquireLockOutcome>> take_turn(
      const AcquireLockRequest& req, const std::string& key, TimePoint deadline, std::uint64_t& gen,
      std::shared_ptr<Waiter>& me, const boost::asio::any_io_executor& ex,
      boost::asio::cancellation_state cs, bool& turn, bool& answered);
  // D1–D4: acquire through the store's waiter queue.
  boost::asio::awaitable<Result<AcquireLockOutcome>> acquire_queued(AcquireLockRequest req);
  // D3: leaves the local line and the store's queue; the outcome when the lock was granted to
  // `me` meanwhile (already released again when the client is gone: then cancelled_error()).
  boost::asio::awaitable<Result<AcquireLockOutcome>> leave_queue(const AcquireLockRequest& req,
                                                                 std::shared_ptr<Waiter> me,
                                                                 bool client_gone);
  // D2: the local front asks the store again.
  void wake_front_locked(Line& line) REQUIRES(mu_);
  boost::asio::awaitable<Result<AcquireLockOutcome>> not_acquired(LockRef ref);
  // W6: the current grant when `req` replays it, else nullopt (nothing is granted).
  boost::asio::awaitable<Result<std::optional<AcquireLockOutcome>>> replay(
      const AcquireLockRequest& req);

  Store& store_;
  const LockLimits limits_;
  const bool queued_;  // the store queues waiters (D1–D4)
  // mu_ also guards every Line and the flags and lease_end of every Waiter (nested structs
  // cannot name it in an annotation).
  mutable Mutex mu_;
  std::unordered_map<std::string, Line> lines_ GUARDED_BY(mu_);
  std::size_t total_ GUARDED_BY(mu_) = 0;  // parked waiters
  bool closing_ GUARDED_BY(mu_) = false;   // shutdown() was called
};

}  // namespace ichido::service
