// Admin API: tokens and the audit log (admin role, scope "*"), over service::AdminService.
#include <boost/json.hpp>

#include "http/json_fields.h"
#include "http/routes.h"

namespace ichido::http {
namespace {

namespace json = boost::json;
using verb = beast_http::verb;

json::value opt_time(const std::optional<TimeMs>& t) {
  return t ? json::value(format_rfc3339(*t)) : json::value(nullptr);
}

// A token as lists show it: never the secret, never the hash.
json::object token_json(const core::TokenInfo& t) {
  json::object o;
  o["id"] = t.id;
  o["role"] = core::to_string(t.role);
  o["ns"] = t.scope;
  o["label"] = t.label;
  o["created_at"] = format_rfc3339(t.created_at);
  o["expires_at"] = opt_time(t.expires_at);
  o["revoked_at"] = opt_time(t.revoked_at);
  return o;
}

json::object audit_json(const core::AuditEntry& e) {
  json::object o;
  o["id"] = e.id;
  o["at"] = format_rfc3339(e.at);
  o["actor"] = e.actor;
  o["action"] = e.action;
  o["ns"] = e.ns;
  o["status"] = e.status;
  o["remote"] = e.remote;
  o["detail"] = e.detail;
  return o;
}

boost::asio::awaitable<Response> create_token(service::AdminService& admin, const Request& req) {
  auto body = parse_body(req.body);
  if (!body.ok()) co_return Response::error(body.error());
  Fields f(*body);
  auto ns = f.req_string("ns");
  if (!ns.ok()) co_return Response::error(ns.error());
  auto role = f.req_string("role");
  if (!role.ok()) co_return Response::error(role.error());
  auto label = f.opt_string("label");
  if (!label.ok()) co_return Response::error(label.error());
  auto expires_in = f.opt_int(core::field::kExpiresInMs);
  if (!expires_in.ok()) co_return Response::error(expires_in.error());
  service::NewTokenRequest nt{std::move(*role), std::move(*ns), label->value_or(""), *expires_in};
  AuditNote audit = req.audit;
  if (audit) audit->status = 201;
  auto made = co_await admin.create_token(std::move(nt), std::move(audit));
  if (!made.ok()) co_return Response::error(made.error());
  json::object o = token_json(made->info);
  o["token"] = made->secret;  // shown this once
  co_return audited(Response::json(201, o), req);
}

boost::asio::awaitable<Response> list_tokens(service::AdminService& admin) {
  auto r = co_await admin.list_tokens();
  if (!r.ok()) co_return Response::error(r.error());
  json::array items;
  for (const auto& t : *r) items.push_back(token_json(t));
  co_return Response::json(200, json::object{{"items", std::move(items)}});
}

boost::asio::awaitable<Response> revoke_token(service::AdminService& admin, const Request& req,
                                              const Params& p) {
  std::string id(p.at("id"));
  auto r = co_await admin.revoke_token(std::move(id), req.audit);
  if (!r.ok()) co_return Response::error(r.error());
  co_return audited(Response::json(200, token_json(*r)), req);
}

// GET /v1/admin/audit?after=&before=&order=oldest|newest&actor=&action=&ns=&limit=
// Oldest first pages with next_after; newest first (the dashboard) pages with next_before.
boost::asio::awaitable<Response> list_audit(service::AdminService& admin, const Request& req) {
  AuditQuery q;
  int limit = 100;
  if (const auto* a = req.param("after")) {
    auto v = parse_query_int(*a, core::field::kAfter);
    if (!v.ok()) co_return Response::error(v.error());
    q.after = *v;
  }
  if (const auto* b = req.param("before")) {
    auto v = parse_query_int(*b, core::field::kBefore);
    if (!v.ok()) co_return Response::error(v.error());
    q.before = *v;
  }
  if (const auto* l = req.param("limit")) {
    auto v = parse_query_int(*l, core::field::kLimit);
    if (!v.ok()) co_return Response::error(v.error());
    limit = static_cast<int>(*v);
  }
  if (const auto* o = req.param("order")) {
    if (*o != "oldest" && *o != "newest") {
      co_return Response::error(invalid_field("order", "The order is \"oldest\" or \"newest\"."));
    }
    q.newest_first = *o == "newest";
  }
  if (const auto* a = req.param("actor")) q.actor = *a;
  if (const auto* a = req.param("action")) q.action = *a;
  if (const auto* n = req.param("ns")) q.ns = *n;
  if (q.actor.size() > 256 || q.action.size() > 256) {
    co_return Response::error(
        invalid_field(q.actor.size() > 256 ? "actor" : "action", "A filter is at most 256 bytes."));
  }
  q.limit = limit;
  auto r = co_await admin.list_audit(std::move(q));
  if (!r.ok()) co_return Response::error(r.error());
  json::object o;
  json::array items;
  for (const auto& e : r->items) items.push_back(audit_json(e));
  o["items"] = std::move(items);
  if (r->next_after) o["next_after"] = *r->next_after;
  if (r->next_before) o["next_before"] = *r->next_before;
  co_return Response::json(200, o);
}

}  // namespace

void add_admin_routes(Router& router, service::AdminService& admin) {
  router.add_admin(verb::post, "/v1/admin/tokens", [&admin](const Request& req, const Params&) {
    return create_token(admin, req);
  });
  router.add_admin(verb::get, "/v1/admin/tokens",
                   [&admin](const Request&, const Params&) { return list_tokens(admin); });
  router.add_admin(
      verb::delete_, "/v1/admin/tokens/{id}",
      [&admin](const Request& req, const Params& p) { return revoke_token(admin, req, p); });
  router.add_admin(verb::get, "/v1/admin/audit",
                   [&admin](const Request& req, const Params&) { return list_audit(admin, req); });
}

}  // namespace ichido::http
