// Admin API: tokens and the audit log (admin role, scope "*").
#include <boost/json.hpp>

#include "base/secret.h"
#include "core/names.h"
#include "http/auth.h"
#include "http/json_fields.h"
#include "http/routes.h"
#include "service/call_store.h"

namespace ichido::http {
namespace {

namespace json = boost::json;
using verb = beast_http::verb;
using service::call_store;

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

boost::asio::awaitable<Response> create_token(Store& store, Authenticator* auth, const Clock& clock,
                                              const Request& req) {
  auto body = parse_body(req.body);
  if (!body.ok()) co_return Response::error(body.error());
  Fields f(*body);
  auto ns = f.req_string("ns");
  if (!ns.ok()) co_return Response::error(ns.error());
  auto role_s = f.req_string("role");
  if (!role_s.ok()) co_return Response::error(role_s.error());
  auto role = core::parse_role(*role_s);
  if (!role.ok()) co_return Response::error(role.error());
  auto label = f.opt_string("label");
  if (!label.ok()) co_return Response::error(label.error());
  auto expires_in = f.opt_int("expires_in_ms", 1);
  if (!expires_in.ok()) co_return Response::error(expires_in.error());
  const TimeMs now = clock.now_ms();
  std::optional<TimeMs> expires_at;
  if (*expires_in) expires_at = now + **expires_in;
  const std::string secret = new_token_secret();
  auto info =
      core::make_token(new_token_id(), secret, *role, *ns, label->value_or(""), now, expires_at);
  if (!info.ok()) co_return Response::error(info.error());
  auto stored = co_await call_store<core::TokenInfo>(
      [&](auto cb) { store.create_token(std::move(*info), std::move(cb)); });
  if (!stored.ok()) co_return Response::error(stored.error());
  if (auth) auth->upsert(*stored);
  json::object o = token_json(*stored);
  o["token"] = secret;  // shown this once
  co_return Response::json(201, o);
}

boost::asio::awaitable<Response> list_tokens(Store& store) {
  auto r = co_await call_store<std::vector<core::TokenInfo>>(
      [&](auto cb) { store.list_tokens(std::move(cb)); });
  if (!r.ok()) co_return Response::error(r.error());
  json::array items;
  for (const auto& t : *r) items.push_back(token_json(t));
  co_return Response::json(200, json::object{{"items", std::move(items)}});
}

boost::asio::awaitable<Response> revoke_token(Store& store, Authenticator* auth, const Params& p) {
  std::string id = p.at("id");
  if (id.empty() || id.size() > 64) {
    co_return Response::error(invalid_field("id", "The token id is 16 hexadecimal characters."));
  }
  auto r = co_await call_store<core::TokenInfo>(
      [&](auto cb) { store.revoke_token(std::move(id), std::move(cb)); });
  if (!r.ok()) co_return Response::error(r.error());
  if (auth) auth->upsert(*r);
  co_return Response::json(200, token_json(*r));
}

// GET /v1/admin/audit?after=&before=&order=oldest|newest&actor=&action=&ns=&limit=
// Oldest first pages with next_after; newest first (the dashboard) pages with next_before.
boost::asio::awaitable<Response> list_audit(service::OverviewService& svc, const Request& req) {
  AuditQuery q;
  int limit = 100;
  if (const auto* a = req.param("after")) {
    auto v = parse_query_int(*a, "after", 0, core::kMaxJsonInteger);
    if (!v.ok()) co_return Response::error(v.error());
    q.after = *v;
  }
  if (const auto* b = req.param("before")) {
    auto v = parse_query_int(*b, "before", 1, core::kMaxJsonInteger);
    if (!v.ok()) co_return Response::error(v.error());
    q.before = *v;
  }
  if (const auto* l = req.param("limit")) {
    auto v = parse_query_int(*l, "limit", 1, kMaxAuditLimit - 1);
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
  q.limit = limit + 1;  // one more tells whether another page follows
  const bool newest = q.newest_first;
  auto r = co_await svc.audit(std::move(q));
  if (!r.ok()) co_return Response::error(r.error());
  json::object o;
  json::array items;
  const bool more = static_cast<int>(r->size()) > limit;
  if (more) r->resize(limit);
  for (const auto& e : *r) items.push_back(audit_json(e));
  o["items"] = std::move(items);
  if (more) o[newest ? "next_before" : "next_after"] = r->back().id;
  co_return Response::json(200, o);
}

}  // namespace

void add_admin_routes(Router& router, Store& store, Authenticator* auth, const Clock& clock,
                      service::OverviewService& overview) {
  router.add_admin(verb::post, "/v1/admin/tokens",
                   [&store, auth, &clock](const Request& req, const Params&) {
                     return create_token(store, auth, clock, req);
                   });
  router.add_admin(verb::get, "/v1/admin/tokens",
                   [&store](const Request&, const Params&) { return list_tokens(store); });
  router.add_admin(
      verb::delete_, "/v1/admin/tokens/{id}",
      [&store, auth](const Request&, const Params& p) { return revoke_token(store, auth, p); });
  router.add_admin(verb::get, "/v1/admin/audit", [&overview](const Request& req, const Params&) {
    return list_audit(overview, req);
  });
}

}  // namespace ichido::http
