// OnceService over the in-memory store: begin's waiters (woken by complete, fail, reset and the
// holder's lease lapsing, never lost when a notification races with parking) and validation.
// Time in the store is a ManualClock; the only real time spent is a waiter's own short timer.
#include "service/once_service.h"

#include <gtest/gtest.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <optional>

#include "store/memory/memory_store.h"
#include "store/testing/forwarding_store.h"

namespace ichido::service {
namespace {

namespace asio = boost::asio;
using core::BeginOutcome;

constexpr TimeMs kT0 = 1'775'000'000'000;

class OnceServiceTest : public ::testing::Test {
 protected:
  OnceRef Ref(const std::string& key = "<m1@example.com>") { return {"acme", key}; }

  // Starts a begin as its own coroutine; its answer lands in `out`.
  void SpawnBegin(std::optional<Result<BeginOnceReply>>& out, std::string owner,
                  std::int64_t wait_ms, std::int64_t lease_ms = 60000,
                  asio::cancellation_signal* cancel = nullptr, OnceService* svc = nullptr,
                  std::optional<std::string> request_id = std::nullopt) {
    OnceService& s = svc ? *svc : svc_;
    auto body = [this, &s, &out, owner, wait_ms, lease_ms, request_id]() -> asio::awaitable<void> {
      BeginOnceCmd cmd{Ref(), core::BeginCommand{owner, lease_ms, std::nullopt, 5, request_id}};
      auto r = co_await s.begin(std::move(cmd), wait_ms);
      out.emplace(std::move(r));
    };
    auto rethrow = [](std::exception_ptr e) {
      if (e) std::rethrow_exception(e);
    };
    if (cancel) {
      asio::co_spawn(ioc_, body, asio::bind_cancellation_slot(cancel->slot(), rethrow));
    } else {
      asio::co_spawn(ioc_, body, rethrow);
    }
  }
  template <class T, class F>
  Result<T> Run(F f) {
    std::optional<Result<T>> out;
    asio::co_spawn(
        ioc_, [&]() -> asio::awaitable<void> { out.emplace(co_await f()); }, asio::detached);
    Poll();
    EXPECT_TRUE(out.has_value()) << "the call did not finish";
    if (!out) return Error(errc::internal, "did not finish");
    return std::move(*out);
  }
  std::int64_t Acquire(const std::string& owner = "A", std::int64_t lease_ms = 60000) {
    std::optional<Result<BeginOnceReply>> r;
    SpawnBegin(r, owner, 0, lease_ms);
    Poll();
    EXPECT_TRUE(r && r->ok());
    if (!r || !r->ok()) return -1;
    EXPECT_EQ((*r)->outcome, BeginOutcome::acquired);
    return (*r)->record.token;
  }
  Result<core::OnceRecord> Complete(std::int64_t token, std::string result) {
    return Run<core::OnceRecord>([&] {
      CompleteOnceCmd cmd{Ref(), token, result};
      return svc_.complete(std::move(cmd));
    });
  }
  Result<core::OnceRecord> Fail(std::int64_t token) {
    return Run<core::OnceRecord>([&] {
      FailOnceCmd cmd{Ref(), token, "boom", true};
      return svc_.fail(std::move(cmd));
    });
  }

  // poll/run that also work after an earlier call ran out of work (which stops an io_context).
  void Poll() {
    ioc_.restart();
    ioc_.poll();
  }
  void Run() {
    ioc_.restart();
    ioc_.run();
  }

