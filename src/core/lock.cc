#include "core/lock.h"

#include "core/names.h"

namespace ichido::core {
namespace {

Error not_holder(std::int64_t token) {
  return Error(errc::not_holder,
               "This token does not hold the lock (its lease lapsed and someone else took it, "
               "it was released or force-released); acquire the lock again.")
      .with("token", token);
}

}  // namespace

Result<void> validate_lock_owner(const std::string& owner) {
  if (owner.size() > kLockMaxOwnerBytes) {
    return invalid_field("owner", "The owner must be at most 256 bytes.");
  }
  if (owner.find('\0') != std::string::npos || !is_valid_utf8(owner)) {
    return invalid_field("owner", "The owner must be valid UTF-8 text without NUL characters.");
  }
  return {};
}

AcquireVerdict decide_acquire(const std::optional<LockRecord>& current, TimeMs now,
                              const std::string& owner,
                              const std::optional<std::string>& request_id, bool waiter_ahead) {
  if (request_id && current && current->request_id == request_id && current->owner == owner) {
    return AcquireVerdict::replay;
  }
  if (waiter_ahead) return AcquireVerdict::busy;  // Q2
  return is_held(current, now) ? AcquireVerdict::busy : AcquireVerdict::grant;
}

LockRecord make_grant(const std::string& name, const std::string& owner, std::int64_t token,
                      std::int64_t lease_ms, TimeMs now, std::optional<std::string> request_id) {
  return LockRecord{name, owner, token, now, now + lease_ms, std::move(request_id)};
}

LockRecord pick_up(LockRecord granted, std::int64_t lease_ms, TimeMs now) {
  granted.lease_expires_at = now + lease_ms;
  return granted;
}

Result<void> decide_release(const std::optional<LockRecord>& current, std::int64_t token) {
  if (!current || current->token != token) return not_holder(token);
  return {};
}

Result<LockRecord> decide_renew(const std::optional<LockRecord>& current, std::int64_t token,
                                std::int64_t lease_ms, TimeMs now) {
  ICHIDO_TRY(validate_lease_ms(lease_ms));
  if (!current || current->token != token) return not_holder(token);
  LockRecord r = *current;
  r.lease_expires_at = now + lease_ms;
  return r;
}

}  // namespace ichido::core
