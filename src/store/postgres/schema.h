// The PostgreSQL store's schema: tables in one PostgreSQL schema (default "ichido"), created
// and upgraded by an append-only list of migrations (docs/decisions/070).
//
// migrate() is safe to run from many nodes at once: it takes a transaction-scoped advisory lock
// (no session state) and applies every missing migration, and records each one in
// <schema>.schema_version, in one transaction; the nodes that wait then see the work done. A
// database whose schema is newer than this build knows is refused (store_unavailable), and so is
// a database whose encoding cannot hold UTF-8 text.
#pragma once

#include <string>

#include "ichido/result.h"
#include "store/postgres/pg_conn.h"

namespace ichido::store::postgres {

// A schema name ichido accepts: [a-z_][a-z0-9_]*, at most 63 bytes (no quoting surprises).
Result<void> validate_schema_name(const std::string& schema);

// The highest migration this build knows.
int current_schema_version();

// What migrate() did.
struct MigrateOutcome {
  int from_version = 0;  // 0: the schema was created
  int to_version = 0;
};

// Creates or upgrades `schema` on `conn` (idle, outside any transaction). Errors:
// store_unavailable (connection, privileges, newer schema, encoding). `if_absent` non-null: when
// there is no ichido schema yet, nothing is created and that error is returned (a node that
// remembers another store, a CLI that must not create one).
Result<MigrateOutcome> migrate(PgConn& conn, const std::string& schema,
                               const Error* if_absent = nullptr);

}  // namespace ichido::store::postgres
