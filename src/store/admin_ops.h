// Token row operations shared by the Store commands (admin_ops.cc) and the offline token admin
// on a data directory (sqlite/token_admin.cc), so both follow the same rules.
#pragma once

#include "store/tables.h"

namespace ichido::store {

// Marks token `id` revoked at `now` (idempotent: a revoked token keeps its first revocation
// time). Errors: token_not_found.
Result<core::TokenInfo> revoke_token_rows(Tables& t, const std::string& id, TimeMs now);

}  // namespace ichido::store
