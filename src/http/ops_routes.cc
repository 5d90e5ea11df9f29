// Operations endpoints: liveness, readiness, Prometheus metrics (over service::OpsService).
#include <boost/json.hpp>

#include "http/routes.h"

namespace ichido::http {

void add_ops_routes(Router& router, service::OpsService& ops, const Metrics& metrics) {
  using verb = beast_http::verb;
  router.add(verb::get, "/healthz",
             [&ops](const Request&, const Params&) -> boost::asio::awaitable<Response> {
               auto r = ops.healthy();
               if (!r.ok()) {
                 // Always 503 (also for store_corrupt): a supervisor restarts on it, and the
                 // body says what an operator must do.
                 auto res = Response::error(r.error());
                 res.status = 503;
                 co_return res;
               }
               co_return Response::json(200, boost::json::object{{"status", "ok"}});
             });
  router.add(verb::get, "/readyz",
             [&ops](const Request&, const Params&) -> boost::asio::awaitable<Response> {
               auto r = ops.ready();
               if (!r.ok()) {
                 auto res = Response::error(r.error());
                 res.status = 503;  // not ready, whatever the reason (also store_corrupt)
                 co_return res;
               }
               co_return Response::json(200, boost::json::object{{"status", "ready"}});
             });
  router.add(verb::get, "/metrics",
             [&ops, &metrics](const Request&, const Params&) -> boost::asio::awaitable<Response> {
               co_return Response::text(200, metrics.render(ops.stats()),
                                        "text/plain; version=0.0.4");
             });
}

}  // namespace ichido::http
