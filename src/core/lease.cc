#include "core/lease.h"

#include "core/names.h"

namespace ichido::core {

Result<void> validate_lease_ms(std::int64_t v) {
  if (v < kMinLeaseMs || v > kMaxLeaseMs) {
    return invalid_field("lease_ms", "The lease_ms must be a whole number from 1000 to 3600000.");
  }
  return {};
}

Result<void> validate_wait_ms(std::int64_t v) {
  if (v < 0 || v > kMaxWaitMs) {
    return invalid_field("wait_ms", "The wait_ms must be a whole number from 0 to 300000.");
  }
  return {};
}

}  // namespace ichido::core
