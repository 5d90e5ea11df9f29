#include "store/lease_sql.h"

namespace ichido::store::lease_sql {

std::string term(core::LeaseSide side, std::string_view now) {
  switch (side) {
    case core::LeaseSide::any:
      return "";
    case core::LeaseSide::live:  // now < lease_expires_at
      return "lease_expires_at > " + std::string(now);
    case core::LeaseSide::lapsed:  // now >= lease_expires_at
      return "lease_expires_at <= " + std::string(now);
  }
  return "";
}

}  // namespace ichido::store::lease_sql
