// A lease's side of `now` in SQL: the one translation of core::lease_live_at (a lease is live
// while now < lease_expires_at; at now == lease_expires_at it has lapsed) into a WHERE term on the
// column lease_expires_at, for the SQLite and PostgreSQL stores' statements over once records
// (store/once_sql.h) and locks (their listing of held locks, which also gives the held count).
// `now` is the batch's time, passed as a parameter whose placeholder the store names ("?2",
// "$2"). The conformance suite checks that every store selects what core selects on both sides of
// the lease end.
#pragma once

#include <string>
#include <string_view>

#include "core/lease.h"

namespace ichido::store::lease_sql {

// "lease_expires_at > <now>" (live), "lease_expires_at <= <now>" (lapsed), empty for
// LeaseSide::any. lease_expires_at is NOT NULL in both schemas, so live and lapsed split the rows.
std::string term(core::LeaseSide side, std::string_view now);

}  // namespace ichido::store::lease_sql
