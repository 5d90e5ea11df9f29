// The embedded store's schema and its migrations.
#pragma once

#include <functional>

#include "store/sqlite/db.h"

namespace ichido::store::sqlite {

// Called once before the first migration of a database that already had a schema (not of a new
// one): the version it is at, and the version it is brought to.
using OnUpgrade = std::function<void(int from, int to)>;

// Brings the database to the newest schema version, one migration per transaction. Refuses a
// database written by a newer ichido (its version is above ours). Idempotent.
Result<void> migrate(Db& db, const OnUpgrade& on_upgrade = {});

// The schema version this build writes.
int current_schema_version();

// The version the database is at (0: none yet), read without writing.
Result<int> schema_version(Db& db);

}  // namespace ichido::store::sqlite
