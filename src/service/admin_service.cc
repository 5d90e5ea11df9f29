#include "service/admin_service.h"

#include <utility>

#include "base/secret.h"
#include "core/names.h"
#include "service/call_store.h"

namespace ichido::service {

boost::asio::awaitable<Result<NewToken>> AdminService::create_token(NewTokenRequest req,
                                                                    AuditNote audit) {
  auto role = core::parse_role(req.role);
  if (!role.ok()) co_return std::move(role).error();
  const TimeMs now = clock_.now_ms();
  std::optional<TimeMs> expires_at;
  if (req.expires_in_ms) {
    if (auto r = core::validate_expires_in_ms(*req.expires_in_ms); !r.ok()) {
      co_return std::move(r).error();
    }
    expires_at = now + *req.expires_in_ms;
  }
  NewToken out;
  out.secret = new_token_secret();
  auto info = core::make_token(new_token_id(), out.secret, *role, std::move(req.scope),
                               std::move(req.label), now, expires_at);
  if (!info.ok()) co_return std::move(info).error();
  CreateTokenCmd cmd{std::move(*info), std::move(audit)};
  auto stored = co_await call_store<core::TokenInfo>(
      [&](auto cb) { store_.create_token(std::move(cmd), std::move(cb)); });
  if (!stored.ok()) co_return std::move(stored).error();
  if (auth_) auth_->upsert(*stored);
  out.info = std::move(*stored);
  co_return out;
}

boost::asio::awaitable<Result<core::TokenInfo>> AdminService::revoke_token(std::string id,
                                                                           AuditNote audit) {
  if (auto r = core::validate_token_id(id); !r.ok()) co_return std::move(r).error();
  RevokeTokenCmd cmd{std::move(id), std::move(audit)};
  auto r = co_await call_store<core::TokenInfo>(
      [&](auto cb) { store_.revoke_token(std::move(cmd), std::move(cb)); });
  if (r.ok() && auth_) auth_->upsert(*r);  // effective on this answer (and never undone: A2)
  co_return r;
}

boost::asio::awaitable<Result<std::vector<core::TokenInfo>>> AdminService::list_tokens() {
  co_return co_await call_store<std::vector<core::TokenInfo>>(
      [&](auto cb) { store_.list_tokens(std::move(cb)); });
}

boost::asio::awaitable<Result<core::AuditEntry>> AdminService::append_audit(
    core::AuditEntry entry) {
  co_return co_await call_store<core::AuditEntry>(
      [&](auto cb) { store_.append_audit(std::move(entry), std::move(cb)); });
}

void AdminService::append_audit_detached(core::AuditEntry entry, std::function<void()> on_failure) {
  store_.append_audit(std::move(entry),
                      [on_failure = std::move(on_failure)](Result<core::AuditEntry> r) {
                        if (!r.ok() && on_failure) on_failure();
                      });
}

boost::asio::awaitable<Result<AuditPage>> AdminService::list_audit(AuditQuery q) {
  const int limit = q.limit;
  if (limit < 1 || limit > kMaxAuditLimit) {
    co_return invalid_field("limit", "The limit must be a whole number from 1 to 1000.");
  }
  if (q.ns) {
    if (auto v = core::validate_name(*q.ns, "ns"); !v.ok()) co_return v.error();
  }
  const bool newest = q.newest_first;
  q.limit = limit + 1;  // one more than asked, to know whether a next page exists
  auto r = co_await call_store<std::vector<core::AuditEntry>>(
      [&](auto cb) { store_.list_audit(std::move(q), std::move(cb)); });
  if (!r.ok()) co_return std::move(r).error();
  AuditPage page;
  page.items = std::move(*r);
  if (static_cast<int>(page.items.size()) > limit) {
    page.items.resize(limit);
    (newest ? page.next_before : page.next_after) = page.items.back().id;
  }
  co_return page;
}

}  // namespace ichido::service
