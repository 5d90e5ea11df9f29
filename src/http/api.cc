#include "http/api.h"

#include <exception>

#include "http/routes.h"

namespace ichido::http {

Api::Api(Store& store, Metrics& metrics, ApiOptions options)
    : opt_(options),
      metrics_(metrics),
      counters_(store),
      once_waits_(options.max_once_waiters_per_key, options.max_once_waiters),
      once_(store, once_waits_) {
  add_ops_routes(router_, store, metrics_);
  add_counter_routes(router_, counters_);
  add_once_routes(router_, once_);
  metrics_.add_gauge("ichido_once_waiters", "Once begins parked waiting (wait_ms) right now.",
                     [this] { return static_cast<std::int64_t>(once_waits_.total()); });
}

BeastResponse Api::to_beast(Response r, unsigned version, bool keep_alive) {
  BeastResponse res{static_cast<beast_http::status>(r.status), version};
  res.set(beast_http::field::server, "ichido");
  res.set(beast_http::field::content_type, r.content_type);
  res.set(beast_http::field::cache_control, "no-store");
  for (auto& [k, v] : r.headers) res.set(k, v);
  if (r.status == 503 && res.find(beast_http::field::retry_after) == res.end()) {
    res.set(beast_http::field::retry_after, "1");
  }
  res.body() = std::move(r.body);
  res.keep_alive(keep_alive);
  res.prepare_payload();
  metrics_.count_response(r.status);
  return res;
}

BeastResponse Api::error_response(const Error& e, unsigned version, bool keep_alive) {
  return to_beast(Response::error(e), version, keep_alive);
}

boost::asio::awaitable<BeastResponse> Api::handle(const BeastRequest& breq) {
  const unsigned version = breq.version();
  const bool keep_alive = breq.keep_alive();
  Response res;
  try {
    Request req;
    req.method = breq.method();
    req.method_string = std::string(breq.method_string());
    if (breq.target().size() > opt_.max_target_bytes) {
      co_return to_beast(Response::error(Error(errc::uri_too_long,
                                               "The request URL is too long; send long values "
                                               "in a JSON body instead.")),
                         version, keep_alive);
    }
    if (auto r = parse_target(breq.target(), req); !r.ok()) {
      co_return to_beast(Response::error(r.error()), version, keep_alive);
    }
    req.body = breq.body();
    if (auto it = breq.find(beast_http::field::authorization); it != breq.end()) {
      req.authorization = std::string(it->value());
    }
    res = co_await router_.dispatch(req);
  } catch (const std::exception& ex) {
    res = Response::error(Error(errc::internal, std::string("Internal error: ") + ex.what() +
                                                    ". Nothing is known to have changed; retry."));
  }
  co_return to_beast(std::move(res), version, keep_alive);
}

}  // namespace ichido::http
