// LockService: fair waiting, timeouts, cancellation, lease-end hand-over and limits, on the
// memory store. Store time is a ManualClock; the only real time that passes is the waiters' own
// short deadlines (the behaviour under test) — nothing sleeps to let a race settle: the tests run
// the io_context until a named condition holds (bounded).
#include "service/lock_service.h"

#include <gtest/gtest.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <functional>
#include <optional>
#include <vector>

#include "service/run_until.h"
#include "store/memory/memory_store.h"
#include "store/testing/forwarding_store.h"

namespace ichido::service {
namespace {

namespace asio = boost::asio;
constexpr TimeMs kT0 = 1'780'000'000'000;

class LockServiceTest : public ::testing::Test {
 protected:
  using Slot = std::shared_ptr<std::optional<Result<AcquireLockOutcome>>>;

  // Runs the io_context until `done()` holds; fails after 10 s instead of hanging.
  bool RunUntil(const std::function<bool()>& done) { return run_until(ioc_, done); }

  Slot Acquire(const std::string& owner, std::int64_t wait_ms, std::int64_t lease_ms = 60000,
               asio::cancellation_signal* cancel = nullptr, const std::string& name = "l",
               std::optional<std::string> request_id = std::nullopt) {
    auto slot = std::make_shared<std::optional<Result<AcquireLockOutcome>>>();
    auto body = [this, slot, owner, wait_ms, lease_ms, name,
                 request_id]() -> asio::awaitable<void> {
      AcquireLockRequest req{LockRef{"ns", name}, owner, wait_ms, lease_ms, request_id};
      auto r = co_await svc_.acquire(std::move(req));
      slot->emplace(std::move(r));
    };
    if (cancel) {
      asio::co_spawn(ioc_, body, asio::bind_cancellation_slot(cancel->slot(), asio::detached));
    } else {
      asio::co_spawn(ioc_, body, asio::detached);
    }
    return slot;
  }

  template <class T, class F>
  Result<T> Run(F f) {
    std::optional<Result<T>> out;
    asio::co_spawn(
        ioc_, [&]() -> asio::awaitable<void> { out.emplace(co_await f()); }, asio::detached);
    EXPECT_TRUE(RunUntil([&] { return out.has_value(); }));
    if (!out) return Error(errc::internal, "did not finish");
    return std::move(*out);
  }

  Result<Unit> Release(std::int64_t token, const std::string& name = "l") {
    return Run<Unit>([&] { return svc_.release(ReleaseLockCmd{LockRef{"ns", name}, token}); });
  }

  core::LockRecord Granted(const Slot& s) {
    EXPECT_TRUE(s->has_value());
    if (!s->has_value()) return {};
    EXPECT_TRUE((*s)->ok()) << (*s)->error().message;
    if (!(*s)->ok()) return {};
    EXPECT_TRUE((**s)->acquired);
    auto r = (**s)->record.value_or(core::LockRecord{});
    r.replayed = false;  // the store's mark of a replayed grant (L9), not part of the answer
    return r;
  }

  std::size_t Waiters(const std::string& name = "l") { return svc_.waiters(LockRef{"ns", name}); }

