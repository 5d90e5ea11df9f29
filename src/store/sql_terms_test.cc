// The once filters' SQL terms (once_sql.h): the state as a literal, and the lease boundary of
// core::lease_live_at turned into SQL (a lease ending at now has lapsed). That every store's
// statements select what core::matches selects is the conformance suite's to check
// (once_conformance_test.cc); this pins the text both stores compose.
#include "store/once_sql.h"

#include <gtest/gtest.h>

namespace ichido::store::once_sql {
namespace {

using core::OnceFilter;

TEST(OnceSqlTest, EachFilterIsALiteralStateAndASideOfTheLeaseEnd) {
  EXPECT_EQ(where(OnceFilter::all, "$3"), "");
  EXPECT_EQ(where(OnceFilter::processing, "$3"), "state = 'processing' AND lease_expires_at > $3");
  EXPECT_EQ(where(OnceFilter::expired, "?3"), "state = 'processing' AND lease_expires_at <= ?3");
  EXPECT_EQ(where(OnceFilter::pending, "$3"), "state = 'pending'");
  EXPECT_EQ(where(OnceFilter::completed, "$3"), "state = 'completed'");
  EXPECT_EQ(where(OnceFilter::dead, "$3"), "state = 'dead'");
  for (const OnceFilter f : core::kOnceFilters) {
    const bool looks_at_lease = f == OnceFilter::processing || f == OnceFilter::expired;
    EXPECT_EQ(uses_now(f), looks_at_lease);
    EXPECT_EQ(lease_term(f, "?2").empty(), !looks_at_lease);
    EXPECT_EQ(state_term(f).empty(), f == OnceFilter::all);
  }
}

}  // namespace
}  // namespace ichido::store::once_sql
