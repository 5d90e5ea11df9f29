// Authenticator: turns an "Authorization: Bearer <token>" header into the token's record.
//
// Tokens live in the store (hashes only). An in-memory index by hash answers almost every
// request without I/O; lookups hash the presented secret (SHA-256) and compare hashes in
// constant time; the secret itself is never written to the store or logged. Three rules keep
// the index exact, a fourth makes a known token cheap:
//   A1. Unknown tokens are looked up. A hash missing from the index is looked up in the store
//       before the answer is 401 — at most `lookups_per_second` such lookups per second over
//       the whole process, so a flood of bad tokens stays cheap (beyond the budget the answer is
//       401 at once). A token made by `ichido token create`, or on another node, works as soon
//       as it exists.
//   A2. Revocation sticks. The index only ever learns: installing a snapshot (the periodic
//       refresh, a lookup) merges it into what is known, keeping the earliest revoked_at of
//       either side (tokens are never deleted). A refresh read before a revoke committed can
//       therefore never bring the revoked token back.
//   A3. Changes made outside this process are noticed before answering. `external_revision`,
//       when given, is a cheap probe of the backend (the SQLite store: the counter in
//       DIR/tokens.seq, mapped into memory, that `ichido token revoke` increments; PostgreSQL:
//       the change feed's token notifications); when it differs from the value last seen, the
//       index is reloaded before the request is authenticated, so a revoke made with the CLI
//       takes effect when the CLI returns.
//   A4. The last token verified on each thread is remembered with the version of the index it
//       was found in: a request on that thread presenting the same secret (compared in constant
//       time) while the index is still that version skips the hash and the index. Every change
//       of the index (a merge: refresh, lookup, upsert, A3 reload) bumps the version with it, so a
//       remembered token is never answered from an index older than the one a request would
//       read; expiry is checked on every request. The secret is kept in the thread's memory.
// A periodic refresh (start_refresh) also picks up changes the probe cannot see (other nodes).
//
// Lifecycle: construct → load_blocking() → start_refresh() → stop() before the store closes.
// Thread-safety: every method may be called from any thread, concurrently with a refresh.
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/mutex.h"
#include "core/auth.h"
#include "ichido/clock.h"
#include "ichido/store.h"

namespace ichido::service {

struct AuthOptions {
  int lookups_per_second = 20;  // A1: store lookups of unknown tokens, over all requests
  std::function<std::uint64_t()> external_revision;  // A3; empty: no out-of-process changes
  // Called by the periodic refresh before it reads the tokens, on the refresh's executor: what
  // the probe cannot afford to check per request (the SQLite store: whether DIR/tokens.seq was
  // replaced, TokensRevision::recheck). Empty: nothing.
  std::function<void()> recheck_revision;
};

class Authenticator {
 public:
  Authenticator(Store& store, const Clock& clock, AuthOptions options = {});

  // Loads the tokens now, waiting for the store. Errors: the store's.
  Result<void> load_blocking();
  // Re-reads the tokens every `period` on `ex` until stop().
  void start_refresh(boost::asio::any_io_executor ex, std::chrono::milliseconds period);
  void stop();

  // The active token presented in `authorization` (a record nobody changes, shared with the
  // thread's remembered token: A4), or unauthenticated (missing, malformed, unknown, revoked or
  // expired — the message says which, but never echoes the secret). May wait for one store read
  // (A1, A3). Errors: unauthenticated; store_unavailable when A3 must reload and the store cannot
  // be read (a failed A1 lookup is simply a 401).
  using Principal = std::shared_ptr<const core::TokenInfo>;
  boost::asio::awaitable<Result<Principal>> authenticate(std::string authorization);
  std::size_t token_count() const;
  // How many presented secrets were hashed (a remembered token is not: A4). For tests.
  std::uint64_t secrets_hashed() const { return hashed_.load(std::memory_order_relaxed); }
  // Merges a token just created or revoked on this node into the index at once (A2).
  void upsert(const core::TokenInfo& t);

 private:
  using Index = std::unordered_map<std::string, core::TokenInfo>;  // by hash
  void merge(std::vector<core::TokenInfo> tokens);
  bool take_lookup();
  // A4: this thread's remembered token when `secret` is it and the index has not changed since.
  Principal remembered(std::string_view secret) const;
  void schedule();

  Store& store_;
  const Clock& clock_;
  const AuthOptions opt_;
  mutable Mutex mu_;
  std::shared_ptr<const Index> index_ GUARDED_BY(mu_) = std::make_shared<Index>();
  // A4: bumped with every change of index_, under mu_; read without it.
  std::atomic<std::uint64_t> index_version_{1};
  const std::uint64_t instance_;  // tells apart Authenticators whose requests share a thread
  std::atomic<std::uint64_t> hashed_{0};
  std::atomic<std::uint64_t> loaded_revision_{0};  // A3: the probe's value at the last reload
  std::atomic<std::int64_t> lookup_window_{0};     // the second lookups_in_window_ counts
  std::atomic<int> lookups_in_window_{0};
  std::unique_ptr<boost::asio::steady_timer> timer_;
  std::chrono::milliseconds period_{1000};
  std::atomic<bool> stopped_{false};
};

}  // namespace ichido::service
