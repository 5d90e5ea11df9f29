// Row-mapping helpers shared by the SqliteTables implementation files.
#pragma once

#include <optional>
#include <type_traits>
#include <vector>

#include "store/sqlite/db.h"

namespace ichido::store::sqlite {

// Runs a query expected to return at most one row, mapped by `from`.
template <class T, class From>
Result<std::optional<T>> one(Db& db, Result<Query> q, From from, const char* what) {
  if (!q.ok()) return std::move(q).error();
  const int rc = q->step();
  if (rc == SQLITE_DONE) return std::optional<T>();
  if (rc != SQLITE_ROW) return db.error(what);
  if constexpr (std::is_same_v<decltype(from(*q)), T>) {
    return std::optional<T>(from(*q));
  } else {
    auto r = from(*q);
    if (!r.ok()) return std::move(r).error();
    return std::optional<T>(std::move(*r));
  }
}

template <class T, class From>
Result<std::vector<T>> many(Db& db, Result<Query> q, From from, const char* what) {
  if (!q.ok()) return std::move(q).error();
  std::vector<T> out;
  for (;;) {
    const int rc = q->step();
    if (rc == SQLITE_DONE) return out;
    if (rc != SQLITE_ROW) return db.error(what);
    if constexpr (std::is_same_v<decltype(from(*q)), T>) {
      out.push_back(from(*q));
    } else {
      auto r = from(*q);
      if (!r.ok()) return std::move(r).error();
      out.push_back(std::move(*r));
    }
  }
}

}  // namespace ichido::store::sqlite
