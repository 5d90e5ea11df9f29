// Db: a thin RAII wrapper over one sqlite3 connection with a prepared-statement cache.
// Thread-safety: none; each connection is owned by exactly one thread (the writer, or one reader).
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "ichido/result.h"

namespace ichido::store::sqlite {

class Db;

// Whether a SQLite release (sqlite3_libversion_number(), e.g. 3051003) has the fix of the
// WAL-reset bug (https://sqlite.org/wal.html#walresetbug: a checkpoint on one connection racing a
// WAL reset by another can corrupt the database; 3.7.0–3.51.2, fixed in 3.51.3 and backported to
// 3.50.7 and 3.44.6). The store runs exactly that pair (a checkpointer beside the writer,
// decision 136), so it refuses to open with a library that lacks the fix. The built-in SQLite
// (third_party/sqlite) has it; this matters with ICHIDO_SYSTEM_SQLITE, whose CMake check applies
// the same rule.
constexpr bool has_wal_reset_fix(int version) {
  return version >= 3051003 || (version >= 3050007 && version < 3051000) ||
         (version >= 3044006 && version < 3045000);
}
// The start-up check: store_unavailable with details.needs_operator (a restart will not help)
// when `version` (`text`: "3.40.1") lacks the fix.
Result<void> check_sqlite_library(int version, const char* text);

// A cached prepared statement in use. Resets itself (and clears bindings) when destroyed, so a
// statement is never left mid-step holding a read snapshot.
class Query {
 public:
  Query(Db& db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  Query(Query&& o) noexcept : db_(o.db_), stmt_(o.stmt_) { o.stmt_ = nullptr; }
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;
  ~Query();

  Query& bind(int i, std::int64_t v);
  // Text is copied into the statement (SQLITE_TRANSIENT)...
  Query& bind(int i, std::string_view v);
  Query& bind(int i, const char* v) { return bind(i, std::string_view(v)); }
  // ...except from a named std::string, which is referenced (SQLITE_STATIC): it must outlive
  // the statement's steps and not change until then — a function's arguments and locals bound
  // and stepped in the same function. Temporaries do not compile; bind a string_view of them.
  // (Copying every bound text was ≈ 4 % of a once begin+complete's instructions.)
  Query& bind(int i, const std::string& v);
  Query& bind(int i, std::string&& v) = delete;
  Query& bind(int i, const std::optional<std::string>& v);
  Query& bind(int i, std::optional<std::string>&& v) = delete;
  Query& bind(int i, const std::optional<std::int64_t>& v);
  Query& bind_null(int i);

  // SQLITE_ROW, SQLITE_DONE, or an error code (then see Db::error()).
  int step();
  // Runs a statement that returns no rows. Error: store_unavailable.
  Result<void> run(const char* what);

  std::int64_t int64(int col) const { return sqlite3_column_int64(stmt_, col); }
  std::string text(int col) const;
  bool is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::optional<std::string> opt_text(int col) const;
  std::optional<std::int64_t> opt_int64(int col) const;

 private:
  Db& db_;
  sqlite3_stmt* stmt_;
};

class Db {
 public:
  Db() = default;
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  ~Db();

  // Opens (creating when `create`) the database file and applies the durability pragmas:
  // WAL, synchronous=FULL, busy timeout. `vfs`: a registered SQLite VFS ("" = the default; the
  // tests' fault-injecting one).
  Result<void> open(const std::string& path, bool create, const std::string& vfs = "");
  // Opens an existing database for reading only, changing nothing (no pragmas that write):
  // what `ichido check` and `ichido backup` use, also while a server writes the same file.
  Result<void> open_read_only(const std::string& path);
  // Opens an existing database for reading without writing anything to its directory: no lock,
  // no -wal or -shm file is created (SQLite's immutable mode) — unless a WAL with frames is
  // there, which must be read (it may hold committed changes the main file lacks): then SQLite
  // reads it as any reader does, rebuilding its index in the -shm file if needed. For looking at
  // a store that may be damaged before anything is written to it (data_dir.h).
  Result<void> open_untouched(const std::string& path, const std::string& vfs = "");
  void close();

  // A cached statement for `sql`, prepared on first use (the cache is keyed by the SQL text).
  Result<Query> query(std::string_view sql);
  // The same, for a NUL-terminated text (the store's SQL literals): found by its address first
  // without hashing the text (≈ 1 % of a `next`'s instructions), and that entry is used only
  // while the address still holds the same text — a buffer reused for other SQL is another
  // statement (DbStatementCache test).
  Result<Query> query(const char* sql);
  // Runs one or more statements without results.
  Result<void> exec(const char* sql, const char* what);

  sqlite3* raw() { return db_; }
  // The error of a failed request step: store_corrupt when SQLite found damage (an operator must
  // act: on_damage runs), else store_unavailable (nothing was changed; a retry may succeed).
  // The read-only case says so (an operator must fix the file's or directory's permissions).
  Error error(const char* what) const;
  // The last failure in SQLite's words, with its extended code: for logs and start-up messages.
  std::string describe() const;
  // True when the last failure means the file is damaged (SQLITE_CORRUPT, SQLITE_NOTADB).
  bool damaged() const;
  // True when the last failure, or the connection itself, cannot write (SQLITE_READONLY).
  bool read_only() const;
  // Called (on the connection's thread) whenever error() reports damage.
  void set_on_damage(std::function<void()> f) { on_damage_ = std::move(f); }
  bool in_transaction() const { return db_ && !sqlite3_get_autocommit(db_); }

 private:
  // sqlite3_open_v2 read-only (plus `flags`) with the settings every connection gets.
  Result<void> open_for_reading(const std::string& name, int flags, const std::string& vfs);

  sqlite3* db_ = nullptr;
  std::function<void()> on_damage_;
  struct TextHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, sqlite3_stmt*, TextHash, std::equal_to<>> cache_;
  std::unordered_map<const char*, sqlite3_stmt*> by_address_;  // statements of cache_
};

}  // namespace ichido::store::sqlite
