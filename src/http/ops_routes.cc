// Operations endpoints: liveness, readiness, Prometheus metrics (over service::OpsService).
#include <boost/json.hpp>

#include "http/routes.h"

namespace ichido::http {

void add_ops_routes(Router& router, service::OpsService& ops, const Metrics& metrics) {
  using verb = beast_http::verb;
  router.add(verb::get, "/healthz",
             [](const Request&, const Params&) -> boost::asio::awaitable<Response> {
               co_return Response::json(200, boost::json::object{{"status", "ok"}});
             });
  router.add(verb::get, "/readyz",
             [&ops](const Request&, const Params&) -> boost::asio::awaitable<Response> {
               auto r = ops.ready();
               if (!r.ok()) co_return Response::error(r.error());
               co_return Response::json(200, boost::json::object{{"status", "ready"}});
             });
  router.add(verb::get, "/metrics",
             [&ops, &metrics](const Request&, const Params&) -> boost::asio::awaitable<Response> {
               co_return Response::text(200, metrics.render(ops.stats()),
                                        "text/plain; version=0.0.4");
             });
}

}  // namespace ichido::http
