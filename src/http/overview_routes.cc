// Calls about the caller and across namespaces (for the dashboard and monitoring):
//   GET /v1/whoami      the caller's token: id, role, namespace scope (never the secret)
//   GET /v1/namespaces  counts per namespace the caller may see (all with scope "*", else its own)
// Both need only an active token, whatever its scope (Router::add_any_scope).
#include <boost/json.hpp>

#include "http/routes.h"

namespace ichido::http {
namespace {

namespace json = boost::json;

json::value opt_time(const std::optional<TimeMs>& t) {
  return t ? json::value(format_rfc3339(*t)) : json::value(nullptr);
}

json::object summary_json(const NamespaceSummary& s) {
  json::object once{
      {"processing", s.once.processing}, {"expired", s.once.expired}, {"pending", s.once.pending},
      {"completed", s.once.completed},   {"dead", s.once.dead},       {"capped", s.once.capped}};
  json::object o;
  o["ns"] = s.ns;
  o["counters"] = s.counters;
  o["locks_held"] = s.locks_held;
  o["once"] = std::move(once);
  o["oldest_expired_at"] = opt_time(s.once.oldest_expired_lease);
  return o;
}

boost::asio::awaitable<Response> whoami(const Request& req) {
  json::object o;
  if (!req.principal) {
    o = json::object{{"id", "no-auth"}, {"role", "admin"},       {"ns", "*"},
                     {"label", ""},     {"expires_at", nullptr}, {"auth", false}};
  } else {
    const core::TokenInfo& t = *req.principal;
    o = json::object{{"id", t.id},       {"role", core::to_string(t.role)},      {"ns", t.scope},
                     {"label", t.label}, {"expires_at", opt_time(t.expires_at)}, {"auth", true}};
  }
  co_return Response::json(200, o);
}

boost::asio::awaitable<Response> namespaces(service::OverviewService& svc, const Request& req) {
  std::optional<std::string> only;
  if (req.principal && req.principal->scope != core::kAllNamespaces) only = req.principal->scope;
  auto r = co_await svc.summaries(std::move(only));
  if (!r.ok()) co_return Response::error(r.error());
  json::array items;
  for (const auto& s : *r) items.push_back(summary_json(s));
  co_return Response::json(200, json::object{{"items", std::move(items)},
                                             {"count_cap", service::OverviewService::kCountCap}});
}

std::string escape_label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

void add_overview_routes(Router& router, service::OverviewService& overview) {
  router.add_any_scope("/v1/whoami", [](const Request& req, const Params&) { return whoami(req); });
  router.add_any_scope("/v1/namespaces", [&overview](const Request& req, const Params&) {
    return namespaces(overview, req);
  });
}

std::string render_once_gauges(const service::OverviewService::Snapshot& s) {
  std::string out;
  out +=
      "# HELP ichido_once_records Once records by namespace and state (processing = live lease, "
      "expired = lapsed lease); refreshed every 15 s, each count capped at 100000.\n";
  out += "# TYPE ichido_once_records gauge\n";
  for (const auto& n : s.namespaces) {
    const std::string ns = escape_label(n.ns);
    const std::pair<const char*, std::int64_t> states[] = {{"processing", n.once.processing},
                                                           {"expired", n.once.expired},
                                                           {"pending", n.once.pending},
                                                           {"dead", n.once.dead},
                                                           {"completed", n.once.completed}};
    for (const auto& [state, v] : states) {
      out += "ichido_once_records{ns=\"" + ns + "\",state=\"" + state + "\"} " + std::to_string(v) +
             "\n";
    }
  }
  out +=
      "# HELP ichido_once_oldest_expired_seconds Age of the oldest lapsed lease of a processing "
      "record per namespace (0: none), at the last refresh.\n";
  out += "# TYPE ichido_once_oldest_expired_seconds gauge\n";
  for (const auto& n : s.namespaces) {
    const std::int64_t age =
        n.once.oldest_expired_lease ? (s.taken_at - *n.once.oldest_expired_lease) / 1000 : 0;
    out += "ichido_once_oldest_expired_seconds{ns=\"" + escape_label(n.ns) + "\"} " +
           std::to_string(std::max<std::int64_t>(age, 0)) + "\n";
  }
  out += "# HELP ichido_once_snapshot_age_seconds Seconds since the once gauges were read.\n";
  out += "# TYPE ichido_once_snapshot_age_seconds gauge\n";
  const TimeMs now = SystemClock::instance().now_ms();
  out += "ichido_once_snapshot_age_seconds " +
         std::to_string(s.taken_at ? (now - s.taken_at) / 1000 : -1) + "\n";
  return out;
}

}  // namespace ichido::http
