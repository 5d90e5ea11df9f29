// OverviewService: what operators look at across namespaces — the dashboard's overview (counts
// per namespace) and the /metrics gauges of stuck work (once records expired and dead per
// namespace, the oldest expired lease).
//
// Cost: a summary is one store read of a few index range counts per namespace, each stopped at
// kCountCap, never a scan of a large table. /metrics must not pay even that on every scrape of a
// 10M-row store, so it reads a snapshot that refresh() replaces (the server calls it every
// kRefreshInterval); a scrape never waits for the store.
//
// Thread-safety: every method may be called from any thread; snapshot() is lock-free for readers
// beyond a short mutex around a shared_ptr copy.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "ichido/store.h"

namespace ichido::service {

class OverviewService {
 public:
  static constexpr std::int64_t kCountCap = 100000;
  static constexpr std::chrono::seconds kRefreshInterval{15};

  struct Snapshot {
    std::vector<NamespaceSummary> namespaces;
    TimeMs taken_at = 0;  // the server clock when it was read (0: never)
  };

  explicit OverviewService(Store& store) : store_(store) {}

  // Summaries of every namespace, or of `only_ns` alone (validated: invalid_request with field
  // "ns"). Errors: the store's.
  boost::asio::awaitable<Result<std::vector<NamespaceSummary>>> summaries(
      std::optional<std::string> only_ns);
  // Reads every namespace's summary into the snapshot (on failure the old one stays).
  boost::asio::awaitable<Result<void>> refresh(TimeMs now);
  std::shared_ptr<const Snapshot> snapshot() const;

 private:
  Store& store_;
  mutable Mutex mu_;
  std::shared_ptr<const Snapshot> snapshot_ GUARDED_BY(mu_) = std::make_shared<Snapshot>();
};

}  // namespace ichido::service
