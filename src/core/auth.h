// Authorization rules: roles, namespace scopes, token lifetimes, and the audit record.
//
//   reader  GET only                 writer  every non-admin call        admin  everything
//   scope   one namespace, or "*" (every namespace and the /v1/admin calls)
//
// Pure functions; hashing and randomness live in base/secret.h, storage in the stores.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ichido/clock.h"
#include "ichido/result.h"

namespace ichido::core {

enum class Role { reader = 0, writer = 1, admin = 2 };

std::string_view to_string(Role r);
Result<Role> parse_role(std::string_view s);  // error names field "role"

inline constexpr std::string_view kAllNamespaces = "*";

struct TokenInfo {
  std::string id;    // public identifier (shown in lists and the audit log)
  std::string hash;  // SHA-256 hex of the secret; the secret itself is never stored
  Role role = Role::reader;
  std::string scope;  // a namespace name or "*"
  std::string label;  // free text for humans
  TimeMs created_at = 0;
  std::optional<TimeMs> expires_at;
  std::optional<TimeMs> revoked_at;
};

// Not revoked and not expired at `now`.
bool token_active(const TokenInfo& t, TimeMs now);

// May `t` make a call needing `required` on namespace `ns`? `ns` empty means a call outside any
// namespace (/v1/admin/...), which needs scope "*". Error: forbidden, saying what is missing.
Result<void> authorize(const TokenInfo& t, Role required, std::string_view ns);

// Validates a scope for a new token: "*" or a valid namespace name (field "ns").
Result<void> validate_scope(std::string_view scope);
// A new token's lifetime in ms: 1 to 2^53 (field "expires_in_ms").
Result<void> validate_expires_in_ms(std::int64_t ms);
// A token id as the admin API takes it: 1 to 64 bytes (ids are 16 lowercase hex characters; any
// other id is simply not found). Field "id".
Result<void> validate_token_id(std::string_view id);

// A new token's record for `secret` (which the caller generated and will show once): only the
// SHA-256 of the secret is kept. Errors: invalid_request (scope, or expiry not in the future).
Result<TokenInfo> make_token(std::string id, std::string_view secret, Role role, std::string scope,
                             std::string label, TimeMs now, std::optional<TimeMs> expires_at);

// One line of the audit log: every admin call and every authentication failure.
struct AuditEntry {
  std::int64_t id = 0;  // assigned by the store, increasing
  TimeMs at = 0;
  std::string actor;    // token id, or "-" when no valid token was presented
  std::string action;   // "PUT /v1/ns/shop/counters/receipts", "auth_failure"
  std::string ns;       // namespace concerned, "" when none
  unsigned status = 0;  // HTTP status answered
  std::string remote;   // client address
  std::string detail;   // short free text
};

}  // namespace ichido::core
