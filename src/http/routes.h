// Route registration, one function per resource (one handler file each).
#pragma once

#include "http/metrics.h"
#include "http/router.h"
#include "service/admin_service.h"
#include "service/counter_service.h"
#include "service/lock_service.h"
#include "service/once_service.h"

namespace ichido::http {

void add_counter_routes(Router& router, service::CounterService& counters);
void add_once_routes(Router& router, service::OnceService& once);
void add_lock_routes(Router& router, service::LockService& locks);
void add_ops_routes(Router& router, service::OpsService& ops, const Metrics& metrics);
void add_admin_routes(Router& router, service::AdminService& admin);

}  // namespace ichido::http
