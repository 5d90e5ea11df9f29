// Route registration, one function per resource (one handler file each).
#pragma once

#include "http/metrics.h"
#include "http/router.h"
#include "service/admin_service.h"
#include "service/counter_service.h"
#include "service/lock_service.h"
#include "service/once_service.h"
#include "service/overview_service.h"
#include "service/settings_service.h"

namespace ichido::http {

// `default_timezone`: the zone a counter created without "timezone" takes (--default-timezone).
void add_counter_routes(Router& router, service::CounterService& counters,
                        std::string default_timezone);
void add_once_routes(Router& router, service::OnceService& once);
void add_lock_routes(Router& router, service::LockService& locks);
void add_ops_routes(Router& router, service::OpsService& ops, const Metrics& metrics);
void add_admin_routes(Router& router, service::AdminService& admin);
// GET and PUT /v1/ns/{ns}/settings (settings_routes.cc); their answers also show the server's
// defaults (`default_retention_ms`, `default_timezone`).
void add_settings_routes(Router& router, service::SettingsService& svc,
                         std::int64_t default_retention_ms, std::string default_timezone);
// GET /v1/whoami and GET /v1/namespaces (overview_routes.cc).
void add_overview_routes(Router& router, service::OverviewService& overview);
// The /metrics lines of the once gauges per namespace, from the overview snapshot.
std::string render_once_gauges(const service::OverviewService::Snapshot& s);
// The answer of a renewed lease, the same for a lock and a once record (lock_routes.cc):
// {"token": …, "lease_expires_at": …}.
Response lease_response(std::int64_t token, TimeMs lease_expires_at);
// The dashboard's static files (web_routes.cc): GET / and the embedded web/ files, no token.
void add_web_routes(Router& router);

}  // namespace ichido::http
