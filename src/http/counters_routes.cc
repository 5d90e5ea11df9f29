// Handlers of the Counters section of docs/API.md: JSON <-> service calls.
#include <boost/json.hpp>

#include "core/counter.h"
#include "http/json_fields.h"
#include "http/routes.h"

namespace ichido::http {
namespace {

namespace json = boost::json;
using verb = beast_http::verb;

json::value opt_time(const std::optional<TimeMs>& t) {
  return t ? json::value(format_rfc3339(*t)) : json::value(nullptr);
}

json::object counter_json(const core::CounterInfo& c) {
  json::object o;
  o["name"] = c.name;
  o["start"] = c.config.start;
  o["max"] = c.config.max;
  o["format"] = c.config.format;
  o["period"] = core::to_string(c.config.period);
  o["timezone"] = c.config.timezone;
  o["require_key"] = c.config.require_key;
  if (c.config.period == core::Period::fiscal_year) {
    o["fiscal_year_start"] = c.config.fiscal_year_start;
  }
  o["last_value"] = c.last_value;
  o["issued_count"] = c.issued_count;
  o["voided_count"] = c.voided_count;
  o["current_period"] = c.current_period;
  o["created_at"] = format_rfc3339(c.created_at);
  return o;
}

json::object issued_json(const core::IssuedNumber& r) {
  json::object o;
  o["value"] = r.value;
  o["formatted"] = r.formatted;
  o["period"] = r.period;
  o["key"] = r.key ? json::value(*r.key) : json::value(nullptr);
  o["note"] = r.note;
  o["issued_at"] = format_rfc3339(r.issued_at);
  o["voided_at"] = opt_time(r.voided_at);
  o["void_reason"] = r.voided_at ? json::value(r.void_reason) : json::value(nullptr);
  return o;
}

// The answer of `next`, W1's hot path, written straight as JSON text (http/json_writer.h).
Response next_response(const NextReply& n) {
  const auto& r = n.record;
  char at[kRfc3339Max];
  JsonWriter w;
  w.open_object()
      .member("value", r.value)
      .member("formatted", r.formatted)
      .member("period", r.period)
      .member("key", r.key)
      .member("replayed", n.replayed)
      .member("issued_at", format_rfc3339(r.issued_at, at));
  if (r.voided_at) {  // a replay of a number voided since: say so
    w.member("voided_at", format_rfc3339(*r.voided_at, at)).member("void_reason", r.void_reason);
  }
  return Response::json(200, std::move(w.close_object()));
}

CounterRef ref_of(const Params& p) {
  return CounterRef{std::string(p.get("ns")), std::string(p.get("name"))};
}

// The command of `next` from its body (parsed on the stack: command_from_body).
Result<NextCmd> next_cmd(const Request& req, const Params& p) {
  return command_from_body(req.body, [&](const Fields& f) -> Result<NextCmd> {
    ICHIDO_FIELD(key, f.opt_string("key"));
    ICHIDO_FIELD(note, f.opt_string("note"));
    return NextCmd{ref_of(p), core::NextCommand{std::move(key), std::move(note).value_or("")}};
  });
}

// Reads the PUT body into a config; absent fields take the documented defaults (timezone: the
// server's --default-timezone; fiscal_year_start: April, only for period fiscal_year).
Result<core::CounterConfig> decode_config(const json::object& body,
                                          const std::string& default_timezone) {
  Fields f(body);
  core::CounterConfig c;
  auto start = f.opt_int(core::field::kStart);
  if (!start.ok()) return std::move(start).error();
  if (*start) c.start = **start;
  auto max = f.opt_int(core::field::kMax);
  if (!max.ok()) return std::move(max).error();
  if (*max) c.max = **max;
  auto format = f.opt_string("format");
  if (!format.ok()) return std::move(format).error();
  if (*format) c.format = std::move(**format);
  auto period = f.opt_string("period");
  if (!period.ok()) return std::move(period).error();
  if (*period) {
    auto p = core::parse_period(**period);
    if (!p.ok()) return std::move(p).error();
    c.period = *p;
  }
  auto tz = f.opt_string("timezone");
  if (!tz.ok()) return std::move(tz).error();
  c.timezone = *tz ? std::move(**tz) : default_timezone;
  auto rk = f.opt_bool("require_key");
  if (!rk.ok()) return std::move(rk).error();
  if (*rk) c.require_key = **rk;
  auto fy_start = f.opt_int(core::field::kFiscalYearStart);
  if (!fy_start.ok()) return std::move(fy_start).error();
  if (*fy_start) {
    c.fiscal_year_start = static_cast<int>(**fy_start);  // refused by the rulebook unless FY
  } else if (c.period == core::Period::fiscal_year) {
    c.fiscal_year_start = core::kDefaultFiscalYearStart;
  }
  return c;
}

#define TRY_BODY(var, expr)                                      \
  auto var##_r = (expr);                                         \
  if (!var##_r.ok()) co_return Response::error(var##_r.error()); \
  auto& var = *var##_r

boost::asio::awaitable<Response> put_counter(service::CounterService& svc,
                                             const std::string& default_timezone,
                                             const Request& req, const Params& p) {
  TRY_BODY(body, parse_body(req.body));
  TRY_BODY(config, decode_config(body, default_timezone));
  // Commands are named locals, never temporaries inside co_await: g++ 12 miscompiles
  // non-trivial temporaries in co_await expressions (bitwise copies of std::string).
  CreateCounterCmd cmd{ref_of(p), config, req.audit};
  auto r = co_await svc.create(std::move(cmd));
  if (!r.ok()) co_return Response::error(r.error());
  co_return audited(Response::json(r->created ? 201 : 200, counter_json(r->info)), req);
}

boost::asio::awaitable<Response> post_next(service::CounterService& svc, const Request& req,
                                           const Params& p) {
  TRY_BODY(cmd, next_cmd(req, p));
  auto r = co_await svc.next(std::move(cmd));
  if (!r.ok()) co_return Response::error(r.error());
  co_return next_response(*r);
}

boost::asio::awaitable<Response> post_void(service::CounterService& svc, const Request& req,
                                           const Params& p) {
  TRY_BODY(body, parse_body(req.body));
  Fields f(body);
  TRY_BODY(value, f.req_int(core::field::kValue));
  TRY_BODY(period, f.opt_string("period"));
  TRY_BODY(reason, f.opt_string("reason"));
  VoidCmd cmd{ref_of(p), value, period, reason.value_or(""), req.audit};
  auto r = co_await svc.void_number(std::move(cmd));
  if (!r.ok()) co_return Response::error(r.error());
  co_return audited(Response::json(200, issued_json(*r)), req);
}

boost::asio::awaitable<Response> post_set(service::CounterService& svc, const Request& req,
                                          const Params& p) {
  TRY_BODY(body, parse_body(req.body));
  Fields f(body);
  TRY_BODY(expected, f.req_int(core::field::kExpectedLastValue));
  TRY_BODY(last, f.req_int(core::field::kLastValue));
  SetCmd cmd{ref_of(p), expected, last, req.audit};
  auto r = co_await svc.set_last_value(std::move(cmd));
  if (!r.ok()) co_return Response::error(r.error());
  co_return audited(Response::json(200, counter_json(*r)), req);
}

boost::asio::awaitable<Response> get_counter(service::CounterService& svc, const Request&,
                                             const Params& p) {
  CounterRef ref = ref_of(p);
  auto r = co_await svc.get(std::move(ref));
  if (!r.ok()) co_return Response::error(r.error());
  co_return Response::json(200, counter_json(*r));
}

boost::asio::awaitable<Response> list_counters(service::CounterService& svc, const Request&,
                                               const Params& p) {
  std::string ns = ref_of(p).ns;
  auto r = co_await svc.list(std::move(ns));
  if (!r.ok()) co_return Response::error(r.error());
  json::array items;
  for (const auto& c : *r) items.push_back(counter_json(c));
  co_return Response::json(200, json::object{{"items", std::move(items)}});
}

boost::asio::awaitable<Response> get_issued(service::CounterService& svc, const Request& req,
                                            const Params& p) {
  IssuedQuery q;
  q.ref = ref_of(p);
  if (const auto* key = req.param("key")) q.key = *key;
  if (const auto* period = req.param("period")) q.period = *period;
  if (const auto* after = req.param("after")) {
    TRY_BODY(v, parse_query_int(*after, core::field::kAfter));
    q.after = v;
  }
  if (const auto* limit = req.param("limit")) {
    TRY_BODY(v, parse_query_int(*limit, core::field::kLimit));
    q.limit = static_cast<int>(v);
  }
  auto r = co_await svc.issued(std::move(q));
  if (!r.ok()) co_return Response::error(r.error());
  json::array items;
  for (const auto& rec : r->items) items.push_back(issued_json(rec));
  json::object o{{"items", std::move(items)}};
  if (r->next_after) o["next_after"] = *r->next_after;  // only when more items may follow
  co_return Response::json(200, o);
}

}  // namespace

void add_counter_routes(Router& router, service::CounterService& svc,
                        std::string default_timezone) {
  auto bind = [&svc](auto fn) {
    return [&svc, fn](const Request& req, const Params& p) { return fn(svc, req, p); };
  };
  const std::string base = "/v1/ns/{ns}/counters";
  router.add(verb::get, base, bind(list_counters));
  router.add_admin(verb::put, base + "/{name}",
                   [&svc, tz = std::move(default_timezone)](const Request& req, const Params& p) {
                     return put_counter(svc, tz, req, p);
                   });
  router.add(verb::get, base + "/{name}", bind(get_counter));
  router.add(verb::post, base + "/{name}/next", bind(post_next));
  router.add(verb::get, base + "/{name}/issued", bind(get_issued));
  router.add_admin(verb::post, base + "/{name}/void", bind(post_void));
  router.add_admin(verb::post, base + "/{name}/set", bind(post_set));
}

}  // namespace ichido::http
