// Api: the whole HTTP API as one function from a Beast request to a Beast response. It owns the
// services and the route table; the socket side (server.h) only moves bytes. Built once at
// start-up; handle() is safe to call concurrently from any connection.
//
// Order of checks for /v1 calls (docs/API.md, "Common rules"): the token first (401 unauthenticated
// before anything else), then the route (404/405), then role and namespace scope (403), then
// the handler. Every admin call, and every authentication or authorization failure (at most
// kMaxFailureAuditsPerSecond of them, so a flood cannot turn into a flood of disk writes), is
// written to the audit log: an admin mutation's entry in the same transaction as its effect
// (Request::audit), every other admin answer's entry before it is sent — when that write fails,
// a success becomes 503 (nothing changed: the only such successes are reads).
// The HTTP layer reaches the store only through the services it builds here.
#pragma once

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/answer.h"
#include "http/contract_log.h"
#include "http/message.h"
#include "http/metrics.h"
#include "http/request_log.h"
#include "http/router.h"
#include "service/admin_service.h"
#include "service/client.h"
#include "service/counter_service.h"
#include "service/lock_service.h"
#include "service/once_service.h"
#include "service/overview_service.h"
#include "service/settings_service.h"
#include "service/token_auth.h"
#include "service/wait_list.h"

namespace ichido::http {

struct ApiOptions {
  std::size_t max_target_bytes = 8192;  // longer request targets get 414 uri_too_long
  service::LockLimits locks;            // waiter limits (--max-waiters-per-lock, --max-waiters)
  // Parked once begins (wait_ms): beyond these, begin answers 429 too_many_waiters.
  std::size_t max_once_waiters_per_key = 1000;
  std::size_t max_once_waiters = 10000;
  service::Authenticator* auth = nullptr;  // nullptr: --no-auth (every call allowed)
  bool metrics_open = false;               // /metrics without a token even when auth is on
  const Clock* clock = &SystemClock::instance();
  RequestLog* request_log = nullptr;  // nullptr: --request-log off
  // The server's --once-retention (GET /v1/ns/{ns}/settings shows it as the effective value).
  std::int64_t default_once_retention_ms = std::int64_t{30} * 24 * 3600 * 1000;
  // The server's --default-timezone: the zone of a counter created without "timezone" (an IANA
  // name that core::local_date accepts; the server checks it at start-up).
  std::string default_timezone = "UTC";
  // --cors-origin: the origins (core::parse_origin_pattern results) whose web pages may call the
  // API with fetch. Empty: CORS off — no CORS header is ever sent and OPTIONS is an ordinary
  // (unknown) method, as without this feature.
  std::vector<std::string> cors_origins;
};

// CORS (docs/decisions/102-cors.md), only for a request whose Origin header an entry of
// cors_origins allows:
// - a preflight (OPTIONS with Access-Control-Request-Method) is answered 204 before any token
//   check, with Access-Control-Allow-Origin (that origin), -Allow-Methods (every method a route
//   has), -Allow-Headers (Authorization, Content-Type), -Max-Age (kCorsMaxAgeSeconds), Vary:
//   Origin, and Access-Control-Allow-Private-Network: true when the browser asks for it;
// - every other answer (errors too: 401, 404, 409, 413…) carries Access-Control-Allow-Origin
//   (that origin), Vary: Origin and Access-Control-Expose-Headers (Retry-After, ETag).
// Requests from other origins, and all requests when the list is empty, get none of this.
inline constexpr int kCorsMaxAgeSeconds = 7200;
// The request log's status for a request whose client went away while it waited (never sent).
inline constexpr unsigned kClientClosedRequest = 499;

class Api {
 public:
  static constexpr int kMaxFailureAuditsPerSecond = 20;

  Api(Store& store, Metrics& metrics, ApiOptions options = {});