  asio::io_context ioc_;
  ManualClock clock_{kT0};
  store::memory::MemoryStore store_{&clock_};
  LockService svc_{store_, LockLimits{3, 5}};
};

TEST_F(LockServiceTest, FreeLockIsGrantedAndABusyOneAnswersTheHolder) {
  auto a = Acquire("A", 0);
  ASSERT_TRUE(RunUntil([&] { return a->has_value(); }));
  auto held = Granted(a);
  auto b = Acquire("B", 0);
  ASSERT_TRUE(RunUntil([&] { return b->has_value(); }));
  ASSERT_TRUE((*b)->ok());
  EXPECT_FALSE((**b)->acquired);
  ASSERT_TRUE((**b)->record.has_value());
  EXPECT_EQ(*(**b)->record, held);
  EXPECT_EQ(Waiters(), 0u);
}

// W6: a holder's retried acquire (same owner and request_id) is answered its grant at once,
// even while others wait in line — with wait_ms 0 and with wait_ms > 0 — and the line keeps
// its order.
TEST_F(LockServiceTest, ARetryWithTheHoldersRequestIdIsReplayedWithoutJoiningTheLine) {
  auto h = Acquire("H", 0, 60000, nullptr, "l", "rid-1");
  ASSERT_TRUE(RunUntil([&] { return h->has_value(); }));
  auto held = Granted(h);
  EXPECT_FALSE((**h)->replayed);
  auto w = Acquire("W", 60000);
  ASSERT_TRUE(RunUntil([&] { return Waiters() == 1u; }));
  for (std::int64_t wait_ms : {0, 30000}) {
    auto retry = Acquire("H", wait_ms, 60000, nullptr, "l", "rid-1");
    ASSERT_TRUE(RunUntil([&] { return retry->has_value(); })) << wait_ms;
    EXPECT_EQ(Granted(retry), held);
    EXPECT_TRUE((**retry)->replayed);
  }
  // Another request_id of the same owner waits like anyone else (here: gives up at once).
  auto other = Acquire("H", 0, 60000, nullptr, "l", "rid-2");
  ASSERT_TRUE(RunUntil([&] { return other->has_value(); }));
  ASSERT_TRUE((*other)->ok());
  EXPECT_FALSE((**other)->acquired);
  EXPECT_EQ(Waiters(), 1u);
  EXPECT_FALSE(w->has_value());
  ASSERT_TRUE(Release(held.token).ok());
  ASSERT_TRUE(RunUntil([&] { return w->has_value(); }));
  EXPECT_EQ(Granted(w).owner, "W");
}

// Shutdown: parked waiters answer "not acquired" with the holder at once, and a request that
// comes later does not park.
TEST_F(LockServiceTest, ShutdownAnswersParkedWaitersNotAcquiredAtOnce) {
  auto h = Acquire("H", 0);
  ASSERT_TRUE(RunUntil([&] { return h->has_value(); }));
  auto held = Granted(h);
  auto w1 = Acquire("W1", 300000);
  auto w2 = Acquire("W2", 300000);
  ASSERT_TRUE(RunUntil([&] { return Waiters() == 2u; }));
  svc_.shutdown();
  ASSERT_TRUE(RunUntil([&] { return w1->has_value() && w2->has_value(); }));
  for (auto* w : {&w1, &w2}) {
    ASSERT_TRUE((**w)->ok());
    EXPECT_FALSE((***w)->acquired);
    ASSERT_TRUE((***w)->record.has_value());
    EXPECT_EQ(*(***w)->record, held);
  }
  const auto start = std::chrono::steady_clock::now();
  auto late = Acquire("L", 300000);
  ASSERT_TRUE(RunUntil([&] { return late->has_value(); }));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_FALSE((**late)->acquired);
  EXPECT_EQ(Waiters(), 0u);
}

TEST_F(LockServiceTest, WaitersAreGrantedInArrivalOrder) {
  auto h = Acquire("H", 0);
  ASSERT_TRUE(RunUntil([&] { return h->has_value(); }));
  std::int64_t token = Granted(h).token;
  std::vector<Slot> waiters;
  for (int i = 0; i < 3; ++i) {
    waiters.push_back(Acquire("W" + std::to_string(i), 60000));
    ASSERT_TRUE(RunUntil([&] { return Waiters() == static_cast<std::size_t>(i + 1); }));
  }
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(Release(token).ok());
    ASSERT_TRUE(RunUntil([&] { return waiters[i]->has_value(); }));
    for (int j = i + 1; j < 3; ++j) EXPECT_FALSE(waiters[j]->has_value()) << j;
    auto g = Granted(waiters[i]);
    EXPECT_EQ(g.owner, "W" + std::to_string(i));
    EXPECT_GT(g.token, token);
    token = g.token;
  }
  EXPECT_EQ(Waiters(), 0u);
}

TEST_F(LockServiceTest, NewcomerDoesNotOvertakeAQueuedWaiterEvenWhenTheLockLooksFree) {
  auto h = Acquire("H", 0);
  ASSERT_TRUE(RunUntil([&] { return h->has_value(); }));
  auto w = Acquire("W", 60000);
  ASSERT_TRUE(RunUntil([&] { return Waiters() == 1u; }));
  // Free the lock behind the service's back: the store says free, W is still parked.
  std::optional<Result<Unit>> rel;
  store_.release_lock({LockRef{"ns", "l"}, Granted(h).token}, [&](Result<Unit> r) { rel = r; });
  ASSERT_TRUE(rel && rel->ok());
  auto n = Acquire("N", 0);
  ASSERT_TRUE(RunUntil([&] { return n->has_value(); }));
  ASSERT_TRUE((*n)->ok());
  EXPECT_FALSE((**n)->acquired) << "a newcomer took the lock ahead of a queued waiter";
  EXPECT_FALSE(w->has_value());
  // An admin force-release is an event: the queued waiter gets its turn and the lock.
  auto f = Run<ForceReleaseReply>(
      [&] { return svc_.force_release(ForceReleaseCmd{LockRef{"ns", "l"}}); });
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(RunUntil([&] { return w->has_value(); }));
  EXPECT_EQ(Granted(w).owner, "W");
}

TEST_F(LockServiceTest, WaitTimeoutAnswersNotAcquiredWithTheHolderAndLeavesTheLine) {
  auto h = Acquire("H", 0);
  ASSERT_TRUE(RunUntil([&] { return h->has_value(); }));
  auto w = Acquire("W", 30);
  ASSERT_TRUE(RunUntil([&] { return w->has_value(); }));
  ASSERT_TRUE((*w)->ok());
  EXPECT_FALSE((**w)->acquired);
  ASSERT_TRUE((**w)->record.has_value());
  EXPECT_EQ((**w)->record->owner, "H");
  EXPECT_EQ(Waiters(), 0u);
  EXPECT_EQ(svc_.total_waiters(), 0u);
}

TEST_F(LockServiceTest, CancelledWaiterLeavesTheLineAndTheNextIsServed) {
  auto h = Acquire("H", 0);
  ASSERT_TRUE(RunUntil([&] { return h->has_value(); }));
  asio::cancellation_signal cancel;
  auto gone = Acquire("gone", 60000, 60000, &cancel);
  ASSERT_TRUE(RunUntil([&] { return Waiters() == 1u; }));
  auto next = Acquire("next", 60000);
  ASSERT_TRUE(RunUntil([&] { return Waiters() == 2u; }));
  cancel.emit(asio::cancellation_type::terminal);
  ASSERT_TRUE(RunUntil([&] { return gone->has_value(); }));
  EXPECT_FALSE((*gone)->ok());
  EXPECT_EQ(Waiters(), 1u);
  ASSERT_TRUE(Release(Granted(h).token).ok());
  ASSERT_TRUE(RunUntil([&] { return next->has_value(); }));
  EXPECT_EQ(Granted(next).owner, "next");
}

TEST_F(LockServiceTest, GrantToAClientThatLeftIsReleasedAndPassedOn) {
  auto h = Acquire("H", 0);
  ASSERT_TRUE(RunUntil([&] { return h->has_value(); }));
  asio::cancellation_signal cancel;
  auto gone = Acquire("gone", 60000, 60000, &cancel);
  ASSERT_TRUE(RunUntil([&] { return Waiters() == 1u; }));
  auto next = Acquire("next", 60000);
  ASSERT_TRUE(RunUntil([&] { return Waiters() == 2u; }));
  // Release (hands the turn to `gone`, wake-up posted) and cancel `gone` before it runs.
  std::optional<Result<Unit>> rel;
  const std::int64_t token = Granted(h).token;
  asio::co_spawn(
      ioc_,
      [&]() -> asio::awaitable<void> {
        // A named local: g++ 12 miscompiles non-trivial temporaries inside co_await expressions.
        ReleaseLockCmd cmd{LockRef{"ns", "l"}, token};
        auto r = co_await svc_.release(std::move(cmd));
        rel.emplace(std::move(r));
        cancel.emit(asio::cancellation_type::terminal);
      },
      asio::detached);
  ASSERT_TRUE(RunUntil([&] { return next->has_value(); }));
  ASSERT_TRUE(rel && rel->ok());
  ASSERT_TRUE(gone->has_value());
  EXPECT_FALSE((*gone)->ok());
  EXPECT_EQ(Granted(next).owner, "next");
}

TEST_F(LockServiceTest, LeaseEndHandsTheLockToTheHeadWaiterWithoutARelease) {
  auto h = Acquire("H", 0, 1000);
  ASSERT_TRUE(RunUntil([&] { return h->has_value(); }));
  const auto old = Granted(h);
  clock_.advance(990);  // 10 ms of lease left in store time
  auto w = Acquire("W", 60000);
  ASSERT_TRUE(RunUntil([&] { return Waiters() == 1u; }));
  clock_.advance(10);  // the lease lapses; only the waiter's lease-end timer can notice
  ASSERT_TRUE(RunUntil([&] { return w->has_value(); }));
  auto g = Granted(w);
  EXPECT_GT(g.token, old.token);
  auto r = Release(old.token);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, errc::not_holder);
}

