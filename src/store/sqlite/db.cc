#include "store/sqlite/db.h"

#include <sys/stat.h>

#include <cstring>

#include "store/sqlite/wal_buffer_vfs.h"

namespace ichido::store::sqlite {

Query::~Query() {
  if (!stmt_) return;
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

Query& Query::bind(int i, std::int64_t v) {
  sqlite3_bind_int64(stmt_, i, v);
  return *this;
}

Query& Query::bind(int i, std::string_view v) {
  sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  return *this;
}

Query& Query::bind(int i, const std::string& v) {
  sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
  return *this;
}

Query& Query::bind(int i, const std::optional<std::string>& v) {
  return v ? bind(i, *v) : bind_null(i);
}

Query& Query::bind(int i, const std::optional<std::int64_t>& v) {
  return v ? bind(i, *v) : bind_null(i);
}

Query& Query::bind_null(int i) {
  sqlite3_bind_null(stmt_, i);
  return *this;
}

int Query::step() { return sqlite3_step(stmt_); }

Result<void> Query::run(const char* what) {
  const int rc = step();
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) return db_.error(what);
  return {};
}

std::string Query::text(int col) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
  const int n = sqlite3_column_bytes(stmt_, col);
  return p ? std::string(p, static_cast<std::size_t>(n)) : std::string();
}

std::optional<std::string> Query::opt_text(int col) const {
  if (is_null(col)) return std::nullopt;
  return text(col);
}

std::optional<std::int64_t> Query::opt_int64(int col) const {
  if (is_null(col)) return std::nullopt;
  return int64(col);
}

Db::~Db() { close(); }

void Db::close() {
  for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
  cache_.clear();
  by_address_.clear();
  if (db_) sqlite3_close_v2(db_);
  db_ = nullptr;
}

namespace {

// Process-wide settings, made before the first connection initializes the library (the store
// opens its database before anything else in the process uses SQLite; a setting made too late
// is refused with SQLITE_MISUSE and changes nothing). Memory statistics off: with them on, every
// sqlite3_malloc and sqlite3_free takes a global mutex to keep counts nobody here reads
// (sqlite3_memory_used, the soft heap limit): ≈ 16 mutex pairs per counter `next`, 1.6–3.3 % of
// a request's instructions (callgrind).
bool configure_library() {
  sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
  return true;
}

}  // namespace

Result<void> check_sqlite_library(int version, const char* text) {
  if (has_wal_reset_fix(version)) return {};
  return Error(errc::store_unavailable,
               std::string("the SQLite library this server runs with (") + text +
                   ") has the WAL-reset bug, which can corrupt the store: build ichido with its "
                   "own SQLite (without ICHIDO_SYSTEM_SQLITE) or link SQLite 3.51.3 or later")
      .with("needs_operator", std::string("true"));
}

Result<void> Db::open(const std::string& path, bool create, const std::string& vfs) {
  [[maybe_unused]] static const bool configured = configure_library();
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
  if (create) flags |= SQLITE_OPEN_CREATE;
  // Through the WAL write buffer (decision 132) over the requested VFS; its precondition,
  // synchronous=FULL, is set below before anything is written. An unknown `vfs` is passed on
  // as it is, so that opening fails as it would without the shim.
  std::string shim = wal_buffer_vfs(vfs);
  const std::string& use = shim.empty() ? vfs : shim;
  if (sqlite3_open_v2(path.c_str(), &db_, flags, use.empty() ? nullptr : use.c_str()) !=
      SQLITE_OK) {
    Error e = error("open the database");
    close();
    return e;
  }
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, 5000);
  // WAL: readers never block the writer. synchronous=FULL: every commit fsyncs the WAL before
  // COMMIT returns, so an answered change survives power loss, not only a process crash.
  // temp_store stays SQLite's default (decision 120): with temp_store=MEMORY every statement
  // journal is kept in 1 KiB chunks (five mallocs per journalled page); by default it is one
  // 64 KiB buffer that spills to a temporary file only when a statement outgrows it.
  // secure_delete: deleted content (an expired once record's result, a revoked token's row) is
  // overwritten, not left readable in free pages. Debian's libsqlite3 did so by default; set here
  // so that it does not depend on how the library was compiled (third_party/sqlite).
  return exec(
      "PRAGMA journal_mode=WAL;"
      "PRAGMA synchronous=FULL;"
      "PRAGMA foreign_keys=ON;"
      "PRAGMA secure_delete=ON;"
      "PRAGMA cache_size=-65536;",
      "configure the database");
}

