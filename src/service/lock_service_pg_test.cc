// LockService over the PostgreSQL store's waiter queue (D1–D4 of service/lock_service.h): the
// paths where the store's answer is an error or the client leaves, with the store's calls held
// back or failed at the Store boundary. Needs PostgreSQL (make test starts one: the `pg` CTest
// fixture); skips without one when run by hand.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <functional>
#include <optional>
#include <vector>

#include "service/lock_service.h"
#include "service/run_until.h"
#include "store/postgres/pg_conn.h"
#include "store/postgres/pg_store.h"
#include "store/testing/forwarding_store.h"
#include "store/testing/pg_schema_test.h"

namespace ichido::service {
namespace {

namespace asio = boost::asio;
using store::postgres::PgStore;

// Fails the next acquires (D4) or holds releases back (W5/D3) on the caller's thread.
class FaultyStore final : public store_testing::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  std::atomic<int> fail_acquires{0};
  std::atomic<int> failed{0};
  void acquire_lock(AcquireLockCmd cmd, Callback<AcquireLockReply> done) override {
    if (fail_acquires.load() > 0) {
      fail_acquires.fetch_sub(1);
      failed.fetch_add(1);
      return done(Error(errc::store_unavailable, "injected: the store is unavailable"));
    }
    in_.acquire_lock(std::move(cmd), std::move(done));
  }
  std::atomic<bool> hold_releases{false};
  std::mutex mu;
  std::vector<std::function<void()>> held;  // GUARDED_BY(mu)
  void release_lock(ReleaseLockCmd cmd, Callback<Unit> done) override {
    if (!hold_releases.load()) return in_.release_lock(std::move(cmd), std::move(done));
    std::lock_guard lk(mu);
    held.push_back([this, cmd = std::move(cmd), done = std::move(done)]() mutable {
      in_.release_lock(std::move(cmd), std::move(done));
    });
  }
  std::size_t held_count() {
    std::lock_guard lk(mu);
    return held.size();
  }
  void deliver() {
    std::vector<std::function<void()>> h;
    {
      std::lock_guard lk(mu);
      h.swap(held);
    }
    for (auto& f : h) f();
  }
};

class LockServicePgTest : public store_testing::PgSchemaTest {
 protected:
  using Slot = std::shared_ptr<std::optional<Result<AcquireLockOutcome>>>;

  LockServicePgTest() : PgSchemaTest("locksvc") {}
  void SetUp() override {
    PgSchemaTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    auto s = PgStore::open(Opts());
    ASSERT_TRUE(s.ok()) << s.error().message;
    pg_ = std::move(*s);
    faulty_ = std::make_unique<FaultyStore>(*pg_);
    svc_ = std::make_unique<LockService>(*faulty_, LockLimits{10, 10});
    ASSERT_TRUE(pg_->queues_lock_waiters()) << "the PostgreSQL store queues waiters (D1)";
  }
  void TearDown() override {
    svc_.reset();
    faulty_.reset();
    if (pg_) pg_->close();
    pg_.reset();
    PgSchemaTest::TearDown();
  }

  bool RunUntil(const std::function<bool()>& done) { return run_until(ioc_, done); }
  Slot Acquire(const std::string& owner, std::int64_t wait_ms,
               std::optional<std::string> request_id = std::nullopt,
               asio::cancellation_signal* cancel = nullptr) {
    auto slot = std::make_shared<std::optional<Result<AcquireLockOutcome>>>();
    auto body = [this, slot, owner, wait_ms, request_id]() -> asio::awaitable<void> {
      AcquireLockRequest req{LockRef{"ns", "l"}, owner, wait_ms, 60000, request_id};
      auto r = co_await svc_->acquire(std::move(req));
      slot->emplace(std::move(r));
    };
    if (cancel) {
      asio::co_spawn(ioc_, body, asio::bind_cancellation_slot(cancel->slot(), asio::detached));
    } else {
      asio::co_spawn(ioc_, body, asio::detached);
    }
    return slot;
  }
  std::optional<Result<Unit>> Release(std::int64_t token) {
    std::optional<Result<Unit>> out;
    asio::co_spawn(
        ioc_,
        [&]() -> asio::awaitable<void> {
          ReleaseLockCmd cmd{LockRef{"ns", "l"}, token};
          auto r = co_await svc_->release(std::move(cmd));
          out.emplace(std::move(r));
        },
        asio::detached);
    EXPECT_TRUE(RunUntil([&] { return out.has_value(); }));
    return out;
  }
  std::optional<core::LockRecord> Holder() {
    std::optional<Result<LockStatus>> out;
    asio::co_spawn(
        ioc_,
        [&]() -> asio::awaitable<void> {
          LockRef ref{"ns", "l"};
          auto r = co_await svc_->get(std::move(ref));
          out.emplace(std::move(r));
        },
        asio::detached);
    EXPECT_TRUE(RunUntil([&] { return out.has_value(); }));
    if (!out || !out->ok()) return std::nullopt;
    return (*out)->holder;
  }
  static std::int64_t Token(const Slot& s) {
    EXPECT_TRUE(s->has_value());
    if (!s->has_value() || !(*s)->ok() || !(**s)->acquired) return 0;
    return (**s)->record->token;
  }

