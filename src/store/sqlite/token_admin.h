// Token administration directly on a data directory: what `ichido token create|list|revoke
// --data DIR` use. It works whether or not a server runs on that directory: it opens the
// database with its own connection (WAL; SQLite serializes the two writers with its file lock
// and a busy timeout) and never takes the server's LOCK file. A running server re-reads its
// tokens every second, so a change takes effect within about a second.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/auth.h"
#include "ichido/result.h"

namespace ichido::store::sqlite {

struct NewToken {
  core::TokenInfo info;
  std::string secret;  // shown once; never stored
};

// Creates the data directory and database if they do not exist yet.
Result<NewToken> create_token_in_dir(const std::string& dir, core::Role role,
                                     const std::string& scope, const std::string& label,
                                     std::optional<TimeMs> expires_at, TimeMs now);
Result<std::vector<core::TokenInfo>> list_tokens_in_dir(const std::string& dir);
// Errors: token_not_found.
Result<core::TokenInfo> revoke_token_in_dir(const std::string& dir, const std::string& id,
                                            TimeMs now);

}  // namespace ichido::store::sqlite
