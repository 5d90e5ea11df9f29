// The once-record filters (core::OnceFilter) in SQL: the one translation of the rulebook's "state
// of a record at time now" (core::filter_terms) into the WHERE terms of the SQLite and PostgreSQL
// stores' once_records statements — their listings by state and their counts by state. Each store
// composes these terms into its own statements, with its own placeholders, builds each statement
// once and keeps it prepared (both stores cache statements by their text). The conformance suite
// checks that every store selects what core::matches selects.
//
// - The state is a literal in the text (`state = 'pending'`), never a parameter: PostgreSQL's
//   partial indexes (once_processing, once_pending, once_dead) serve a generic plan only when the
//   literal is there. SQLite's partial index once_open needs its own condition word for word
//   besides (ICHIDO_ONCE_OPEN, sqlite/sqlite_tables.h); that store adds it.
// - The lease side is store/lease_sql.h's term, shared with the stores' lock listings: the column
//   lease_expires_at against `now`, the batch's time, passed as a parameter whose placeholder the
//   store names ("?3", "$3") — core::lease_live_at as SQL, so a lease ending at now has lapsed in
//   every store. Live and lapsed split the processing rows between them: a count may take the
//   live ones as all processing rows less the lapsed ones.
//
// Not everything is SQL: the memory store calls core::matches itself. The dashboard (web/app.js)
// marks a listed processing record whose lease end has passed on the browser's clock as expired
// with the same comparison; it cannot share this code.
#pragma once

#include <cstddef>
#include <iterator>
#include <string>
#include <string_view>

#include "core/once.h"

namespace ichido::store::once_sql {

// The stores keep one statement per filter in an array indexed by the filter's value.
static_assert(static_cast<std::size_t>(core::OnceFilter::dead) + 1 ==
              std::size(core::kOnceFilters));

// "state = 'processing'"; empty for a filter of every state (OnceFilter::all).
std::string state_term(core::OnceFilter f);
// lease_sql::term of the filter's lease side: "lease_expires_at > <now>" (live) or
// "lease_expires_at <= <now>" (lapsed); empty for a filter that does not look at the lease.
std::string lease_term(core::OnceFilter f, std::string_view now);
// True when lease_term(f) is not empty: the statement takes `now`.
bool uses_now(core::OnceFilter f);
// state_term and lease_term joined by AND; empty for OnceFilter::all.
std::string where(core::OnceFilter f, std::string_view now);

}  // namespace ichido::store::once_sql