  asio::io_context ioc_;
  std::unique_ptr<PgStore> pg_;
  std::unique_ptr<FaultyStore> faulty_;
  std::unique_ptr<LockService> svc_;
};

// D4: the waiter's store call fails just after a release granted the lock to it (Q3). Leaving
// the queue then finds that grant (Q4) and answers it: the client gets the lock it was granted
// instead of a 503 while the lock sits reserved for nobody until its pickup lease lapses.
TEST_F(LockServicePgTest, AStoreErrorAfterTheGrantIsAnsweredWithTheGrant) {
  auto h = Acquire("H", 0);
  ASSERT_TRUE(RunUntil([&] { return h->has_value(); }));
  const std::int64_t held = Token(h);
  ASSERT_GT(held, 0);
  auto w = Acquire("W", 60000);
  ASSERT_TRUE(RunUntil([&] { return svc_->waiters(LockRef{"ns", "l"}) == 1u; }));
  faulty_->fail_acquires = 1;  // W's next look at the store fails
  auto rel = Release(held);    // Q3: granted to W in the release's transaction
  ASSERT_TRUE(rel && rel->ok());
  ASSERT_TRUE(RunUntil([&] { return w->has_value(); }));
  EXPECT_EQ(faulty_->failed.load(), 1) << "W's store call after the release failed";
  ASSERT_TRUE((*w)->ok()) << (*w)->error().message;
  ASSERT_TRUE((**w)->acquired);
  EXPECT_GT(Token(w), held);
  auto holder = Holder();
  ASSERT_TRUE(holder.has_value());
  EXPECT_EQ(holder->owner, "W");
  EXPECT_GT(holder->lease_expires_at - holder->acquired_at, core::kLockPickupMs)
      << "picked up with W's own lease, not left at the pickup lease";
}

// D4 without a grant: the error is the answer and the place is given up (nothing stays queued).
TEST_F(LockServicePgTest, AStoreErrorWithoutAGrantAnswersTheErrorAndLeavesTheQueue) {
  auto h = Acquire("H", 0);
  ASSERT_TRUE(RunUntil([&] { return h->has_value(); }));
  faulty_->fail_acquires = 1;
  auto w = Acquire("W", 60000);
  ASSERT_TRUE(RunUntil([&] { return w->has_value(); }));
  ASSERT_FALSE((*w)->ok());
  EXPECT_EQ((*w)->error().code, errc::store_unavailable);
  EXPECT_EQ(svc_->waiters(LockRef{"ns", "l"}), 0u);
  auto rel = Release(Token(h));
  ASSERT_TRUE(rel && rel->ok());
  EXPECT_FALSE(Holder().has_value()) << "nobody was queued, so nobody was granted";
}

// D3 + L9 through the service: S's queued acquire (with a request_id) is granted by a release
// just as its client goes away; leaving picks the grant up and releases it for the gone client,
// but that release is held back while S's retry arrives and is answered the grant ("replayed").
// The release must then leave the grant to the retry.
TEST_F(LockServicePgTest, ARetryAnsweredTheGrantOfItsGoneQueuedAttemptKeepsIt) {
  auto h = Acquire("H", 0);
  ASSERT_TRUE(RunUntil([&] { return h->has_value(); }));
  const std::int64_t held = Token(h);
  asio::cancellation_signal gone;
  auto first = Acquire("S", 60000, "rid-s", &gone);
  ASSERT_TRUE(RunUntil([&] { return svc_->waiters(LockRef{"ns", "l"}) == 1u; }));
  // H releases (Q3 grants the lock to S); S's client leaves before S looks: D3 picks the grant
  // up and releases it for the gone client — held back here.
  std::optional<Result<Unit>> rel;
  asio::co_spawn(
      ioc_,
      [&]() -> asio::awaitable<void> {
        ReleaseLockCmd cmd{LockRef{"ns", "l"}, held};
        auto r = co_await svc_->release(std::move(cmd));
        rel.emplace(std::move(r));
        faulty_->hold_releases = true;
        gone.emit(asio::cancellation_type::terminal);
      },
      asio::detached);
  ASSERT_TRUE(RunUntil([&] { return rel.has_value(); }));
  ASSERT_TRUE(rel->ok());
  ASSERT_TRUE(RunUntil([&] { return faulty_->held_count() == 1u; }))
      << "S's grant was not released for its gone client";
  auto retry = Acquire("S", 60000, "rid-s");
  ASSERT_TRUE(RunUntil([&] { return retry->has_value(); }));
  ASSERT_TRUE((*retry)->ok()) << (*retry)->error().message;
  ASSERT_TRUE((**retry)->acquired);
  ASSERT_TRUE((**retry)->replayed);
  faulty_->hold_releases = false;
  faulty_->deliver();
  ASSERT_TRUE(RunUntil([&] { return first->has_value(); }));
  EXPECT_FALSE((*first)->ok()) << "S's first attempt: its client is gone";
  auto holder = Holder();
  ASSERT_TRUE(holder.has_value()) << "the retry was told it holds a released lock";
  EXPECT_EQ(holder->token, Token(retry));
}

}  // namespace
}  // namespace ichido::service
