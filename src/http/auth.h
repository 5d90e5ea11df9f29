// Authenticator: turns an "Authorization: Bearer <token>" header into the token's record.
//
// Tokens live in the store (hashes only). The authenticator keeps an in-memory index by hash,
// loaded at start-up and re-read every second, so a token created with `ichido token create`
// on the data directory, or revoked through the admin API on another node, takes effect within
// about a second. Lookup hashes the presented secret (SHA-256) and compares hashes in constant
// time; the secret itself is never stored or logged.
// Lifecycle: construct → load_blocking() → start_refresh() → stop() before the store closes.
// Thread-safety: authenticate() may be called from any thread concurrently with a refresh.
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/auth.h"
#include "ichido/clock.h"
#include "ichido/store.h"

namespace ichido::http {

class Authenticator {
 public:
  Authenticator(Store& store, const Clock& clock) : store_(store), clock_(clock) {}

  // Loads the tokens now, waiting for the store. Errors: the store's.
  Result<void> load_blocking();
  // Re-reads the tokens every `period` on `ex` until stop().
  void start_refresh(boost::asio::any_io_executor ex, std::chrono::milliseconds period);
  void stop();

  // The active token presented in `authorization`, or unauthenticated (missing, malformed,
  // unknown, revoked or expired — the message says which, but never echoes the secret).
  Result<core::TokenInfo> authenticate(std::string_view authorization) const;
  std::size_t token_count() const;
  // Puts a token just created or revoked on this node into the index at once, so the caller
  // can use (or no longer use) it without waiting for the next refresh.
  void upsert(const core::TokenInfo& t);

 private:
  using Index = std::unordered_map<std::string, core::TokenInfo>;  // by hash
  void install(std::vector<core::TokenInfo> tokens);
  void schedule();

  Store& store_;
  const Clock& clock_;
  mutable std::mutex mu_;
  std::shared_ptr<const Index> index_ = std::make_shared<Index>();  // guarded by mu_
  std::unique_ptr<boost::asio::steady_timer> timer_;
  std::chrono::milliseconds period_{1000};
  std::atomic<bool> stopped_{false};
};

}  // namespace ichido::http
