// Api: the whole HTTP API as one function from a Beast request to a Beast response. It owns the
// services and the route table; the socket side (server.h) only moves bytes. Built once at
// start-up; handle() is safe to call concurrently from any connection.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "http/message.h"
#include "http/metrics.h"
#include "http/router.h"
#include "service/counter_service.h"
#include "service/lock_service.h"

namespace ichido::http {

struct ApiOptions {
  std::size_t max_target_bytes = 8192;  // longer request targets get 414 uri_too_long
  service::LockLimits locks;            // waiter limits (--max-waiters-per-lock, --max-waiters)
};

class Api {
 public:
  Api(Store& store, Metrics& metrics, ApiOptions options = {});

  // Never throws: a failure inside a handler becomes a 500 internal error response.
  boost::asio::awaitable<BeastResponse> handle(const BeastRequest& req);
  // Builds the response for an error found before the request could be routed.
  BeastResponse error_response(const Error& e, unsigned version, bool keep_alive);
  const Router& router() const { return router_; }
  // True for requests that may park for a long time (lock acquire): the server watches their
  // connection while they wait, so a client that goes away leaves the line (see server.cc).
  static bool may_wait(const BeastRequest& req);
  const service::LockService& locks() const { return locks_; }

 private:
  BeastResponse to_beast(Response r, unsigned version, bool keep_alive);

  ApiOptions opt_;
  Metrics& metrics_;
  service::CounterService counters_;
  service::LockService locks_;
  Router router_;
};

}  // namespace ichido::http