  // Never throws: a failure inside a handler becomes a 500 internal error response.
  // `route_out`, when given, receives the matched route's pattern ("" when none matched): a view
  // of the route table, valid as long as this Api. `client`: the request's connection when it may
  // wait (may_wait), which must outlive the call; an empty Answer (nothing to send) comes back
  // when the client is gone by the end.
  boost::asio::awaitable<Answer> handle(const BeastRequest& req, std::string remote = {},
                                        std::string_view* route_out = nullptr,
                                        service::Client* client = nullptr);
  // `Expect: 100-continue` (RFC 9110 §10.1.1): decides from the header alone (`header`, whose
  // body is not read yet) whether the request is refused whatever its body — the URL, the token
  // (401), the route (404/405), the role or scope (403): then that final answer, counted and
  // logged like any answer. nullopt: the request is admitted; read its body and handle() it
  // (which checks everything again). Never throws; does not run a handler or change anything.
  // `route_out` as for handle().
  boost::asio::awaitable<std::optional<Answer>> admit(const BeastRequest& header,
                                                      std::string remote = {},
                                                      std::string_view* route_out = nullptr);
  // Called by the server for every answer it is about to send (not for one whose client went
  // away first): the contract log's record (ICHIDO_CONTRACT_LOG), nothing when it is off.
  void sending(const BeastRequest& req, std::string_view route, const Answer& res) {
    if (contract_log_) contract_log_->record(req.method_string(), req.target(), route, res);
  }
  // Builds the response for an error found before the request could be routed. `header`: the
  // request's header when it was read (its Origin header decides the CORS headers), else null.
  // `method` and `target` are what was read of the request line ("" when nothing was), for the
  // contract log.
  Answer error_response(const Error& e, unsigned version, bool keep_alive,
                        const BeastRequest* header = nullptr, std::string_view method = {},
                        std::string_view target = {});
  const Router& router() const { return router_; }
  // True for requests that may park for a long time: a lock acquire or once begin whose body may
  // ask for wait_ms > 0 (decision 142). The server watches their connection while they wait, so
  // a client that goes away leaves the line (see server.cc). Reads the raw body; never false for
  // a body whose parsed wait_ms is above 0.
  static bool may_wait(const BeastRequest& req);
  const service::LockService& locks() const { return locks_; }
  // Shutdown: answers every parked lock and once waiter with its "not now" answer at once, and
  // keeps later requests from waiting. Call before draining connections.
  void shutdown_waiters() {
    locks_.shutdown();
    once_waits_.shutdown();
  }
  service::OnceService& once() { return once_; }
  // Changes committed by other nodes sharing the store (Store::watch_external_changes): wakes
  // the waiters they may concern. Thread-safe; never blocks.
  void on_external_changes(const ExternalChanges& c);
  service::OverviewService& overview() { return overview_; }

 private:
  // What the request log says about a routed request.
  struct Routed {
    std::string_view pattern;  // of the matched route ("" when none matched)
    std::string ns;
    std::string token_id;  // the authenticated caller, "" if none
  };
  // `admitted` non-null: stop after the checks that need no body (admit()); *admitted tells
  // whether they passed (the returned Response is then meaningless).
  boost::asio::awaitable<Response> route(Request& req, Routed& routed, bool* admitted = nullptr);
  // handle() and admit(). `admitted` non-null: admit()'s checks only; *admitted tells whether
  // they passed (the returned response is then meaningless). handle() is this coroutine itself,
  // not a coroutine around it: every frame of a request that waits stays allocated while it waits.
  boost::asio::awaitable<Answer> serve(const BeastRequest& req, std::string remote, bool* admitted,
                                       std::string_view* route_out, service::Client* client);
  // The request's Origin when CORS is on and cors_origins allows it, else empty (no allocation).
  std::string_view cors_origin(const BeastRequest& req) const;
  Response cors_preflight(const BeastRequest& req, std::string_view origin) const;
  // make_answer(), counted in /metrics.
  Answer answer(Response r, unsigned version, bool keep_alive, std::string_view cors_origin = {});
  void audit_failure(const Request& req, const Error& e, const std::string& actor);

  ApiOptions opt_;
  Metrics& metrics_;
  service::AdminService admin_;
  service::OpsService ops_;
  service::CounterService counters_;
  service::LockService locks_;
  service::WaitList once_waits_;
  service::OnceService once_;
  service::OverviewService overview_;
  service::SettingsService settings_;
  Router router_;
  std::string cors_methods_;  // every method some route has, for Access-Control-Allow-Methods
  std::atomic<std::int64_t> audit_window_{0};  // the second the count below belongs to
  std::atomic<int> audits_in_window_{0};
  // ICHIDO_CONTRACT_LOG (tests only): every answer sent is recorded; null when unset.
  const std::unique_ptr<ContractLog> contract_log_ = ContractLog::from_environment();
};

}  // namespace ichido::http
