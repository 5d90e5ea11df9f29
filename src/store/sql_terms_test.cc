// The SQL terms both SQL stores compose into their statements. lease_sql.h: core::lease_live_at's
// boundary (a lease ending at now has lapsed), for once records and locks. once_sql.h: the once
// filters, the state as a literal and the lease term of its side. That every store's statements
// select what core selects is the conformance suite's to check (once_conformance_test.cc,
// lock_conformance_test.cc); this pins the text.
#include <gtest/gtest.h>

#include "store/lease_sql.h"
#include "store/once_sql.h"

namespace ichido::store {
namespace {

using core::LeaseSide;
using core::OnceFilter;
using once_sql::lease_term;
using once_sql::state_term;
using once_sql::uses_now;
using once_sql::where;

TEST(LeaseSqlTest, LiveIsAfterNowAndLapsedIsAtOrBeforeNow) {
  EXPECT_EQ(lease_sql::term(LeaseSide::live, "?2"), "lease_expires_at > ?2");
  EXPECT_EQ(lease_sql::term(LeaseSide::lapsed, "$3"), "lease_expires_at <= $3");
  EXPECT_EQ(lease_sql::term(LeaseSide::any, "$3"), "");
}

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
}  // namespace ichido::store