  ManualClock clock_{kT0};
  store::memory::MemoryStore store_{&clock_};
  WaitList waits_{100, 1000};
  OnceService svc_{store_, waits_};
  asio::io_context ioc_;
};

TEST_F(OnceServiceTest, WaiterIsAnsweredWithTheResultWhenTheHolderCompletes) {
  const auto token = Acquire();
  std::optional<Result<BeginOnceReply>> b, c;
  SpawnBegin(b, "B", 300000);
  SpawnBegin(c, "C", 300000);
  Poll();
  ASSERT_FALSE(b.has_value()) << "B must be parked, not answered";
  EXPECT_EQ(waits_.waiting(OnceService::wait_key(Ref())), 2u);
  ASSERT_TRUE(Complete(token, R"({"sent":true})").ok());
  Poll();
  for (auto* r : {&b, &c}) {
    ASSERT_TRUE(r->has_value());
    ASSERT_TRUE((*r)->ok());
    EXPECT_EQ((**r)->outcome, BeginOutcome::completed);
    EXPECT_EQ((**r)->record.result, R"({"sent":true})");
  }
  EXPECT_EQ(waits_.total(), 0u);
}

TEST_F(OnceServiceTest, FailWakesOneWaiterWhichAcquiresTheNextAttempt) {
  const auto token = Acquire();
  std::optional<Result<BeginOnceReply>> b, c;
  SpawnBegin(b, "B", 300000);
  Poll();
  SpawnBegin(c, "C", 300000);
  Poll();
  ASSERT_TRUE(Fail(token).ok());
  Poll();
  ASSERT_TRUE(b.has_value() && b->ok());
  EXPECT_EQ((*b)->outcome, BeginOutcome::acquired);
  EXPECT_EQ((*b)->record.attempt, 2);
  EXPECT_GT((*b)->record.token, token);
  EXPECT_FALSE(c.has_value()) << "C keeps waiting for B";
  ASSERT_TRUE(Complete((*b)->record.token, "2").ok());
  Poll();
  ASSERT_TRUE(c.has_value() && c->ok());
  EXPECT_EQ((*c)->outcome, BeginOutcome::completed);
}

TEST_F(OnceServiceTest, WaiterRetriesWhenTheHoldersLeaseLapses) {
  Acquire("A", 1000);
  clock_.advance(999);  // 1 ms of lease left
  std::optional<Result<BeginOnceReply>> b;
  SpawnBegin(b, "B", 300000);
  Poll();
  ASSERT_FALSE(b.has_value());
  clock_.advance(1);  // the lease has lapsed; nobody notifies — the waiter's own deadline does
  Run();              // returns once B is answered (its timer is ~2 ms, not the 300 s wait)
  ASSERT_TRUE(b.has_value() && b->ok());
  EXPECT_EQ((*b)->outcome, BeginOutcome::acquired);
  EXPECT_EQ((*b)->record.attempt, 2);
}

TEST_F(OnceServiceTest, WaitRunningOutAnswersInProgress) {
  Acquire("A");
  std::optional<Result<BeginOnceReply>> b;
  SpawnBegin(b, "B", 5);
  Run();
  ASSERT_TRUE(b.has_value());
  ASSERT_TRUE(b->ok()) << b->error().message;
  EXPECT_EQ((*b)->outcome, BeginOutcome::in_progress);
  EXPECT_EQ((*b)->record.owner, "A");
  EXPECT_EQ(waits_.total(), 0u);
}

TEST_F(OnceServiceTest, ResetWakesWaitersAndTheFirstAcquiresAttemptOne) {
  Acquire("A");
  std::optional<Result<BeginOnceReply>> b;
  SpawnBegin(b, "B", 300000);
  Poll();
  auto reset = Run<core::OnceRecord>([&] { return svc_.reset(ResetOnceCmd{Ref()}); });
  ASSERT_TRUE(reset.ok());
  Poll();
  ASSERT_TRUE(b.has_value() && b->ok());
  EXPECT_EQ((*b)->outcome, BeginOutcome::acquired);
  EXPECT_EQ((*b)->record.attempt, 1);
}

// H1: the waiter a fail wakes has lost its client; the wake-up goes on to the next waiter, which
// acquires at once (before: it slept until the old holder's lease end, 60 s here).
TEST_F(OnceServiceTest, AWakeUpForADepartedWaiterIsPassedOn) {
  const auto token = Acquire("A");
  std::optional<Result<BeginOnceReply>> b, c;
  asio::cancellation_signal b_gone;
  SpawnBegin(b, "B", 300000, 60000, &b_gone);
  Poll();
  SpawnBegin(c, "C", 300000);
  Poll();
  ASSERT_EQ(waits_.waiting(OnceService::wait_key(Ref())), 2u);
  asio::co_spawn(
      ioc_,
      [&]() -> asio::awaitable<void> {
        FailOnceCmd cmd{Ref(), token, "boom", true};
        auto r = co_await svc_.fail(std::move(cmd));
        EXPECT_TRUE(r.ok());
        b_gone.emit(asio::cancellation_type::terminal);  // B's client hangs up as it is woken
      },
      asio::detached);
  Poll();
  ASSERT_TRUE(c.has_value()) << "the wake-up was lost with B";
  ASSERT_TRUE(c->ok());
  EXPECT_EQ((*c)->outcome, BeginOutcome::acquired);
  EXPECT_EQ((*c)->record.owner, "C");
  EXPECT_EQ((*c)->record.attempt, 2);
}

// H2: the store granted the item to a waiter whose client left during the store call: the grant
// is undone (the attempt is not spent, so max_attempts 1 does not kill it) and handed on.
class HeldBegins final : public store_testing::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  bool hold = false;
  std::vector<std::function<void()>> held;
  void begin_once(BeginOnceCmd c, Callback<BeginOnceReply> d) override {
    if (!hold) return in_.begin_once(std::move(c), std::move(d));
    in_.begin_once(std::move(c), [this, d](Result<BeginOnceReply> r) {
      held.push_back([d, r] { d(Result<BeginOnceReply>(r)); });
    });
  }
  // Undos held back before the store sees them: not decided until run from `held`.
  bool hold_abandons = false;
  void abandon_once(AbandonOnceCmd c, Callback<bool> d) override {
    if (!hold_abandons) return in_.abandon_once(std::move(c), std::move(d));
    held.push_back([this, c = std::move(c), d = std::move(d)]() mutable {
      in_.abandon_once(std::move(c), std::move(d));
    });
  }
  void deliver() {
    auto h = std::move(held);
    held.clear();
    for (auto& f : h) f();
  }
};

// H2's setting, shared by the tests below: A holds the item, B waits for it (its client can
// leave through b_gone), and the store's answers to begins can be held back.
class OnceGrantRaceTest : public OnceServiceTest {
 protected:
  HeldBegins gated_{store_};
  OnceService svc_gated_{gated_, waits_};
  std::optional<Result<BeginOnceReply>> a_, b_;
  asio::cancellation_signal b_gone_;

