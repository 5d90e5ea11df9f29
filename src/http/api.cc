#include "http/api.h"

#include <boost/asio/this_coro.hpp>
#include <boost/beast/core/string.hpp>
#include <chrono>
#include <exception>

#include "core/origin.h"
#include "http/one_client.h"
#include "http/routes.h"

namespace ichido::http {

Api::Api(Store& store, Metrics& metrics, ApiOptions options)
    : opt_(options),
      metrics_(metrics),
      admin_(store, *options.clock, options.auth),
      ops_(store),
      counters_(store),
      locks_(store, options.locks),
      once_waits_(options.max_once_waiters_per_key, options.max_once_waiters),
      once_(store, once_waits_),
      overview_(store),
      settings_(store) {
  add_ops_routes(router_, ops_, metrics_);
  add_counter_routes(router_, counters_, opt_.default_timezone);
  add_once_routes(router_, once_);
  add_lock_routes(router_, locks_);
  add_admin_routes(router_, admin_);
  add_overview_routes(router_, overview_);
  add_settings_routes(router_, settings_, opt_.default_once_retention_ms, opt_.default_timezone);
  add_web_routes(router_);  // last: API routes are matched first
  for (const auto& r : router_.routes()) {
    const std::string m(beast_http::to_string(r.method));
    if ((", " + cors_methods_ + ",").find(", " + m + ",") != std::string::npos) continue;
    if (!cors_methods_.empty()) cors_methods_ += ", ";
    cors_methods_ += m;
  }
  metrics_.add_gauge("ichido_once_waiters", "Once begins parked waiting (wait_ms) right now.",
                     [this] { return static_cast<std::int64_t>(once_waits_.total()); });
  metrics_.add_gauge("ichido_lock_waiters", "Lock acquires parked waiting (wait_ms) right now.",
                     [this] { return static_cast<std::int64_t>(locks_.total_waiters()); });
  if (opt_.request_log) {
    metrics_.add_counter(
        "ichido_request_log_dropped_total",
        "Request log lines dropped because the log's writer could not keep up.",
        [log = opt_.request_log] { return static_cast<std::int64_t>(log->dropped()); });
  }
  metrics_.add_collector([this] { return render_once_gauges(*overview_.snapshot()); });
}

namespace {

// False only when the JSON body provably does not ask for a wait: `wait_ms` defaults to 0, so a
// body that never names it, or names it only with the plain value 0, cannot park. The body is
// read as bytes, before it is parsed, and whatever this scan cannot vouch for counts as a possible
// wait: an escape anywhere (a key may be spelled with \u escapes), a value other than a bare 0
// (5000, -0, 0.0, "0", garbage: the handler decides), a nested object that names it. Without an
// escape no string can hold a quote, so every `"wait_ms"` found is a whole string, and one that
// is followed by ':' is a key.
bool body_may_ask_to_wait(std::string_view body) {
  if (body.find('\\') != std::string_view::npos) return true;
  static constexpr std::string_view kKey = "\"wait_ms\"";
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  for (auto at = body.find(kKey); at != std::string_view::npos;
       at = body.find(kKey, at + kKey.size())) {
    std::size_t i = at + kKey.size();
    while (i < body.size() && blank(body[i])) ++i;
    if (i == body.size() || body[i] == ',' || body[i] == '}' || body[i] == ']') {
      continue;  // a string value, not the key
    }
    if (body[i] != ':') return true;  // not JSON as this scan knows it: the handler decides
    ++i;
    while (i < body.size() && blank(body[i])) ++i;
    const bool bare_zero =
        i < body.size() && body[i] == '0' &&
        (i + 1 == body.size() || body[i + 1] == ',' || body[i + 1] == '}' || blank(body[i + 1]));
    if (!bare_zero) return true;
  }
  return false;
}

}  // namespace

bool Api::may_wait(const BeastRequest& req) {
  if (req.method() != beast_http::verb::post) return false;
  std::string_view path = req.target();
  path = path.substr(0, path.find('?'));
  auto ends_with = [&](std::string_view tail) {
    return path.size() >= tail.size() && path.substr(path.size() - tail.size()) == tail;
  };
  // Lock acquire and once begin park only with wait_ms > 0; the session watches the socket of
  // those that may (decision 142). One that cannot is answered after its store call like any
  // other request: no reactor wait, no epoll_ctl, no cancellation to undo (≈ 2 µs a request).
  if (!ends_with("/acquire") && !ends_with("/once/begin")) return false;
  return body_may_ask_to_wait(req.body());
}

std::string_view Api::cors_origin(const BeastRequest& req) const {
  if (opt_.cors_origins.empty()) return {};
  const auto it = req.find(beast_http::field::origin);
  if (it == req.end()) return {};
  const std::string_view origin = it->value();
  for (const auto& pattern : opt_.cors_origins) {
    if (core::origin_matches(pattern, origin)) return origin;
  }
  return {};
}

Response Api::cors_preflight(const BeastRequest& req, std::string_view origin) const {
  Response res;
  res.status = 204;
  res.content_type = {};
  res.headers.emplace_back("Access-Control-Allow-Methods", cors_methods_);
  res.headers.emplace_back("Access-Control-Allow-Headers", "Authorization, Content-Type");
  res.headers.emplace_back("Access-Control-Max-Age", std::to_string(kCorsMaxAgeSeconds));
  // Private Network Access (Chromium): a public page calling an intranet ichido.
  if (auto it = req.find("Access-Control-Request-Private-Network");
      it != req.end() && boost::beast::iequals(it->value(), "true")) {
    res.headers.emplace_back("Access-Control-Allow-Private-Network", "true");
  }
  (void)origin;  // Access-Control-Allow-Origin and Vary are added by make_answer
  return res;
}

Answer Api::answer(Response r, unsigned version, bool keep_alive, std::string_view cors_origin) {
  metrics_.count_response(r.status);
  return make_answer(std::move(r), version, keep_alive, cors_origin);
}

Answer Api::error_response(const Error& e, unsigned version, bool keep_alive,
                           const BeastRequest* header, std::string_view method,
                           std::string_view target) {
  auto res = answer(Response::error(e), version, keep_alive,
                    header ? cors_origin(*header) : std::string_view());
  if (contract_log_) contract_log_->record(method, target, "", res);
  return res;
}

void Api::audit_failure(const Request& req, const Error& e, const std::string& actor) {
  using namespace std::chrono;
  const std::int64_t second =
      duration_cast<seconds>(steady_clock::now().time_since_epoch()).count();
  if (audit_window_.exchange(second) != second) audits_in_window_.store(0);
  if (audits_in_window_.fetch_add(1) >= kMaxFailureAuditsPerSecond) {
    metrics_.count_dropped_audit();
    return;
  }
  core::AuditEntry entry;
  entry.actor = actor;
  entry.action = e.code == errc::unauthenticated ? "auth_failure" : "forbidden";
  entry.status = e.code == errc::unauthenticated ? 401 : 403;
  entry.remote = req.remote;
  entry.detail = req.method_string + " " + std::string(req.path);
  if (req.segments.size() >= 3 && req.segments[1] == "ns") entry.ns = req.segments[2];
  // Fire and forget: the client's answer does not wait for this record, so it is not committed
  // on this thread (decision 141).
  const NotWaitingHere queued;
  admin_.append_audit_detached(std::move(entry), [this] { metrics_.count_dropped_audit(); });
}

boost::asio::awaitable<Response> Api::route(Request& req, Routed& routed, bool* admitted) {
  const bool v1 = !req.segments.empty() && req.segments[0] == "v1";
  const bool metrics = req.segments.size() == 1 && req.segments[0] == "metrics";
  service::Authenticator::Principal principal;
  if (opt_.auth && (v1 || (metrics && !opt_.metrics_open))) {
    // Nothing reads the header after this: handed over, not copied.
    auto who = co_await opt_.auth->authenticate(std::move(req.authorization));
    if (!who.ok()) {
      if (who.error().code == errc::unauthenticated) audit_failure(req, who.error(), "-");
      co_return Response::error(who.error());
    }
    principal = std::move(*who);
    routed.token_id = principal->id;
  }
  Match m = router_.match(req);
  if (!m.route) co_return std::move(*m.error);
  routed.pattern = m.route->pattern;
  const std::string_view ns = m.params.get("ns");
  routed.ns = ns;
  if (principal) {
    // Outside /v1 (metrics) any active token with the role will do, whatever its scope.
    auto allowed = v1 && !m.route->any_scope
                       ? core::authorize(*principal, m.route->role, ns)
                       : core::authorize(*principal, m.route->role, principal->scope);
    if (!allowed.ok()) {
      audit_failure(req, allowed.error(), principal->id);
      co_return Response::error(allowed.error());
    }
  }
  if (admitted) {
    *admitted = true;
    co_return Response();
  }
  req.principal = principal.get();
  if (m.route->admin()) {
    core::AuditEntry entry;
    entry.actor = principal ? principal->id : "no-auth";
    entry.action = req.method_string + " " + m.route->pattern;
    entry.ns = ns;
    entry.status = 200;  // the success status; the handler's command may refine it
    entry.remote = req.remote;
    entry.detail = req.path;
    req.audit = std::move(entry);
  }
  Response res = co_await m.route->handler(req, m.params);
  if (m.route->admin() && !res.audited) {
    core::AuditEntry entry = *req.audit;
    entry.status = res.status;
    auto logged = co_await admin_.append_audit(std::move(entry));
    if (!logged.ok()) {
      metrics_.count_dropped_audit();
      if (res.status < 300) {
        co_return Response::error(Error(errc::store_unavailable,
                                        "The call could not be written to the audit log, so it "
                                        "is refused; nothing was changed, retry later."));
      }
    }
  }
  co_return res;
}

boost::asio::awaitable<Answer> Api::handle(const BeastRequest& breq, std::string remote,
                                           std::string_view* route_out, service::Client* client) {
  return serve(breq, std::move(remote), nullptr, route_out, client);
}

boost::asio::awaitable<std::optional<Answer>> Api::admit(const BeastRequest& header,
                                                         std::string remote,
                                                         std::string_view* route_out) {
  bool admitted = false;
  auto res = co_await serve(header, std::move(remote), &admitted, route_out, nullptr);
  if (admitted) co_return std::nullopt;
  co_return std::move(res);
}

boost::asio::awaitable<Answer> Api::serve(const BeastRequest& breq, std::string remote,
                                          bool* admitted_out, std::string_view* route_out,
                                          service::Client* client) {
  const unsigned version = breq.version();
  const bool keep_alive = breq.keep_alive();
  const auto started = std::chrono::steady_clock::now();
  const std::string remote_for_log = opt_.request_log ? remote : std::string();
  const std::string_view origin = cors_origin(breq);
  Routed routed;
  Response res;
  bool admitted = false;
  try {
    Request req;
    req.method = breq.method();
    req.method_string = std::string(breq.method_string());
    req.remote = std::move(remote);
    req.client = client;
    if (breq.target().size() > opt_.max_target_bytes) {
      res = Response::error(Error(errc::uri_too_long,
                                  "The request URL is too long; send long values in a JSON body "
                                  "instead."));
    } else if (auto r = parse_target(breq.target(), req); !r.ok()) {
      res = Response::error(r.error());
    } else if (!origin.empty() && breq.method() == beast_http::verb::options &&
               breq.find(beast_http::field::access_control_request_method) != breq.end()) {
      res = cors_preflight(breq, origin);  // before the token: browsers send none with it
    } else {
      req.body = breq.body();
      if (auto it = breq.find(beast_http::field::authorization); it != breq.end()) {
        req.authorization = std::string(it->value());
      }
      if (auto it = breq.find(beast_http::field::if_none_match); it != breq.end()) {
        req.if_none_match = std::string(it->value());
      }
      res = co_await route(req, routed, admitted_out ? &admitted : nullptr);
    }
  } catch (const std::exception& ex) {
    res = Response::error(Error(errc::internal, std::string("Internal error: ") + ex.what() +
                                                    ". Nothing is known to have changed; retry."));
  }
  if (admitted) {  // admit(): the body may come
    *admitted_out = true;
    co_return Answer();
  }
  // The server cancels a waiting request whose client hung up (server.cc, watch_peer), and a
  // service that found it gone before granting it something (service/client.h) made sure the
  // server sends nothing: no answer is sent, so none is counted in /metrics, and the request log
  // says 499 (nginx's "client closed request"), not the 500 that the handler's "cancelled" error
  // would map to.
  const boost::asio::cancellation_state cs = co_await boost::asio::this_coro::cancellation_state;
  const bool client_gone = service::client_gone(cs, client);
  if (opt_.request_log) {
    RequestLog::Entry e;
    e.at = opt_.clock->now_ms();
    e.remote = remote_for_log;
    e.method = std::string_view(breq.method_string());
    // No pattern matched (404, 401 before routing…): the path, cut short, never the query.
    std::string path;
    if (routed.pattern.empty()) {
      path =
          std::string(breq.target().substr(0, std::min<std::size_t>(breq.target().find('?'), 256)));
    }
    e.route = routed.pattern.empty() ? std::string_view(path) : routed.pattern;
    e.ns = routed.ns;
    e.status = client_gone ? kClientClosedRequest : res.status;
    e.duration_us = std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::steady_clock::now() - started)
                        .count();
    e.token_id = routed.token_id;
    opt_.request_log->write(e);
  }
  if (route_out) *route_out = routed.pattern;
  if (client_gone) co_return Answer();  // not sent, not counted
  co_return answer(std::move(res), version, keep_alive, origin);
}

void Api::on_external_changes(const ExternalChanges& c) {
  if (c.all_waiters) {
    locks_.notify_external_all();
    once_.notify_external_all();
  }
  for (const auto& ns : c.namespaces) {
    locks_.notify_external_all(ns);
    once_.notify_external_all(ns);
  }
  for (const auto& l : c.locks) locks_.notify_external(l);
  for (const auto& o : c.once) once_.notify_external(o);
}

}  // namespace ichido::http
