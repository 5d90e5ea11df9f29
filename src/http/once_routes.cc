// Handlers of the Once section of docs/API.md: JSON <-> OnceService calls.
#include <boost/json.hpp>

#include "core/once.h"
#include "http/json_fields.h"
#include "http/routes.h"

namespace ichido::http {
namespace {

namespace json = boost::json;
using verb = beast_http::verb;

#define TRY_BODY(var, expr)                                      \
  auto var##_r = (expr);                                         \
  if (!var##_r.ok()) co_return Response::error(var##_r.error()); \
  auto& var = *var##_r

json::value opt_time(const std::optional<TimeMs>& t) {
  return t ? json::value(format_rfc3339(*t)) : json::value(nullptr);
}

// A stored result: JSON text this server serialized itself, so it parses; null if it ever
// did not (it cannot be answered as anything better).
json::value result_json(const std::optional<std::string>& text) {
  if (!text) return nullptr;
  boost::system::error_code ec;
  json::value v = json::parse(*text, ec);
  return ec ? json::value(nullptr) : v;
}

json::object record_json(const core::OnceRecord& r) {
  json::object o;
  o["key"] = r.key;
  o["state"] = core::to_string(r.state);
  o["owner"] = r.owner;
  o["attempt"] = r.attempt;
  o["max_attempts"] = r.max_attempts;
  o["token"] = r.token;
  o["lease_expires_at"] = r.state == core::OnceState::processing
                              ? json::value(format_rfc3339(r.lease_expires_at))
                              : json::value(nullptr);
  o["result"] = result_json(r.result);
  o["last_error"] = r.last_error.empty() ? json::value(nullptr) : json::value(r.last_error);
  o["fingerprint"] = r.fingerprint ? json::value(*r.fingerprint) : json::value(nullptr);
  o["created_at"] = format_rfc3339(r.created_at);
  o["updated_at"] = format_rfc3339(r.updated_at);
  o["completed_at"] =
      r.state == core::OnceState::completed ? opt_time(r.finished_at) : json::value(nullptr);
  o["dead_at"] = r.state == core::OnceState::dead ? opt_time(r.finished_at) : json::value(nullptr);
  return o;
}

std::string ns_of(const Params& p) { return std::string(p.get("ns")); }

// A time, or null.
JsonWriter& time_member(JsonWriter& w, std::string_view name, const std::optional<TimeMs>& t) {
  char at[kRfc3339Max];
  return t ? w.member(name, format_rfc3339(*t, at)) : w.member(name, nullptr);
}

// The answers below are W2's hot path: written straight as JSON text (http/json_writer.h).
Response begin_response(const BeginOnceReply& b) {
  char at[kRfc3339Max];
  JsonWriter w;
  w.open_object().member("outcome", core::to_string(b.outcome));
  const auto& r = b.record;
  switch (b.outcome) {
    case core::BeginOutcome::acquired:
      w.member("token", r.token)
          .member("attempt", r.attempt)
          .member("lease_expires_at", format_rfc3339(r.lease_expires_at, at));
      if (b.replayed) w.member("replayed", true);
      break;
    case core::BeginOutcome::in_progress: {
      w.member("owner", r.owner)
          .member("lease_expires_at", format_rfc3339(r.lease_expires_at, at))
          .member("retry_after_ms", b.retry_after_ms);
      auto res = Response::json(200, std::move(w.close_object()));
      // The same advice in whole seconds, rounded up (Retry-After has no fractions).
      const auto secs = std::max<std::int64_t>(1, (b.retry_after_ms + 999) / 1000);
      res.headers.emplace_back("Retry-After", std::to_string(secs));
      return res;
    }
    case core::BeginOutcome::completed:
      w.member_json("result", json::serialize(result_json(r.result)));
      time_member(w, "completed_at", r.finished_at);
      break;
    case core::BeginOutcome::dead:
      w.member("attempts", r.attempt).member("last_error", r.last_error);
      break;
  }
  return Response::json(200, std::move(w.close_object()));
}

boost::asio::awaitable<Response> post_begin(service::OnceService& svc, const Request& req,
                                            const Params& p) {
  std::int64_t wait_ms = 0;
  auto cmd = command_from_body(req.body, [&](const Fields& f) -> Result<BeginOnceCmd> {
    ICHIDO_FIELD(key, f.req_string("key"));
    ICHIDO_FIELD(owner, f.opt_string("owner"));
    ICHIDO_FIELD(lease, f.opt_int(core::field::kLeaseMs));
    ICHIDO_FIELD(fingerprint, f.opt_string("fingerprint"));
    ICHIDO_FIELD(wait, f.opt_int(core::field::kWaitMs));
    ICHIDO_FIELD(max_attempts, f.opt_int(core::field::kMaxAttempts));
    ICHIDO_FIELD(request_id, f.opt_string("request_id"));
    wait_ms = wait.value_or(0);
    return BeginOnceCmd{
        OnceRef{ns_of(p), std::move(key)},
        core::BeginCommand{std::move(owner).value_or(""), lease.value_or(core::kDefaultLeaseMs),
                           std::move(fingerprint), max_attempts.value_or(core::kDefaultMaxAttempts),
                           std::move(request_id)}};
  });
  if (!cmd.ok()) co_return Response::error(cmd.error());
  // Named locals, never temporaries inside co_await (g++ 12; see counters_routes.cc).
  auto r = co_await svc.begin(std::move(*cmd), wait_ms, req.client);
  if (!r.ok()) co_return Response::error(r.error());
  co_return begin_response(*r);
}

boost::asio::awaitable<Response> post_complete(service::OnceService& svc, const Request& req,
                                               const Params& p) {
  auto cmd = command_from_body(req.body, [&](const Fields& f) -> Result<CompleteOnceCmd> {
    ICHIDO_FIELD(key, f.req_string("key"));
    ICHIDO_FIELD(token, f.req_int(core::field::kOnceToken));
    const json::value* raw = f.raw("result");
    return CompleteOnceCmd{OnceRef{ns_of(p), std::move(key)}, token,
                           raw ? json::serialize(*raw) : std::string("null")};
  });
  if (!cmd.ok()) co_return Response::error(cmd.error());
  auto r = co_await svc.complete(std::move(*cmd));
  if (!r.ok()) co_return Response::error(r.error());
  JsonWriter w;
  time_member(w.open_object().member("outcome", "completed"), "completed_at", r->finished_at);
  co_return Response::json(200, std::move(w.close_object()));
}

boost::asio::awaitable<Response> post_fail(service::OnceService& svc, const Request& req,
                                           const Params& p) {
  auto cmd = command_from_body(req.body, [&](const Fields& f) -> Result<FailOnceCmd> {
    ICHIDO_FIELD(key, f.req_string("key"));
    ICHIDO_FIELD(token, f.req_int(core::field::kOnceToken));
    ICHIDO_FIELD(error, f.opt_string("error"));
    ICHIDO_FIELD(retry, f.opt_bool("retry"));
    return FailOnceCmd{OnceRef{ns_of(p), std::move(key)}, token, std::move(error).value_or(""),
                       retry.value_or(true)};
  });
  if (!cmd.ok()) co_return Response::error(cmd.error());
  auto r = co_await svc.fail(std::move(*cmd));
  if (!r.ok()) co_return Response::error(r.error());
  JsonWriter w;
  w.open_object()
      .member("outcome", core::to_string(r->state))
      .member("attempt", r->attempt)
      .member("max_attempts", r->max_attempts);
  co_return Response::json(200, std::move(w.close_object()));
}

boost::asio::awaitable<Response> post_renew(service::OnceService& svc, const Request& req,
                                            const Params& p) {
  auto cmd = command_from_body(req.body, [&](const Fields& f) -> Result<RenewOnceCmd> {
    ICHIDO_FIELD(key, f.req_string("key"));
    ICHIDO_FIELD(token, f.req_int(core::field::kOnceToken));
    ICHIDO_FIELD(lease, f.opt_int(core::field::kLeaseMs));
    return RenewOnceCmd{OnceRef{ns_of(p), std::move(key)}, token,
                        lease.value_or(core::kDefaultLeaseMs)};
  });
  if (!cmd.ok()) co_return Response::error(cmd.error());
  auto r = co_await svc.renew(std::move(*cmd));
  if (!r.ok()) co_return Response::error(r.error());
  co_return lease_response(r->token, r->lease_expires_at);
}

boost::asio::awaitable<Response> post_reset(service::OnceService& svc, const Request& req,
                                            const Params& p) {
  TRY_BODY(body, parse_body(req.body));
  Fields f(body);
  TRY_BODY(key, f.req_string("key"));
  ResetOnceCmd cmd{OnceRef{ns_of(p), key}, req.audit};
  auto r = co_await svc.reset(std::move(cmd));
  if (!r.ok()) co_return Response::error(r.error());
  json::object o{{"reset", true}, {"key", r->key}, {"previous", record_json(*r)}};
  co_return audited(Response::json(200, o), req);
}

// GET ?key=K → one record; otherwise a list (?state=…&limit=N&after=K).
boost::asio::awaitable<Response> get_once(service::OnceService& svc, const Request& req,
                                          const Params& p) {
  if (const auto* key = req.param("key")) {
    OnceRef ref{ns_of(p), *key};
    auto r = co_await svc.get(std::move(ref));
    if (!r.ok()) co_return Response::error(r.error());
    co_return Response::json(200, record_json(*r));
  }
  OnceQuery q;
  q.ns = ns_of(p);
  if (const auto* state = req.param("state")) {
    TRY_BODY(filter, core::parse_once_filter(*state));
    q.filter = filter;
  }
  if (const auto* limit = req.param("limit")) {
    TRY_BODY(v, parse_query_int(*limit, core::field::kLimit));
    q.limit = static_cast<int>(v);
  }
  if (const auto* after = req.param("after")) q.after = *after;
  auto r = co_await svc.list(std::move(q));
  if (!r.ok()) co_return Response::error(r.error());
  json::array items;
  for (const auto& rec : r->items) items.push_back(record_json(rec));
  json::object o{{"items", std::move(items)}};
  if (r->next_after) o["next_after"] = *r->next_after;
  co_return Response::json(200, o);
}

}  // namespace

void add_once_routes(Router& router, service::OnceService& svc) {
  auto bind = [&svc](auto fn) {
    return [&svc, fn](const Request& req, const Params& p) { return fn(svc, req, p); };
  };
  const std::string base = "/v1/ns/{ns}/once";
  router.add(verb::get, base, bind(get_once));
  router.add(verb::post, base + "/begin", bind(post_begin));
  router.add(verb::post, base + "/complete", bind(post_complete));
  router.add(verb::post, base + "/fail", bind(post_fail));
  router.add(verb::post, base + "/renew", bind(post_renew));
  router.add_admin(verb::post, base + "/reset", bind(post_reset));  // audited
}

}  // namespace ichido::http
