// Namespace settings: GET /v1/ns/{ns}/settings (reader), PUT /v1/ns/{ns}/settings (admin,
// audited). Today one setting: once_retention_ms, how long completed and dead once records of
// the namespace are kept before the background purge deletes them (null: the server's
// --once-retention). The answers also show the server's defaults that apply in the namespace:
// the effective retention and default_timezone (--default-timezone, read-only), the zone a
// counter created without "timezone" takes.
#include <boost/json.hpp>

#include "core/fields.h"
#include "http/json_fields.h"
#include "http/routes.h"

namespace ichido::http {
namespace {

namespace json = boost::json;

json::object settings_json(const std::string& ns, const NamespaceSettings& s,
                           std::int64_t default_retention_ms, const std::string& default_timezone) {
  json::object o;
  o["ns"] = ns;
  o["once_retention_ms"] =
      s.once_retention_ms ? json::value(*s.once_retention_ms) : json::value(nullptr);
  o["effective_once_retention_ms"] = s.once_retention_ms.value_or(default_retention_ms);
  o["default_timezone"] = default_timezone;
  return o;
}

}  // namespace

void add_settings_routes(Router& router, service::SettingsService& svc,
                         std::int64_t default_retention_ms, std::string default_timezone) {
  using verb = beast_http::verb;
  router.add(verb::get, "/v1/ns/{ns}/settings",
             [&svc, default_retention_ms, default_timezone](
                 const Request&, const Params& p) -> boost::asio::awaitable<Response> {
               const std::string ns(p.at("ns"));
               auto r = co_await svc.get(ns);
               if (!r.ok()) co_return Response::error(r.error());
               co_return Response::json(
                   200, settings_json(ns, *r, default_retention_ms, default_timezone));
             });
  router.add_admin(
      verb::put, "/v1/ns/{ns}/settings",
      [&svc, default_retention_ms, default_timezone](
          const Request& req, const Params& p) -> boost::asio::awaitable<Response> {
        auto body = parse_body(req.body);
        if (!body.ok()) co_return Response::error(body.error());
        Fields f(*body);
        if (!f.raw("once_retention_ms")) {
          co_return Response::error(invalid_field(
              "once_retention_ms",
              "Send once_retention_ms: a number of milliseconds, or null for the server's "
              "default."));
        }
        auto retention = f.opt_int(core::field::kOnceRetentionMs);
        if (!retention.ok()) co_return Response::error(retention.error());
        const std::string ns(p.at("ns"));
        auto r = co_await svc.put(ns, NamespaceSettings{*retention}, req.audit);
        if (!r.ok()) co_return Response::error(r.error());
        co_return audited(
            Response::json(200, settings_json(ns, *r, default_retention_ms, default_timezone)),
            req);
      });
}

}  // namespace ichido::http
