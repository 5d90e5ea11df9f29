// Leases and waits: the bounds the API gives every lease-based primitive (locks and once
// records alike), checked in one place.
#pragma once

#include <cstdint>

#include "ichido/result.h"

namespace ichido::core {

inline constexpr std::int64_t kMinLeaseMs = 1000;
inline constexpr std::int64_t kMaxLeaseMs = 3600000;
inline constexpr std::int64_t kMaxWaitMs = 300000;

// lease_ms in kMinLeaseMs..kMaxLeaseMs (error field "lease_ms").
Result<void> validate_lease_ms(std::int64_t lease_ms);
// wait_ms in 0..kMaxWaitMs (error field "wait_ms").
Result<void> validate_wait_ms(std::int64_t wait_ms);

}  // namespace ichido::core