  void AHoldsAndBWaits(std::optional<std::string> b_request_id) {
    SpawnBegin(a_, "A", 0, 60000, nullptr, &svc_gated_);
    Poll();
    ASSERT_TRUE(a_ && a_->ok() && (*a_)->outcome == BeginOutcome::acquired);
    SpawnBegin(b_, "B", 300000, 60000, &b_gone_, &svc_gated_, std::move(b_request_id));
    Poll();
  }
  // A fails; B is woken and asks the store, whose answer (the grant) is held back.
  void AFailsAndBsGrantIsHeld() {
    gated_.hold = true;
    auto failed = Run<core::OnceRecord>([&] {
      FailOnceCmd cmd{Ref(), (*a_)->record.token, "boom", true};
      return svc_gated_.fail(std::move(cmd));
    });
    ASSERT_TRUE(failed.ok());
    Poll();
    ASSERT_EQ(gated_.held.size(), 1u) << "B woke and asked the store";
    gated_.hold = false;
  }
};

TEST_F(OnceGrantRaceTest, AGrantToADepartedClientIsUndoneAndHandedOn) {
  std::optional<Result<BeginOnceReply>> c;
  ASSERT_NO_FATAL_FAILURE(AHoldsAndBWaits(std::nullopt));
  SpawnBegin(c, "C", 300000, 60000, nullptr, &svc_gated_);
  Poll();
  ASSERT_NO_FATAL_FAILURE(AFailsAndBsGrantIsHeld());
  b_gone_.emit(asio::cancellation_type::terminal);  // B leaves while the store grants it
  gated_.deliver();
  Poll();
  ASSERT_TRUE(c.has_value()) << "the item stayed with B, who is gone";
  ASSERT_TRUE(c->ok());
  EXPECT_EQ((*c)->outcome, BeginOutcome::acquired);
  EXPECT_EQ((*c)->record.owner, "C");
  EXPECT_EQ((*c)->record.attempt, 2) << "B's undelivered attempt was not spent";
}

// H2 + O9: B's waiting begin (with a request_id) is granted just as its client goes away; B's
// retry (same request_id) arrives while that grant is being undone and is answered it
// ("replayed"). The undo must then leave it to the retry. Before, it undid it: the retry's
// client worked on an item that was pending again (the next begin would hand it to a second
// worker) and its complete failed with stale_token.
TEST_F(OnceGrantRaceTest, AnUndoDoesNotTakeTheItemFromTheRetryThatWasAnsweredIt) {
  std::optional<Result<BeginOnceReply>> retry;
  ASSERT_NO_FATAL_FAILURE(AHoldsAndBWaits("rid-b"));
  ASSERT_NO_FATAL_FAILURE(AFailsAndBsGrantIsHeld());
  gated_.hold_abandons = true;
  b_gone_.emit(asio::cancellation_type::terminal);  // B leaves while the store grants it
  gated_.deliver();
  Poll();
  ASSERT_EQ(gated_.held.size(), 1u) << "B's grant is being undone";
  SpawnBegin(retry, "B", 0, 60000, nullptr, &svc_gated_, "rid-b");  // B's client retries
  Poll();
  ASSERT_TRUE(retry && retry->ok());
  ASSERT_EQ((*retry)->outcome, BeginOutcome::acquired);
  ASSERT_TRUE((*retry)->replayed);
  const std::int64_t token = (*retry)->record.token;
  gated_.hold_abandons = false;
  gated_.deliver();  // the undo lands after the retry was answered
  Poll();
  ASSERT_TRUE(b_.has_value());
  EXPECT_FALSE(b_->ok()) << "B's client is gone";
  auto done = Run<core::OnceRecord>([&] {
    CompleteOnceCmd cmd{Ref(), token, "{}"};
    return svc_gated_.complete(std::move(cmd));
  });
  ASSERT_TRUE(done.ok()) << "the retry holds the item it was answered: " << done.error().message;
  EXPECT_EQ(done->state, core::OnceState::completed);
  EXPECT_EQ(done->attempt, 2);
}

// Shutdown: parked begins answer their in_progress at once; later ones do not park.
TEST_F(OnceServiceTest, ShutdownAnswersParkedWaitersInProgressAtOnce) {
  Acquire("A");
  std::optional<Result<BeginOnceReply>> b, c;
  SpawnBegin(b, "B", 300000);
  Poll();
  ASSERT_FALSE(b.has_value());
  waits_.shutdown();
  Poll();
  ASSERT_TRUE(b.has_value() && b->ok());
  EXPECT_EQ((*b)->outcome, BeginOutcome::in_progress);
  EXPECT_EQ((*b)->record.owner, "A");
  SpawnBegin(c, "C", 300000);
  Poll();
  ASSERT_TRUE(c.has_value() && c->ok()) << "a begin during shutdown must not park";
  EXPECT_EQ((*c)->outcome, BeginOutcome::in_progress);
  EXPECT_EQ(waits_.total(), 0u);
}

TEST_F(OnceServiceTest, TooManyWaitersIs429AndNothingParks) {
  WaitList tiny(1, 1);
  OnceService svc(store_, tiny);
  Acquire("A");
  std::optional<Result<BeginOnceReply>> first, second;
  auto spawn = [&](std::optional<Result<BeginOnceReply>>& out) {
    asio::co_spawn(
        ioc_,
        [&]() -> asio::awaitable<void> {
          BeginOnceCmd cmd{Ref(), core::BeginCommand{"B", 60000, std::nullopt, 5}};
          out.emplace(co_await svc.begin(std::move(cmd), 300000));
        },
        [](std::exception_ptr e) {
          if (e) std::rethrow_exception(e);
        });
  };
  spawn(first);
  spawn(second);
  Poll();
  EXPECT_FALSE(first.has_value());
  ASSERT_TRUE(second.has_value());
  ASSERT_FALSE(second->ok());
  EXPECT_EQ(second->error().code, errc::too_many_waiters);
  tiny.notify_all(OnceService::wait_key(Ref()));  // let the first go (it finds in_progress again)
  ioc_.stop();
}

TEST_F(OnceServiceTest, BadInputNamesTheFieldAndChangesNothing) {
  auto begin = [&](OnceRef ref, core::BeginCommand c, std::int64_t wait_ms) {
    return Run<BeginOnceReply>([&] {
      BeginOnceCmd cmd{ref, c};
      return svc_.begin(std::move(cmd), wait_ms);
    });
  };
  const core::BeginCommand ok{"A", 60000, std::nullopt, 5};
  auto expect_field = [](const auto& r, const char* field) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, errc::invalid_request);
    EXPECT_EQ(r.error().field, field);
  };
  expect_field(begin({"acme", ""}, ok, 0), "key");
  expect_field(begin({"a/b", "k"}, ok, 0), "ns");
  expect_field(begin(Ref(), ok, 300001), "wait_ms");
  expect_field(begin(Ref(), {"A", 999, std::nullopt, 5}, 0), "lease_ms");
  expect_field(begin(Ref(), {"A", 60000, std::nullopt, 0}, 0), "max_attempts");
  expect_field(begin(Ref(), {"A", 60000, std::string(513, 'f'), 5}, 0), "fingerprint");
  auto get = Run<core::OnceRecord>([&] { return svc_.get(Ref()); });
  ASSERT_FALSE(get.ok());
  EXPECT_EQ(get.error().code, errc::once_not_found) << "nothing was created";
  const auto token = Acquire();
  expect_field(Complete(token, std::string(core::kMaxResultBytes + 1, '1')), "result");
  expect_field(Complete(0, "1"), "token");
  EXPECT_EQ(Run<core::OnceRecord>([&] { return svc_.get(Ref()); })->state,
            core::OnceState::processing);
}

}  // namespace
}  // namespace ichido::service