Result<void> Db::open_for_reading(const std::string& name, int flags, const std::string& vfs) {
  if (sqlite3_open_v2(name.c_str(), &db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | flags,
                      vfs.empty() ? nullptr : vfs.c_str()) != SQLITE_OK) {
    Error e = error("open the database");
    close();
    return e;
  }
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, 5000);
  return {};
}

Result<void> Db::open_read_only(const std::string& path) { return open_for_reading(path, 0, ""); }

Result<void> Db::open_untouched(const std::string& path, const std::string& vfs) {
  struct stat st{};
  const bool wal = ::stat((path + "-wal").c_str(), &st) == 0 && st.st_size > 0;
  std::string uri = "file:";
  for (const char c : path) {  // the characters a URI path must escape (sqlite.org/uri.html)
    if (c == '%' || c == '?' || c == '#') {
      static constexpr char kHex[] = "0123456789ABCDEF";
      uri += '%';
      uri += kHex[static_cast<unsigned char>(c) >> 4];
      uri += kHex[static_cast<unsigned char>(c) & 0xf];
    } else {
      uri += c;
    }
  }
  uri += wal ? "?mode=ro" : "?mode=ro&immutable=1";
  return open_for_reading(uri, SQLITE_OPEN_URI, vfs);
}

Result<Query> Db::query(std::string_view sql) {
  auto it = cache_.find(sql);
  if (it == cache_.end()) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                           &stmt, nullptr) != SQLITE_OK) {
      return error("prepare a statement");
    }
    it = cache_.emplace(std::string(sql), stmt).first;
  }
  return Query(*this, it->second);
}

Result<Query> Db::query(const char* sql) {
  auto it = by_address_.find(sql);
  if (it != by_address_.end() && std::strcmp(sqlite3_sql(it->second), sql) == 0) {
    return Query(*this, it->second);
  }
  auto q = query(std::string_view(sql));
  if (q.ok()) by_address_[sql] = cache_.find(std::string_view(sql))->second;
  return q;
}

Result<void> Db::exec(const char* sql, const char* what) {
  char* msg = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &msg) != SQLITE_OK) {
    sqlite3_free(msg);
    return error(what);
  }
  return {};
}

std::string Db::describe() const {
  if (!db_) return "no connection";
  return std::string(sqlite3_errmsg(db_)) + ", code " +
         std::to_string(sqlite3_extended_errcode(db_));
}

bool Db::damaged() const {
  if (!db_) return false;
  const int primary = sqlite3_extended_errcode(db_) & 0xff;
  return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB;
}

bool Db::read_only() const {
  if (!db_) return false;
  return (sqlite3_extended_errcode(db_) & 0xff) == SQLITE_READONLY ||
         sqlite3_db_readonly(db_, "main") == 1;
}

Error Db::error(const char* what) const {
  const std::string detail = db_ ? sqlite3_errmsg(db_) : "no connection";
  if (damaged()) {
    if (on_damage_) on_damage_();
    return Error(errc::store_corrupt,
                 std::string("The store found damage in its data file while trying to ") + what +
                     " (" + detail +
                     "); an operator must act (ichido check --data DIR, then restore a backup); "
                     "retrying will not help.");
  }
  if (db_ && (sqlite3_extended_errcode(db_) & 0xff) == SQLITE_READONLY) {
    return Error(errc::store_unavailable,
                 std::string("The store could not ") + what +
                     " because its database is read-only (" + detail +
                     "); nothing was changed. An operator must make the data directory writable.");
  }
  return Error(errc::store_unavailable,
               std::string("The store could not ") + what + " (" + detail +
                   "); nothing was changed, retry the same request later.");
}

}  // namespace ichido::store::sqlite
