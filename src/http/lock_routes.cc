// Handlers of the Locks section of docs/API.md: JSON <-> LockService calls.
#include <boost/json.hpp>

#include "core/lock.h"
#include "http/json_fields.h"
#include "http/routes.h"

namespace ichido::http {
namespace {

namespace json = boost::json;
using verb = beast_http::verb;

LockRef ref_of(const Params& p) {
  return LockRef{std::string(p.get("ns")), std::string(p.get("name"))};
}

// The holder of a lock, as the member `name` of the open object.
JsonWriter& holder_member(JsonWriter& w, std::string_view name, const core::LockRecord& r) {
  char at[kRfc3339Max];
  return w.open_object(name)
      .member("owner", r.owner)
      .member("lease_expires_at", format_rfc3339(r.lease_expires_at, at))
      .close_object();
}

json::object held_json(const core::LockRecord& r) {
  json::object o;
  o["name"] = r.name;
  o["held"] = true;
  o["owner"] = r.owner;
  o["token"] = r.token;
  o["acquired_at"] = format_rfc3339(r.acquired_at);
  o["lease_expires_at"] = format_rfc3339(r.lease_expires_at);
  return o;
}

#define TRY_BODY(var, expr)                                      \
  auto var##_r = (expr);                                         \
  if (!var##_r.ok()) co_return Response::error(var##_r.error()); \
  auto& var = *var##_r

// Commands are named locals, never temporaries inside co_await (g++ 12 miscompiles those).
boost::asio::awaitable<Response> post_acquire(service::LockService& svc, const Request& req,
                                              const Params& p) {
  auto cmd =
      command_from_body(req.body, [&](const Fields& f) -> Result<service::AcquireLockRequest> {
        ICHIDO_FIELD(owner, f.opt_string("owner"));
        ICHIDO_FIELD(wait_ms, f.opt_int(core::field::kWaitMs));
        ICHIDO_FIELD(lease_ms, f.opt_int(core::field::kLeaseMs));
        ICHIDO_FIELD(request_id, f.opt_string("request_id"));
        return service::AcquireLockRequest{ref_of(p),
                                           std::move(owner).value_or(""),
                                           wait_ms.value_or(0),
                                           lease_ms.value_or(core::kLockDefaultLeaseMs),
                                           std::move(request_id),
                                           req.client};
      });
  if (!cmd.ok()) co_return Response::error(cmd.error());
  auto r = co_await svc.acquire(std::move(*cmd));
  if (!r.ok()) co_return Response::error(r.error());
  // W3's hot path, written straight as JSON text (http/json_writer.h).
  JsonWriter w;
  w.open_object().member("acquired", r->acquired);
  if (r->acquired) {
    char at[kRfc3339Max];
    w.member("token", r->record->token)
        .member("lease_expires_at", format_rfc3339(r->record->lease_expires_at, at));
    if (r->replayed) w.member("replayed", true);
  } else if (r->record) {
    holder_member(w, "holder", *r->record);
  } else {
    w.member("holder", nullptr);
  }
  co_return Response::json(200, std::move(w.close_object()));
}

boost::asio::awaitable<Response> post_release(service::LockService& svc, const Request& req,
                                              const Params& p) {
  auto cmd = command_from_body(req.body, [&](const Fields& f) -> Result<ReleaseLockCmd> {
    ICHIDO_FIELD(token, f.req_int(core::field::kLockToken));
    return ReleaseLockCmd{ref_of(p), token};
  });
  if (!cmd.ok()) co_return Response::error(cmd.error());
  auto r = co_await svc.release(std::move(*cmd));
  if (!r.ok()) co_return Response::error(r.error());
  JsonWriter w;
  co_return Response::json(200, std::move(w.open_object().member("released", true).close_object()));
}

boost::asio::awaitable<Response> post_renew(service::LockService& svc, const Request& req,
                                            const Params& p) {
  auto cmd = command_from_body(req.body, [&](const Fields& f) -> Result<RenewLockCmd> {
    ICHIDO_FIELD(token, f.req_int(core::field::kLockToken));
    ICHIDO_FIELD(lease_ms, f.opt_int(core::field::kLeaseMs));
    return RenewLockCmd{ref_of(p), token, lease_ms.value_or(core::kLockDefaultLeaseMs)};
  });
  if (!cmd.ok()) co_return Response::error(cmd.error());
  auto r = co_await svc.renew(std::move(*cmd));
  if (!r.ok()) co_return Response::error(r.error());
  co_return lease_response(r->token, r->lease_expires_at);
}

boost::asio::awaitable<Response> post_force_release(service::LockService& svc, const Request& req,
                                                    const Params& p) {
  TRY_BODY(body, parse_body(req.body));
  (void)body;
  ForceReleaseCmd cmd{ref_of(p), req.audit};
  auto r = co_await svc.force_release(std::move(cmd));
  if (!r.ok()) co_return Response::error(r.error());
  JsonWriter w;
  w.open_object().member("released", r->released);
  if (r->previous) holder_member(w, "previous", *r->previous);
  co_return audited(Response::json(200, std::move(w.close_object())), req);
}

boost::asio::awaitable<Response> get_lock(service::LockService& svc, const Request& req,
                                          const Params& p) {
  std::optional<std::int64_t> token;
  if (const auto* t = req.param("token")) {
    TRY_BODY(v, parse_query_int(*t, core::field::kLockToken));
    token = v;
  }
  LockRef ref = ref_of(p);
  auto r = co_await svc.get(std::move(ref));
  if (!r.ok()) co_return Response::error(r.error());
  json::object o;
  if (r->holder) {
    o = held_json(*r->holder);
  } else {
    o["name"] = ref_of(p).name;
    o["held"] = false;
  }
  o["waiters"] = static_cast<std::int64_t>(r->waiters);
  if (token) o["holder"] = r->holder.has_value() && r->holder->token == *token;
  co_return Response::json(200, o);
}

boost::asio::awaitable<Response> list_locks(service::LockService& svc, const Request&,
                                            const Params& p) {
  std::string ns = ref_of(p).ns;
  auto r = co_await svc.list(std::move(ns));
  if (!r.ok()) co_return Response::error(r.error());
  json::array items;
  for (const auto& l : *r) {
    json::object o = held_json(*l.holder);
    o["waiters"] = static_cast<std::int64_t>(l.waiters);
    items.push_back(std::move(o));
  }
  co_return Response::json(200, json::object{{"items", std::move(items)}});
}

}  // namespace

Response lease_response(std::int64_t token, TimeMs lease_expires_at) {
  char at[kRfc3339Max];
  JsonWriter w;
  w.open_object()
      .member("token", token)
      .member("lease_expires_at", format_rfc3339(lease_expires_at, at));
  return Response::json(200, std::move(w.close_object()));
}

void add_lock_routes(Router& router, service::LockService& svc) {
  auto bind = [&svc](auto fn) {
    return [&svc, fn](const Request& req, const Params& p) { return fn(svc, req, p); };
  };
  const std::string base = "/v1/ns/{ns}/locks";
  router.add(verb::get, base, bind(list_locks));
  router.add(verb::get, base + "/{name}", bind(get_lock));
  router.add(verb::post, base + "/{name}/acquire", bind(post_acquire));
  router.add(verb::post, base + "/{name}/release", bind(post_release));
  router.add(verb::post, base + "/{name}/renew", bind(post_renew));
  router.add_admin(verb::post, base + "/{name}/force-release", bind(post_force_release));
}

}  // namespace ichido::http