TEST_F(LockServiceTest, WaiterLimitsPerLockAndInTotal) {
  auto h = Acquire("H", 0);
  ASSERT_TRUE(RunUntil([&] { return h->has_value(); }));
  std::vector<Slot> parked;
  for (int i = 0; i < 3; ++i) {
    parked.push_back(Acquire("W" + std::to_string(i), 60000));
    ASSERT_TRUE(RunUntil([&] { return Waiters() == static_cast<std::size_t>(i + 1); }));
  }
  auto over = Acquire("over", 60000);
  ASSERT_TRUE(RunUntil([&] { return over->has_value(); }));
  ASSERT_FALSE((*over)->ok());
  EXPECT_EQ((*over)->error().code, errc::too_many_waiters);
  // Total bound (5): two more on another lock fit, a third does not.
  auto h2 = Acquire("H2", 0, 60000, nullptr, "m");
  ASSERT_TRUE(RunUntil([&] { return h2->has_value(); }));
  auto m1 = Acquire("M1", 60000, 60000, nullptr, "m");
  ASSERT_TRUE(RunUntil([&] { return Waiters("m") == 1u; }));
  auto m2 = Acquire("M2", 60000, 60000, nullptr, "m");
  ASSERT_TRUE(RunUntil([&] { return Waiters("m") == 2u; }));
  EXPECT_EQ(svc_.total_waiters(), 5u);
  auto m3 = Acquire("M3", 60000, 60000, nullptr, "m");
  ASSERT_TRUE(RunUntil([&] { return m3->has_value(); }));
  ASSERT_FALSE((*m3)->ok());
  EXPECT_EQ((*m3)->error().code, errc::too_many_waiters);
  ioc_.stop();
}

