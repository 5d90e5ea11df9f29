// call_store: turns one asynchronous Store call into an awaitable for Asio C++20 coroutines.
//
// The store calls its callback on one of its own threads; the result is posted back to the
// awaiting coroutine's executor (a connection's I/O thread), so handler code never runs on a store
// thread and never blocks it.
#pragma once

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <memory>
#include <optional>
#include <utility>

#include "ichido/store.h"

namespace ichido::service {

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
        struct Box {
          explicit Box(Handler&& h)
              : handler(std::move(h)), ex(asio::get_associated_executor(handler)) {}
          void run() { handler(std::move(*result)); }
          Handler handler;
          Executor ex;
          std::optional<Result<T>> result;
        };
        auto box = std::make_shared<Box>(std::move(handler));
        Callback<T> cb = [box](Result<T>&& r) mutable {
          box->result.emplace(std::move(r));
          Executor ex = box->ex;
          asio::post(ex, [box = std::move(box)]() { box->run(); });
        };
        start(std::move(cb));
      },
      asio::use_awaitable);
}

}  // namespace ichido::service
