// The integer fields of the API, each with its one range and one message. http/ checks a
// field's JSON type against the same rule it later checks the value with, so `"lease_ms": -1`,
// `"lease_ms": "60000"` and `"lease_ms": 1.5` all get the same message stating the real range;
// the services and the rulebook check values with these rules too (for C++ callers).
#pragma once

#include <cstdint>
#include <string_view>

#include "core/lease.h"
#include "core/names.h"
#include "core/once.h"
#include "ichido/result.h"

namespace ichido::core {

struct IntRule {
  std::string_view field;
  std::int64_t min;
  std::int64_t max;  // at most kMaxJsonInteger (2^53)
};

// invalid_request naming rule.field: "The lease_ms must be a whole number from 1000 to 3600000."
Error out_of_range(const IntRule& rule);
// Ok when rule.min <= v <= rule.max, else out_of_range(rule).
Result<void> check(const IntRule& rule, std::int64_t v);

namespace field {
inline constexpr IntRule kLeaseMs{"lease_ms", kMinLeaseMs, kMaxLeaseMs};
inline constexpr IntRule kWaitMs{"wait_ms", 0, kMaxWaitMs};
inline constexpr IntRule kMaxAttempts{"max_attempts", 1, kMaxMaxAttempts};
// Once tokens come from the store's sequence (>= 1). A lock's release/renew accepts any
// non-negative token and answers not_holder when it does not hold the lock.
inline constexpr IntRule kOnceToken{"token", 1, kMaxJsonInteger};
inline constexpr IntRule kLockToken{"token", 0, kMaxJsonInteger};
inline constexpr IntRule kStart{"start", 0, kMaxJsonInteger};
inline constexpr IntRule kMax{"max", 1, kMaxJsonInteger};
inline constexpr IntRule kValue{"value", 0, kMaxJsonInteger};
inline constexpr IntRule kExpectedLastValue{"expected_last_value", 0, kMaxJsonInteger};
inline constexpr IntRule kLastValue{"last_value", 0, kMaxJsonInteger};
// Counters: the month a fiscal year starts in (period fiscal_year).
inline constexpr IntRule kFiscalYearStart{"fiscal_year_start", 1, 12};
inline constexpr IntRule kExpiresInMs{"expires_in_ms", 1, kMaxJsonInteger};
inline constexpr IntRule kLimit{"limit", 1, 1000};
inline constexpr IntRule kAfter{"after", 0, kMaxJsonInteger};
inline constexpr IntRule kBefore{"before", 1, kMaxJsonInteger};
// Namespace settings: completed and dead once records kept 1 s to 3650 days.
inline constexpr IntRule kOnceRetentionMs{"once_retention_ms", 1000,
                                          std::int64_t{3650} * 24 * 3600 * 1000};
}  // namespace field

}  // namespace ichido::core