TEST_F(LockServiceTest, BadInputIsRejectedBeforeAnythingHappens) {
  auto bad_wait = Acquire("A", 300001);
  ASSERT_TRUE(RunUntil([&] { return bad_wait->has_value(); }));
  EXPECT_EQ((*bad_wait)->error().field, "wait_ms");
  auto bad_lease = Acquire("A", 0, 999);
  ASSERT_TRUE(RunUntil([&] { return bad_lease->has_value(); }));
  EXPECT_EQ((*bad_lease)->error().field, "lease_ms");
  auto bad_name = Acquire("A", 0, 1000, nullptr, "..");
  ASSERT_TRUE(RunUntil([&] { return bad_name->has_value(); }));
  EXPECT_EQ((*bad_name)->error().field, "name");
  auto s = Run<LockStatus>([&] { return svc_.get(LockRef{"ns", "l"}); });
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->holder.has_value());
}

// A store whose acquire answers can be held back: the decision is taken at call time (like a
// real store that has committed), but the answer reaches the service only when the test lets it.
// Everything else is forwarded unchanged.
class GatedStore final : public store_testing::ForwardingStore {
 public:
  explicit GatedStore(Store& inner) : ForwardingStore(inner) {}
  bool hold_acquires = false;
  std::vector<std::function<void()>> held;
  void deliver() {
    auto h = std::move(held);
    held.clear();
    for (auto& f : h) f();
  }

