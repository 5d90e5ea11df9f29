// Token administration directly on a PostgreSQL store: what `ichido token create|list|revoke
// --store URL` use. One connection of its own, one transaction per command (with its audit log
// entry, actor "cli"), the same row rules as the server (store/admin_ops.h), the database's clock
// for created_at, expires_at and revoked_at. A new token works on every node at once (a node looks
// an unknown token up before answering 401); a revocation is announced in its transaction (one
// NOTIFY, decision 075), so every running node reloads its tokens as soon as it commits (and
// within the 1 s refresh should the notification be lost).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/auth.h"
#include "ichido/result.h"

namespace ichido::store::postgres {

struct StoreAddress {
  std::string url;                // libpq URI or conninfo
  std::string schema = "ichido";  // created with the tables when missing (like a first start)
};

struct NewToken {
  core::TokenInfo info;
  std::string secret;  // shown once; never stored
};

// expires_in_ms: lifetime from the database's now (none: never expires).
Result<NewToken> create_token_in_store(const StoreAddress& at, core::Role role,
                                       const std::string& scope, const std::string& label,
                                       std::optional<std::int64_t> expires_in_ms);
Result<std::vector<core::TokenInfo>> list_tokens_in_store(const StoreAddress& at);
// Errors: token_not_found.
// Returns once every live node has applied the revocation or 3 s have passed; the nodes that had
// not confirmed by then are listed in `unconfirmed` when given (decision 077).
Result<core::TokenInfo> revoke_token_in_store(const StoreAddress& at, const std::string& id,
                                              std::vector<std::string>* unconfirmed = nullptr);

}  // namespace ichido::store::postgres
