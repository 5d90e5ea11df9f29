// AdminService and OpsService: the admin and operations API as C++ calls, so that http/ never
// talks to the store directly (ARCHITECTURE.md: http → service → store).
//
// AdminService: API tokens (create — the secret is generated here and returned once —, list,
// revoke) and the audit log (append, list). Token changes are merged into the Authenticator at
// once, so a token created here works on this node on the next request and a revoked one stops
// working when the revoke is answered.
// OpsService: readiness and the store's counters for /metrics.
//
// Audit: the admin mutations take an AuditNote and write it in the same transaction as their
// effect (include/ichido/store.h); append_audit is for what has no effect to be atomic with
// (admin reads, refused calls).
// Lifecycle: built once at start-up; the store, clock and authenticator outlive them.
// Thread-safety: every method may be called concurrently from any executor.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ichido/clock.h"
#include "ichido/store.h"
#include "service/token_auth.h"

namespace ichido::service {

struct NewTokenRequest {
  std::string role;   // reader | writer | admin
  std::string scope;  // a namespace or "*"
  std::string label;
  std::optional<std::int64_t> expires_in_ms;  // from now; absent: never expires
};
struct AuditPage {
  std::vector<core::AuditEntry> items;
  // Set when more entries may follow: oldest first pages with next_after, newest first with
  // next_before.
  std::optional<std::int64_t> next_after;
  std::optional<std::int64_t> next_before;
};
struct NewToken {
  core::TokenInfo info;
  std::string secret;  // shown once: only its hash is stored
};

class AdminService {
 public:
  // `auth` may be null (--no-auth): tokens are still managed, nothing is cached.
  AdminService(Store& store, const Clock& clock, Authenticator* auth)
      : store_(store), clock_(clock), auth_(auth) {}

  // Errors: invalid_request (role, ns, expires_in_ms), store errors.
  boost::asio::awaitable<Result<NewToken>> create_token(NewTokenRequest req, AuditNote audit);
  // Errors: invalid_request (id), token_not_found, store errors.
  boost::asio::awaitable<Result<core::TokenInfo>> revoke_token(std::string id, AuditNote audit);
  boost::asio::awaitable<Result<std::vector<core::TokenInfo>>> list_tokens();
  // Durable when answered. Errors: store errors.
  boost::asio::awaitable<Result<core::AuditEntry>> append_audit(core::AuditEntry entry);
  // The same without waiting for (or reporting) the outcome; `on_failure` runs when the entry
  // could not be written (e.g. to count it). For refused calls, which must stay cheap.
  void append_audit_detached(core::AuditEntry entry, std::function<void()> on_failure);
  // Up to q.limit (1..1000) entries matching q (store.h AuditQuery: id range, actor, action
  // text, namespace), oldest or newest first. Errors: invalid_request (limit, ns).
  boost::asio::awaitable<Result<AuditPage>> list_audit(AuditQuery q);

 private:
  Store& store_;
  const Clock& clock_;
  Authenticator* auth_;
};

class OpsService {
 public:
  explicit OpsService(Store& store) : store_(store) {}
  // Can the store read and write right now (/readyz)? Synchronous and cheap.
  Result<void> ready() { return store_.check_ready(); }
  // Is the process fit to serve at all (/healthz)? Fails on latched store failures (a failed
  // fsync, damaged data) that only a restart or an operator clears.
  Result<void> healthy() { return store_.check_health(); }
  StoreStats stats() const { return store_.stats(); }

 private:
  Store& store_;
};

}  // namespace ichido::service
