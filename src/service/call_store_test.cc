// call_store's hand-off of answers: one post per answer outside a HandoffBatch, one post per
// I/O thread (executor) for all of a batch's answers inside one, in the store's order, and an
// answer whose handler throws strands none of the others.
#include "service/call_store.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "ichido/store.h"

namespace ichido::service {
namespace {

namespace asio = boost::asio;

// A "store" that keeps each call's callback until the test answers it (on the test's thread,
// as a store thread would).
struct HeldCalls {
  std::vector<Callback<int>> callbacks;
  auto start() {
    return [this](Callback<int> cb) { callbacks.push_back(std::move(cb)); };
  }
};

// Starts one coroutine on `ioc` that awaits one held call and records its value in `seen`;
// `throw_on` makes the coroutine throw after its answer (its completion rethrows).
void await_one(asio::io_context& ioc, HeldCalls& calls, std::vector<int>& seen, int throw_on = -1) {
  asio::co_spawn(
      ioc,
      [&calls, &seen, throw_on]() -> asio::awaitable<void> {
        Result<int> r = co_await call_store<int>(calls.start());
        seen.push_back(*r);
        if (*r == throw_on) throw std::runtime_error("handler failed");
      },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
}

// Runs until every coroutine is parked in its call (their starts have run).
void park(asio::io_context& ioc, HeldCalls& calls, std::size_t n) {
  while (calls.callbacks.size() < n) {
    ioc.restart();
    ASSERT_GT(ioc.run_one(), 0u);
  }
  ioc.restart();
  ioc.poll();
}

TEST(CallStoreTest, WithoutABatchEachAnswerIsItsOwnPost) {
  asio::io_context ioc;
  HeldCalls calls;
  std::vector<int> seen;
  for (int i = 0; i < 3; ++i) await_one(ioc, calls, seen);
  park(ioc, calls, 3);
  for (int i = 0; i < 3; ++i) calls.callbacks[i](Result<int>(i));
  ioc.restart();
  ASSERT_EQ(ioc.poll_one(), 1u);
  EXPECT_EQ(seen, std::vector<int>{0});  // one operation resumed one coroutine
  ioc.poll();
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2}));
}

TEST(CallStoreTest, ABatchsAnswersReachEachThreadInOnePostInOrder) {
  asio::io_context a;
  asio::io_context b;
  HeldCalls calls_a;
  HeldCalls calls_b;
  std::vector<int> seen_a;
  std::vector<int> seen_b;
  for (int i = 0; i < 4; ++i) await_one(a, calls_a, seen_a);
  for (int i = 0; i < 3; ++i) await_one(b, calls_b, seen_b);
  park(a, calls_a, 4);
  park(b, calls_b, 3);
  {
    HandoffBatch batch;  // what a store thread opens around a batch's answers
    // Interleaved, as a batch mixes connections of both threads; in reverse order on `a`.
    for (int i = 0; i < 4; ++i) {
      calls_a.callbacks[3 - i](Result<int>(10 + i));
      if (i < 3) calls_b.callbacks[i](Result<int>(20 + i));
    }
    a.restart();
    b.restart();
    EXPECT_EQ(a.poll(), 0u);  // nothing handed off before the batch ends
    EXPECT_EQ(b.poll(), 0u);
  }
  a.restart();
  b.restart();
  ASSERT_EQ(a.poll_one(), 1u);
  EXPECT_EQ(seen_a, (std::vector<int>{10, 11, 12, 13}));  // one operation, every answer, in order
  ASSERT_EQ(b.poll_one(), 1u);
  EXPECT_EQ(seen_b, (std::vector<int>{20, 21, 22}));
  EXPECT_EQ(HandoffBatch::current(), nullptr);
}

TEST(CallStoreTest, AnAnswerThatThrowsStrandsNoOther) {
  asio::io_context ioc;
  HeldCalls calls;
  std::vector<int> seen;
  for (int i = 0; i < 3; ++i) await_one(ioc, calls, seen, /*throw_on=*/1);
  park(ioc, calls, 3);
  {
    HandoffBatch batch;
    for (int i = 0; i < 3; ++i) calls.callbacks[i](Result<int>(i));
  }
  ioc.restart();
  EXPECT_THROW(ioc.poll_one(), std::runtime_error);
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2}));
}

TEST(CallStoreTest, BatchesNestAndEachEndsWithItsOwnAnswers) {
  asio::io_context ioc;
  HeldCalls calls;
  std::vector<int> seen;
  for (int i = 0; i < 3; ++i) await_one(ioc, calls, seen);
  park(ioc, calls, 3);
  {
    HandoffBatch outer;
    calls.callbacks[0](Result<int>(0));
    {
      HandoffBatch inner;
      EXPECT_EQ(HandoffBatch::current(), &inner);
      calls.callbacks[1](Result<int>(1));
    }
    EXPECT_EQ(HandoffBatch::current(), &outer);
    ioc.restart();
    ASSERT_EQ(ioc.poll_one(), 1u);  // the inner batch's end handed off what was held until then
    EXPECT_EQ(seen, (std::vector<int>{0, 1}));
    ioc.poll();
    calls.callbacks[2](Result<int>(2));
    ioc.restart();
    EXPECT_EQ(ioc.poll(), 0u);  // held again, for the outer batch's end
  }
  ioc.restart();
  ASSERT_EQ(ioc.poll_one(), 1u);
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2}));
}

}  // namespace
}  // namespace ichido::service
