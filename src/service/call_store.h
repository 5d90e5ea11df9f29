// call_store: turns one asynchronous Store call into an awaitable for Asio C++20 coroutines.
//
// The store calls its callback on one of its own threads; the result is posted back to the
// awaiting coroutine's executor (a connection's I/O thread), so handler code never runs on a store
// thread and never blocks it. A store thread answering a batch inside a HandoffBatch
// (ichido/store.h) gets one post per I/O thread for the batch instead of one per answer.
#pragma once

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <exception>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "ichido/store.h"

namespace ichido::service {

namespace detail {

// An answer kept for the end of its store thread's HandoffBatch.
struct PendingAnswer {
  virtual ~PendingAnswer() = default;
  virtual void run() = 0;  // resumes the awaiting handler; on its I/O thread only
};

// The answers that a store thread's open HandoffBatch holds, grouped by the executor (the I/O
// thread) they go to. At the batch's end each group is posted as one function that runs its
// answers in the order the store gave them: one post per I/O thread a batch instead of one per
// job, since each post takes the event loop's lock and queues an operation (decision 141). One
// per store thread and executor type.
template <class Executor>
class DeferredAnswers {
 public:
  static DeferredAnswers& here() {
    static thread_local DeferredAnswers answers;
    return answers;
  }

  // Takes `p` to be run on `ex` at the end of the thread's open batch. False (and `p` left as
  // it was) when no batch is open or it takes no more flushes: the caller posts at once.
  template <class P>
  bool defer(const Executor& ex, std::shared_ptr<P>& p) {
    HandoffBatch* batch = HandoffBatch::current();
    if (batch == nullptr) return false;
    if (batch != registered_) {
      if (!batch->on_end(&DeferredAnswers::flush, this)) return false;
      registered_ = batch;  // reset by flush, which every batch registered with runs
    }
    for (auto& g : groups_) {
      if (g.ex == ex) {
        g.answers.push_back(std::move(p));
        return true;
      }
    }
    groups_.push_back(Group{ex, {}});
    groups_.back().answers.push_back(std::move(p));
    return true;
  }

 private:
  struct Group {
    Executor ex;
    std::vector<std::shared_ptr<PendingAnswer>> answers;
  };

  static void flush(void* ctx) noexcept {
    auto* self = static_cast<DeferredAnswers*>(ctx);
    self->registered_ = nullptr;
    for (auto& g : self->groups_) {
      boost::asio::post(g.ex, [answers = std::move(g.answers)]() {
        // One answer's handler that throws must not strand the others' coroutines: all run,
        // and the first exception goes on to the event loop as a lone post's would.
        std::exception_ptr first;
        for (const auto& a : answers) {
          try {
            a->run();
          } catch (...) {
            if (!first) first = std::current_exception();
          }
        }
        if (first) std::rethrow_exception(first);
      });
    }
    self->groups_.clear();
  }

  HandoffBatch* registered_ = nullptr;
  std::vector<Group> groups_;
};

}  // namespace detail

// `start(callback)` must start exactly one store operation that calls `callback` once.
// Not a coroutine itself (no frame, no co_await of temporaries): it returns the awaitable that
// async_initiate builds, and `start` is moved into it normally.
template <class T, class Start>
boost::asio::awaitable<Result<T>> call_store(Start start) {
  namespace asio = boost::asio;
  return asio::async_initiate<const asio::use_awaitable_t<>&, void(Result<T>)>(
      [start = std::move(start)](auto handler) mutable {
        using Handler = decltype(handler);
        using Executor = asio::associated_executor_t<Handler>;
        // One block for the awaiting handler, its executor and the result: the callback and the
        // posted function each hold one pointer to it (a std::function keeps a shared_ptr
        // inline, and asio moves a posted function several times — into its operation, out of
        // it — as one pointer instead of a variant of strings).
        struct Box final : detail::PendingAnswer {
          explicit Box(Handler&& h)
              : handler(std::move(h)), ex(asio::get_associated_executor(handler)) {}
          void run() override { handler(std::move(*result)); }
          Handler handler;
          Executor ex;
          std::optional<Result<T>> result;
        };
        auto box = std::make_shared<Box>(std::move(handler));
        Callback<T> cb = [box](Result<T>&& r) mutable {
          box->result.emplace(std::move(r));
          // Inside a store's HandoffBatch the answer goes with the batch's others to its thread.
          if (detail::DeferredAnswers<Executor>::here().defer(box->ex, box)) return;
          Executor ex = box->ex;
          asio::post(ex, [box = std::move(box)]() { box->run(); });
        };
        start(std::move(cb));
      },
      asio::use_awaitable);
}

}  // namespace ichido::service
