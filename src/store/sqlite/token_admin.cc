#include "store/sqlite/token_admin.h"

#include <sys/stat.h>

#include <filesystem>

#include "base/secret.h"
#include "store/admin_ops.h"
#include "store/sqlite/schema.h"
#include "store/sqlite/sqlite_tables.h"

namespace ichido::store::sqlite {
namespace {

Result<void> open_dir(Db& db, const std::string& dir, bool create) {
  std::error_code ec;
  if (create) {
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      return Error(errc::store_unavailable,
                   "Cannot create data directory " + dir + ": " + ec.message() + ".");
    }
    ::chmod(dir.c_str(), 0700);
  } else if (!std::filesystem::exists(dir + "/ichido.db", ec)) {
    return Error(errc::store_unavailable, "No ichido data in " + dir + " (no ichido.db).");
  }
  ICHIDO_TRY(db.open(dir + "/ichido.db", create));
  return migrate(db);
}

// Runs `fn` in one write transaction on `dir`'s database.
template <class T, class Fn>
Result<T> in_transaction(const std::string& dir, bool create, Fn fn) {
  Db db;
  ICHIDO_TRY(open_dir(db, dir, create));
  ICHIDO_TRY(db.exec("BEGIN IMMEDIATE", "begin a transaction"));
  SqliteTables tables(db);
  Result<T> r = fn(tables);
  if (!r.ok()) {
    (void)db.exec("ROLLBACK", "roll back");
    return r;
  }
  ICHIDO_TRY(db.exec("COMMIT", "commit to disk"));
  return r;
}

}  // namespace

Result<NewToken> create_token_in_dir(const std::string& dir, core::Role role,
                                     const std::string& scope, const std::string& label,
                                     std::optional<TimeMs> expires_at, TimeMs now) {
  NewToken out;
  out.secret = new_token_secret();
  auto info = core::make_token(new_token_id(), out.secret, role, scope, label, now, expires_at);
  if (!info.ok()) return std::move(info).error();
  out.info = std::move(*info);
  auto stored =
      in_transaction<core::TokenInfo>(dir, true, [&](SqliteTables& t) -> Result<core::TokenInfo> {
        ICHIDO_TRY(t.insert_token(out.info));
        return out.info;
      });
  if (!stored.ok()) return std::move(stored).error();
  return out;
}

Result<std::vector<core::TokenInfo>> list_tokens_in_dir(const std::string& dir) {
  return in_transaction<std::vector<core::TokenInfo>>(
      dir, false, [](SqliteTables& t) { return t.list_tokens(); });
}

Result<core::TokenInfo> revoke_token_in_dir(const std::string& dir, const std::string& id,
                                            TimeMs now) {
  return in_transaction<core::TokenInfo>(
      dir, false, [&](SqliteTables& t) { return revoke_token_rows(t, id, now); });
}

}  // namespace ichido::store::sqlite
