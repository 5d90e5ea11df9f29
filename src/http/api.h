// Api: the whole HTTP API as one function from a Beast request to a Beast response. It owns the
// services and the route table; the socket side (server.h) only moves bytes. Built once at
// start-up; handle() is safe to call concurrently from any connection.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "http/message.h"
#include "http/metrics.h"
#include "http/router.h"
#include "service/counter_service.h"
#include "service/once_service.h"
#include "service/wait_list.h"

namespace ichido::http {

struct ApiOptions {
  std::size_t max_target_bytes = 8192;  // longer request targets get 414 uri_too_long
  // Parked once begins (wait_ms): beyond these, begin answers 429 too_many_waiters.
  std::size_t max_once_waiters_per_key = 1000;
  std::size_t max_once_waiters = 10000;
};

class Api {
 public:
  Api(Store& store, Metrics& metrics, ApiOptions options = {});

  // Never throws: a failure inside a handler becomes a 500 internal error response.
  boost::asio::awaitable<BeastResponse> handle(const BeastRequest& req);
  // Builds the response for an error found before the request could be routed.
  BeastResponse error_response(const Error& e, unsigned version, bool keep_alive);
  const Router& router() const { return router_; }
  service::OnceService& once() { return once_; }

 private:
  BeastResponse to_beast(Response r, unsigned version, bool keep_alive);

  ApiOptions opt_;
  Metrics& metrics_;
  service::CounterService counters_;
  service::WaitList once_waits_;
  service::OnceService once_;
  Router router_;
};

}  // namespace ichido::http
