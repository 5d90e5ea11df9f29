// Leases and waits: the bounds the API gives every lease-based primitive (locks and once
// records alike), checked in one place, and the one rule for whether a lease is live at `now`.
#pragma once

#include <cstdint>

#include "ichido/clock.h"
#include "ichido/result.h"

namespace ichido::core {

inline constexpr std::int64_t kMinLeaseMs = 1000;
inline constexpr std::int64_t kMaxLeaseMs = 3600000;
inline constexpr std::int64_t kMaxWaitMs = 300000;

// lease_ms in kMinLeaseMs..kMaxLeaseMs (error field "lease_ms").
Result<void> validate_lease_ms(std::int64_t lease_ms);
// wait_ms in 0..kMaxWaitMs (error field "wait_ms").
Result<void> validate_wait_ms(std::int64_t wait_ms);

// --- a lease at time `now` -----------------------------------------------------------------------
// Decided here for locks (held: lock.h L3) and once records (processing or expired: once.h). The
// SQL stores cannot call this inside a statement: store/lease_sql.h is its one translation into
// SQL, and the conformance suite checks that every store's listings and counts select what these
// select, on both sides of the lease end.

// A lease is live while now < lease_expires_at: at now == lease_expires_at it has lapsed (a lock
// is free, a once record shows as `expired`; the next acquire or begin takes it over).
constexpr bool lease_live_at(TimeMs lease_expires_at, TimeMs now) { return now < lease_expires_at; }

// Which side of a lease's end `now` must be for a record to be selected: `any` does not look at
// the lease.
enum class LeaseSide { any, live, lapsed };

// True when `now` is on `side` of a lease ending at lease_expires_at (lease_live_at).
constexpr bool on_side(LeaseSide side, TimeMs lease_expires_at, TimeMs now) {
  switch (side) {
    case LeaseSide::any:
      return true;
    case LeaseSide::live:
      return lease_live_at(lease_expires_at, now);
    case LeaseSide::lapsed:
      return !lease_live_at(lease_expires_at, now);
  }
  return false;
}

}  // namespace ichido::core
