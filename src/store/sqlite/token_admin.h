// Token administration directly on a data directory: what `ichido token create|list|revoke
// --data DIR` use. It works whether or not a server runs on that directory: it opens the
// database with its own connection (WAL; SQLite serializes the two writers with its file lock
// and a busy timeout) and never takes the server's LOCK file. A new token works at once (a
// running server looks up tokens it does not know: service/token_auth.h, A1). After a revoke
// it appends one byte to DIR/tokens.rev; a running server checks that file's size before every
// authentication (A3) and re-reads its tokens when it grew, so a revoke takes effect when the
// command returns. Each change is also written to the audit log (actor
// "cli"), in the same transaction.
#pragma once

#include <atomic>
#include <cstdint>
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

// Refuses a directory without a store (no ichido.db: a typo in --data must not create a new,
// empty store whose token no server knows) unless `init`, which creates one there (data_dir.h).
Result<NewToken> create_token_in_dir(const std::string& dir, core::Role role,
                                     const std::string& scope, const std::string& label,
                                     std::optional<TimeMs> expires_at, TimeMs now,
                                     bool init = false);
Result<std::vector<core::TokenInfo>> list_tokens_in_dir(const std::string& dir);
// Errors: token_not_found.
Result<core::TokenInfo> revoke_token_in_dir(const std::string& dir, const std::string& id,
                                            TimeMs now);

// The revision of the tokens as changed outside the server: the size of DIR/tokens.rev (0 when
// it does not exist). One stat(2) of the path.
std::uint64_t tokens_revision(const std::string& dir);

// tokens_revision() for a server that asks before every authenticated request: DIR/tokens.rev
// is kept open (created empty when missing, which is revision 0 as well) and its size read with
// fstat(2), without a path lookup each time. The token CLI only appends to the file, so the open
// file is the one it changes; should the file be removed or replaced, the next call sees that
// (no links left) and opens the path again. When it cannot be opened at all, every call falls
// back to tokens_revision(). Thread-safe; noexcept.
class TokensRevision {
 public:
  explicit TokensRevision(std::string dir);
  ~TokensRevision();
  TokensRevision(const TokensRevision&) = delete;
  TokensRevision& operator=(const TokensRevision&) = delete;

  std::uint64_t operator()() const;

 private:
  void reopen() const;
  const std::string dir_;
  // Reopened with dup2 onto the same number, so a concurrent fstat sees one file or the other.
  mutable std::atomic<int> fd_{-1};
};

}  // namespace ichido::store::sqlite
