#include "store/once_sql.h"

#include "store/lease_sql.h"

namespace ichido::store::once_sql {

std::string state_term(core::OnceFilter f) {
  const auto state = core::filter_terms(f).state;
  if (!state) return "";
  return "state = '" + std::string(core::to_string(*state)) + "'";
}

std::string lease_term(core::OnceFilter f, std::string_view now) {
  return lease_sql::term(core::filter_terms(f).lease, now);
}

bool uses_now(core::OnceFilter f) { return core::filter_terms(f).lease != core::LeaseSide::any; }

std::string where(core::OnceFilter f, std::string_view now) {
  std::string state = state_term(f);
  std::string lease = lease_term(f, now);
  if (state.empty()) return lease;
  if (lease.empty()) return state;
  return state + " AND " + lease;
}

}  // namespace ichido::store::once_sql
