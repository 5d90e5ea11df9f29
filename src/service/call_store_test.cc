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

// `n` coroutines on one io_context (one I/O thread), each awaiting one held call and recording
// its value in `seen`, in the order they are resumed; a coroutine whose answer is `throw_on`
// throws after recording it (its completion rethrows). Constructed with every call started.
struct Awaiting {
  asio::io_context ioc;
  HeldCalls calls;
  std::vector<int> seen;

  explicit Awaiting(std::size_t n, int throw_on = -1) {
    for (std::size_t i = 0; i < n; ++i) {
      asio::co_spawn(
          ioc,
          [this, throw_on]() -> asio::awaitable<void> {
            Result<int> r = co_await call_store<int>(calls.start());
            seen.push_back(*r);
            if (*r == throw_on) throw std::runtime_error("handler failed");
          },
          [](std::exception_ptr e) {
            if (e) std::rethrow_exception(e);
          });
    }
    while (calls.callbacks.size() < n) {
      ioc.restart();
      if (ioc.run_one() == 0) break;
    }
    ioc.restart();
    ioc.poll();
    EXPECT_EQ(calls.callbacks.size(), n);
  }

  // Answers call `i` with `value`, as the store thread would.
  void answer(std::size_t i, int value) { calls.callbacks.at(i)(Result<int>(value)); }
  std::size_t poll() {
    ioc.restart();
    return ioc.poll();
  }
  std::size_t poll_one() {
    ioc.restart();
    return ioc.poll_one();
  }
};

TEST(CallStoreTest, WithoutABatchEachAnswerIsItsOwnPost) {
  Awaiting w(3);
  for (int i = 0; i < 3; ++i) w.answer(i, i);
  ASSERT_EQ(w.poll_one(), 1u);
  EXPECT_EQ(w.seen, std::vector<int>{0});  // one operation resumed one coroutine
  w.poll();
  EXPECT_EQ(w.seen, (std::vector<int>{0, 1, 2}));
}

TEST(CallStoreTest, ABatchsAnswersReachEachThreadInOnePostInOrder) {
  Awaiting a(4);
  Awaiting b(3);
  {
    HandoffBatch batch;  // what a store thread opens around a batch's answers
    // Interleaved, as a batch mixes connections of both threads; in reverse order on `a`.
    for (int i = 0; i < 4; ++i) {
      a.answer(3 - i, 10 + i);
      if (i < 3) b.answer(i, 20 + i);
    }
    EXPECT_EQ(a.poll(), 0u);  // nothing handed off before the batch ends
    EXPECT_EQ(b.poll(), 0u);
  }
  ASSERT_EQ(a.poll_one(), 1u);
  EXPECT_EQ(a.seen, (std::vector<int>{10, 11, 12, 13}));  // one operation, every answer, in order
  ASSERT_EQ(b.poll_one(), 1u);
  EXPECT_EQ(b.seen, (std::vector<int>{20, 21, 22}));
  EXPECT_EQ(HandoffBatch::current(), nullptr);
}

TEST(CallStoreTest, AnAnswerThatThrowsStrandsNoOther) {
  Awaiting w(3, /*throw_on=*/1);
  {
    HandoffBatch batch;
    for (int i = 0; i < 3; ++i) w.answer(i, i);
  }
  EXPECT_THROW(w.poll_one(), std::runtime_error);
  EXPECT_EQ(w.seen, (std::vector<int>{0, 1, 2}));
}

TEST(CallStoreTest, BatchesNestAndEachEndsWithItsOwnAnswers) {
  Awaiting w(3);
  {
    HandoffBatch outer;
    w.answer(0, 0);
    {
      HandoffBatch inner;
      EXPECT_EQ(HandoffBatch::current(), &inner);
      w.answer(1, 1);
    }
    EXPECT_EQ(HandoffBatch::current(), &outer);
    ASSERT_EQ(w.poll_one(), 1u);  // the inner batch's end handed off what was held until then
    EXPECT_EQ(w.seen, (std::vector<int>{0, 1}));
    w.poll();
    w.answer(2, 2);
    EXPECT_EQ(w.poll(), 0u);  // held again, for the outer batch's end
  }
  ASSERT_EQ(w.poll_one(), 1u);
  EXPECT_EQ(w.seen, (std::vector<int>{0, 1, 2}));
}

}  // namespace
}  // namespace ichido::service
