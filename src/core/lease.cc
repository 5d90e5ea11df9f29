#include "core/lease.h"

#include "core/fields.h"

namespace ichido::core {

Result<void> validate_lease_ms(std::int64_t v) { return check(field::kLeaseMs, v); }

Result<void> validate_wait_ms(std::int64_t v) { return check(field::kWaitMs, v); }

}  // namespace ichido::core
