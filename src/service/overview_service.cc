#include "service/overview_service.h"

#include "core/names.h"
#include "service/call_store.h"

namespace ichido::service {

boost::asio::awaitable<Result<std::vector<NamespaceSummary>>> OverviewService::summaries(
    std::optional<std::string> only_ns) {
  if (only_ns) {
    if (auto v = core::validate_name(*only_ns, "ns"); !v.ok()) co_return v.error();
  }
  co_return co_await call_store<std::vector<NamespaceSummary>>(
      [&](auto cb) { store_.summarize_namespaces(std::move(only_ns), kCountCap, std::move(cb)); });
}

boost::asio::awaitable<Result<void>> OverviewService::refresh(TimeMs now) {
  auto r = co_await summaries(std::nullopt);
  if (!r.ok()) co_return r.error();
  auto next = std::make_shared<Snapshot>();
  next->namespaces = std::move(*r);
  next->taken_at = now;
  MutexLock lk(mu_);
  snapshot_ = std::move(next);
  co_return Result<void>{};
}

std::shared_ptr<const OverviewService::Snapshot> OverviewService::snapshot() const {
  MutexLock lk(mu_);
  return snapshot_;
}

}  // namespace ichido::service
