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
        auto ex = asio::get_associated_executor(handler);
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        // The result crosses threads boxed: asio moves a posted handler several times (into its
        // operation, out of it, through the strand), and a boxed result moves as one pointer
        // instead of a variant of strings each time.
        Callback<T> cb = [h, ex](Result<T>&& r) {
          asio::post(ex, [h, r = std::make_unique<Result<T>>(std::move(r))]() mutable {
            (*h)(std::move(*r));
          });
        };
        start(std::move(cb));
      },
      asio::use_awaitable);
}

}  // namespace ichido::service
