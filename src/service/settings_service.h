// SettingsService: per-namespace settings (today: how long completed and dead once records are
// kept). Validates names and ranges, then reads or durably writes them through the store. The
// retention purge (server.cc) reads them inside each purge transaction, so a change applies
// from the next purge pass on. Stateless apart from the store; safe from any thread.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <string>

#include "ichido/store.h"

namespace ichido::service {

class SettingsService {
 public:
  explicit SettingsService(Store& store) : store_(store) {}

  // Errors: invalid_request (field ns).
  boost::asio::awaitable<Result<NamespaceSettings>> get(std::string ns);
  // Errors: invalid_request (field ns or once_retention_ms), the store's.
  // `audit` is written in the same transaction as the change (store.h AuditNote).
  boost::asio::awaitable<Result<NamespaceSettings>> put(std::string ns, NamespaceSettings s,
                                                        AuditNote audit);

 private:
  Store& store_;
};

}  // namespace ichido::service
