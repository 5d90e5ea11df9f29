#include "service/settings_service.h"

#include "core/fields.h"
#include "core/names.h"
#include "service/call_store.h"

namespace ichido::service {

boost::asio::awaitable<Result<NamespaceSettings>> SettingsService::get(std::string ns) {
  if (auto v = core::validate_name(ns, "ns"); !v.ok()) co_return v.error();
  co_return co_await call_store<NamespaceSettings>(
      [&](auto cb) { store_.get_ns_settings(std::move(ns), std::move(cb)); });
}

boost::asio::awaitable<Result<NamespaceSettings>> SettingsService::put(std::string ns,
                                                                       NamespaceSettings s,
                                                                       AuditNote audit) {
  if (auto v = core::validate_name(ns, "ns"); !v.ok()) co_return v.error();
  if (s.once_retention_ms) {
    if (auto v = core::check(core::field::kOnceRetentionMs, *s.once_retention_ms); !v.ok()) {
      co_return v.error();
    }
  }
  co_return co_await call_store<NamespaceSettings>([&](auto cb) {
    store_.put_ns_settings(PutNsSettingsCmd{std::move(ns), s, std::move(audit)}, std::move(cb));
  });
}

}  // namespace ichido::service