  void acquire_lock(AcquireLockCmd cmd, Callback<AcquireLockReply> done) override {
    if (!hold_acquires) return in_.acquire_lock(std::move(cmd), std::move(done));
    in_.acquire_lock(std::move(cmd), [this, done](Result<AcquireLockReply> r) {
      held.push_back([done, r]() { done(Result<AcquireLockReply>(r)); });
    });
  }
  // Releases held back before the store sees them: not decided (not committed) until deliver().
  bool hold_releases = false;
  void release_lock(ReleaseLockCmd cmd, Callback<Unit> done) override {
    if (!hold_releases) return in_.release_lock(std::move(cmd), std::move(done));
    held.push_back([this, cmd = std::move(cmd), done = std::move(done)]() mutable {
      in_.release_lock(std::move(cmd), std::move(done));
    });
  }
};

// The service over a GatedStore, run by hand (the tests below hold store calls back).
class LockServiceRace : public ::testing::Test {
 protected:
  using Slot = std::optional<Result<AcquireLockOutcome>>;

  bool RunUntil(const std::function<bool()>& done) { return run_until(ioc_, done); }

  // An acquire of lock "l" (wait_ms 60000) whose outcome lands in `out`.
  void Spawn(Slot& out, std::string owner, std::int64_t lease_ms,
             std::optional<std::string> rid = std::nullopt,
             asio::cancellation_signal* cancel = nullptr) {
    auto body = [this, &out, owner, lease_ms, rid]() -> asio::awaitable<void> {
      AcquireLockRequest req{LockRef{"ns", "l"}, owner, 60000, lease_ms, rid};
      auto r = co_await svc_.acquire(std::move(req));
      out.emplace(std::move(r));
    };
    if (cancel) {
      asio::co_spawn(ioc_, body, asio::bind_cancellation_slot(cancel->slot(), asio::detached));
    } else {
      asio::co_spawn(ioc_, body, asio::detached);
    }
  }

  asio::io_context ioc_;
  ManualClock clock_{kT0};
  store::memory::MemoryStore mem_{&clock_};
  GatedStore gated_{mem_};
  LockService svc_{gated_, LockLimits{10, 10}};
};

