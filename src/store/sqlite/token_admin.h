// Token administration directly on a data directory: what `ichido token create|list|revoke
// --data DIR` use. It works whether or not a server runs on that directory: it opens the
// database with its own connection (WAL; SQLite serializes the two writers with its file lock
// and a busy timeout) and never takes the server's LOCK file. A new token works at once (a
// running server looks up tokens it does not know: service/token_auth.h, A1). After a revoke
// has committed, it increments the counter in DIR/tokens.seq, which a running server keeps mapped
// and reads before every authentication (A3): it re-reads its tokens when the counter moved, so
// a revoke takes effect when the command returns. Each change is also written to the audit log
// (actor "cli"), in the same transaction.
//
// DIR/tokens.seq (decision 144): 8 bytes, an unsigned 64-bit counter in the machine's byte order,
// incremented with an atomic read-modify-write through a shared mapping, so two CLIs never lose
// an increment and a reader never sees half of one. MAP_SHARED mappings and write(2) share the
// page cache: a server's mapping shows the new value as soon as the increment is done, without
// a system call on the reading side (SQLite's WAL index, DIR/ichido.db-shm, rests on the same
// property, so the file must be on a local file system, which the WAL needs anyway). A server
// from before tokens.seq reads the size of DIR/tokens.rev instead: the CLI still appends one
// byte to that file after each revoke.
//
// What a server cannot see per request without a system call: DIR/tokens.seq removed or
// replaced (by hand: no ichido command does either; restore refuses a directory a server
// holds). Its mapping then shows the old file, and the CLI's increment goes to the new one: the
// server notices at its next periodic token refresh (TokensRevision::recheck, within a second),
// maps the path's file (creating it again) and reads the tokens. Truncating the file below 8
// bytes while a server runs is worse: a read of the mapped page past the end of the file is
// SIGBUS, as it would be for ichido.db-shm.
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

// Increments DIR/tokens.seq (created when missing) and appends a byte to DIR/tokens.rev (for a
// server from before tokens.seq). What revoke_token_in_dir does after its commit. Errors:
// internal, when DIR/tokens.seq cannot be created, mapped or extended — the change is committed,
// but a running server learns of it only at its next periodic refresh (within a second). The
// append to tokens.rev is best effort.
Result<void> bump_tokens_revision(const std::string& dir);

// The counter in DIR/tokens.seq read through its path (0 when the file is missing or shorter
// than 8 bytes): open, read, close.
std::uint64_t tokens_revision(const std::string& dir);

// tokens_revision() for a server that asks before every authenticated request: one atomic load
// from DIR/tokens.seq mapped shared and read-only, no system call. Construction opens the file
// (creating it, and extending it to 8 bytes, when needed) and maps it. When that fails (say, a
// directory it cannot write), every call falls back to tokens_revision() until a recheck() maps
// the file. recheck() is for the server's periodic token refresh, before it reads the tokens:
// one stat(2); when the path's file is not the mapped one (removed, replaced), the path's file is
// mapped from then on; the old mapping is kept until destruction, since a reader may be between
// its two loads (after kMaxMappings replacements, every call falls back to tokens_revision()).
// Thread-safety: operator() from any thread, concurrently with recheck(); recheck() from one
// thread at a time. noexcept.
class TokensRevision {
 public:
  static constexpr int kMaxMappings = 16;

  explicit TokensRevision(std::string dir);
  ~TokensRevision();
  TokensRevision(const TokensRevision&) = delete;
  TokensRevision& operator=(const TokensRevision&) = delete;

  std::uint64_t operator()() const noexcept {
    if (std::uint64_t* word = word_.load(std::memory_order_acquire)) {
      // Lock-free, hence a plain load on the platforms ichido builds for: the page is read-only.
      return std::atomic_ref<std::uint64_t>(*word).load(std::memory_order_acquire);
    }
    return tokens_revision(dir_);
  }
  void recheck() noexcept;

 private:
  void map_path() noexcept;
  const std::string dir_;
  std::atomic<std::uint64_t*> word_{nullptr};  // the mapped counter; null: read the path
  // Touched by the constructor, recheck() and the destructor only (one thread at a time).
  std::vector<void*> mappings_;  // every mapping made, the current one last
  std::uint64_t dev_ = 0;        // the current mapping's file
  std::uint64_t ino_ = 0;
};

}  // namespace ichido::store::sqlite
