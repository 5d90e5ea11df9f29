#include "store/postgres/token_admin.h"

#include "base/secret.h"
#include "store/admin_ops.h"
#include "store/postgres/pg_store.h"
#include "store/postgres/schema.h"
#include "store/table_store.h"

namespace ichido::store::postgres {
namespace {

// Runs `fn(tables, now)` in one transaction holding the advisory locks of `keys` (the same
// locks the server's batches take), with the database's clock read after them.
template <class T, class Fn>
Result<T> in_transaction(const StoreAddress& at, std::vector<std::int64_t> keys, Fn fn) {
  Options o;
  o.url = at.url;
  o.schema = at.schema;
  auto conn = open_checked(connection_settings(o));
  if (!conn.ok()) return std::move(conn).error();
  PgConn& c = **conn;
  auto migrated = migrate(c, at.schema);
  if (!migrated.ok()) return std::move(migrated).error();
  const Sql sql(at.schema);
  c.send(sql.begin_write, Params());
  auto locked = c.query(sql.lock_keys_now, Params().i64_array(keys));
  if (!locked.ok()) return std::move(locked).error();
  PgTables t(c, sql);
  Result<T> r = fn(t, locked->i64(0, 1));
  (void)c.sync();
  c.send(r.ok() ? sql.commit : sql.rollback, Params());
  if (auto s = c.sync(); !s.ok()) return std::move(s).error();
  return r;
}

}  // namespace

Result<NewToken> create_token_in_store(const StoreAddress& at, core::Role role,
                                       const std::string& scope, const std::string& label,
                                       std::optional<std::int64_t> expires_in_ms) {
  NewToken out;
  out.secret = new_token_secret();
  const std::string id = new_token_id();
  auto stored = in_transaction<core::TokenInfo>(
      at, {job_key("token", id, "")}, [&](PgTables& t, TimeMs now) -> Result<core::TokenInfo> {
        std::optional<TimeMs> expires_at;
        if (expires_in_ms) expires_at = now + *expires_in_ms;
        auto info = core::make_token(id, out.secret, role, scope, label, now, expires_at);
        if (!info.ok()) return std::move(info).error();
        ICHIDO_TRY(t.insert_token(*info));
        return std::move(*info);
      });
  if (!stored.ok()) return std::move(stored).error();
  out.info = std::move(*stored);
  return out;
}

Result<std::vector<core::TokenInfo>> list_tokens_in_store(const StoreAddress& at) {
  return in_transaction<std::vector<core::TokenInfo>>(
      at, {}, [](PgTables& t, TimeMs) { return t.list_tokens(); });
}

Result<core::TokenInfo> revoke_token_in_store(const StoreAddress& at, const std::string& id) {
  return in_transaction<core::TokenInfo>(
      at, {job_key("token", id, "")},
      [&](PgTables& t, TimeMs now) { return revoke_token_rows(t, id, now); });
}

}  // namespace ichido::store::postgres