// W5 + W6 + L9: a client whose waiting acquire (with a request_id) was granted just as it went
// away retries with the same request_id while that grant is being released. The retry is
// answered the grant ("replayed", W6); the release for the gone client must then leave it to the
// retry. Before, it ended the grant: the client believed it held a lock nobody held.
TEST_F(LockServiceRace, ARetryAnsweredTheGrantOfItsGoneFirstAttemptKeepsIt) {
  Slot holder, first, retry;
  Spawn(holder, "H", 60000);
  ASSERT_TRUE(RunUntil([&] { return holder.has_value(); }));
  const std::int64_t held_token = (*holder)->record->token;
  asio::cancellation_signal cancel;
  Spawn(first, "S", 60000, "rid-1", &cancel);  // parks behind H
  ASSERT_TRUE(RunUntil([&] { return svc_.waiters(LockRef{"ns", "l"}) == 1u; }));
  // H releases: the turn goes to S, which is cancelled (its client went away) before it runs.
  std::optional<Result<Unit>> rel;
  asio::co_spawn(
      ioc_,
      [&]() -> asio::awaitable<void> {
        ReleaseLockCmd cmd{LockRef{"ns", "l"}, held_token};
        auto r = co_await svc_.release(std::move(cmd));
        rel.emplace(std::move(r));
        gated_.hold_releases = true;  // S's grant will be released, but not yet
        cancel.emit(asio::cancellation_type::terminal);
      },
      asio::detached);
  ASSERT_TRUE(RunUntil([&] { return !gated_.held.empty(); })) << "S's grant was not released";
  ASSERT_TRUE(rel && rel->ok());
  // S's retry, same owner and request_id, while the release of its first grant is pending.
  Spawn(retry, "S", 60000, "rid-1");
  ASSERT_TRUE(RunUntil([&] { return retry.has_value(); })) << "W6: a retry does not wait";
  ASSERT_TRUE(retry->ok()) << retry->error().message;
  ASSERT_TRUE((*retry)->acquired);
  ASSERT_TRUE((*retry)->replayed);
  const std::int64_t token = (*retry)->record->token;
  EXPECT_EQ(token, held_token + 1) << "the grant made for the first attempt";
  gated_.hold_releases = false;
  gated_.deliver();  // the release for the gone first attempt lands after the retry's answer
  ASSERT_TRUE(RunUntil([&] { return first.has_value(); }));
  EXPECT_FALSE(first->ok());  // cancelled: its client went away
  std::optional<Result<LockStatus>> status;
  asio::co_spawn(
      ioc_,
      [&]() -> asio::awaitable<void> {
        LockRef ref{"ns", "l"};  // a named argument: g++ 12 mishandles temporaries in co_await
        auto r = co_await svc_.get(std::move(ref));
        status.emplace(std::move(r));
      },
      asio::detached);
  ASSERT_TRUE(RunUntil([&] { return status.has_value(); }));
  ASSERT_TRUE(status->ok());
  ASSERT_TRUE((*status)->holder.has_value()) << "the retry was told it holds a released lock";
  EXPECT_EQ((*status)->holder->token, token);
}

// W3: a release that lands while the only requester is at the store (it has the turn and will
// hear "busy") must not be lost: the requester sees the line's generation moved and retries at
// once, instead of parking until the holder's (long) lease end.
TEST_F(LockServiceRace, ReleaseDuringABusyAnswerIsNotLost) {
  Slot holder, waiter;
  Spawn(holder, "H", 3600000);
  ASSERT_TRUE(RunUntil([&] { return holder.has_value(); }));
  ASSERT_TRUE(holder->ok() && (*holder)->acquired);

  gated_.hold_acquires = true;
  Spawn(waiter, "W", 3600000);  // takes the turn; the store says busy, but the answer is held back
  ASSERT_TRUE(RunUntil([&] { return !gated_.held.empty(); }));
  std::optional<Result<Unit>> rel;
  const std::int64_t token = (*holder)->record->token;
  asio::co_spawn(
      ioc_,
      [&]() -> asio::awaitable<void> {
        ReleaseLockCmd cmd{LockRef{"ns", "l"}, token};
        auto r = co_await svc_.release(std::move(cmd));
        rel.emplace(std::move(r));
      },
      asio::detached);
  ASSERT_TRUE(RunUntil([&] { return rel.has_value(); }));
  ASSERT_TRUE(rel->ok());
  gated_.hold_acquires = false;
  gated_.deliver();  // "busy" arrives after the release
  ASSERT_TRUE(RunUntil([&] { return waiter.has_value(); }))
      << "the waiter parked until the holder's one-hour lease: the release was lost";
  ASSERT_TRUE(waiter->ok());
  EXPECT_TRUE((*waiter)->acquired);
  EXPECT_GT((*waiter)->record->token, token);
}

}  // namespace
}  // namespace ichido::service
