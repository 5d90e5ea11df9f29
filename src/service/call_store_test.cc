// call_store's hand-off of answers: each answer is one post to its coroutine's executor, made on
// the store's thread, and resumes that coroutine there.
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

TEST(CallStoreTest, EachAnswerIsItsOwnPost) {
  Awaiting w(3);
  for (int i = 0; i < 3; ++i) w.answer(i, i);
  ASSERT_EQ(w.poll_one(), 1u);
  EXPECT_EQ(w.seen, std::vector<int>{0});  // one operation resumed one coroutine
  w.poll();
  EXPECT_EQ(w.seen, (std::vector<int>{0, 1, 2}));
}

}  // namespace
}  // namespace ichido::service
