#include "core/auth.h"

#include "base/secret.h"
#include "core/fields.h"
#include "core/names.h"

namespace ichido::core {

std::string_view to_string(Role r) {
  switch (r) {
    case Role::reader:
      return "reader";
    case Role::writer:
      return "writer";
    case Role::admin:
      return "admin";
  }
  return "reader";
}

Result<Role> parse_role(std::string_view s) {
  if (s == "reader") return Role::reader;
  if (s == "writer") return Role::writer;
  if (s == "admin") return Role::admin;
  return invalid_field("role", "The role must be reader, writer or admin.");
}

bool token_active(const TokenInfo& t, TimeMs now) {
  if (t.revoked_at) return false;
  if (t.expires_at && now >= *t.expires_at) return false;
  return true;
}

Result<void> authorize(const TokenInfo& t, Role required, std::string_view ns) {
  if (static_cast<int>(t.role) < static_cast<int>(required)) {
    return Error(errc::forbidden, "This token's role (" + std::string(to_string(t.role)) +
                                      ") may not make this call; it needs " +
                                      std::string(to_string(required)) + ".");
  }
  if (t.scope == kAllNamespaces) return {};
  if (ns.empty()) {
    return Error(errc::forbidden, "This call needs a token scoped to every namespace (\"*\").");
  }
  if (t.scope != ns) {
    return Error(errc::forbidden, "This token is scoped to namespace '" + t.scope +
                                      "' and may not use namespace '" + std::string(ns) + "'.");
  }
  return {};
}

Result<void> validate_scope(std::string_view scope) {
  if (scope == kAllNamespaces) return {};
  return validate_name(scope, "ns");
}

Result<void> validate_expires_in_ms(std::int64_t ms) { return check(field::kExpiresInMs, ms); }

Result<void> validate_token_id(std::string_view id) {
  if (id.empty() || id.size() > 64) {
    return invalid_field("id",
                         "The token id is 16 hexadecimal characters (see GET /v1/admin/tokens).");
  }
  return {};
}

Result<TokenInfo> make_token(std::string id, std::string_view secret, Role role, std::string scope,
                             std::string label, TimeMs now, std::optional<TimeMs> expires_at) {
  ICHIDO_TRY(validate_scope(scope));
  if (expires_at && *expires_at <= now) {
    return invalid_field("expires", "A token's expiry must be in the future.");
  }
  if (label.size() > 256) return invalid_field("label", "The label must be at most 256 bytes.");
  TokenInfo t;
  t.id = std::move(id);
  t.hash = sha256_hex(secret);
  t.role = role;
  t.scope = std::move(scope);
  t.label = std::move(label);
  t.created_at = now;
  t.expires_at = expires_at;
  return t;
}

}  // namespace ichido::core
