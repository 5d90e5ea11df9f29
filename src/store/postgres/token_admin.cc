#include "store/postgres/token_admin.h"

#include <algorithm>

#include "base/secret.h"
#include "store/admin_ops.h"
#include "store/postgres/change_feed.h"
#include "store/postgres/pg_store.h"
#include "store/postgres/schema.h"
#include "store/table_store.h"

namespace ichido::store::postgres {
namespace {

// Runs `fn(tables, now)` in one transaction holding the advisory locks of `keys` (the same
// locks the server's batches take), with the database's clock read after them.
// `announce_tokens`: the transaction also notifies every node that tokens changed (decision
// 075), so a revocation is effective on every node as soon as it commits.
// `unconfirmed` (with announce_tokens): after the commit, waits up to 3 s for every live node
// to confirm it applied the change (decision 077) and lists those that did not.
template <class T, class Fn>
Result<T> in_transaction(const StoreAddress& at, std::vector<std::int64_t> keys, Fn fn,
                         bool announce_tokens = false,
                         std::vector<std::string>* unconfirmed = nullptr) {
  Options o;
  o.url = at.url;
  o.schema = at.schema;
  auto conn = open_checked(connection_settings(o));
  if (!conn.ok()) return std::move(conn).error();
  PgConn& c = **conn;
  // The CLI never creates a store: an empty schema means a wrong URL or schema more often than a
  // store nobody started yet, and a token in a new store would be a token for nothing.
  const Error absent =
      Error(errc::store_unavailable,
            "There is no ichido store in schema \"" + at.schema + "\" at " + c.server() +
                ": check the URL and --store-schema, or start a node first "
                "(`ichido serve --store URL` creates the store and its first "
                "admin token).");
  auto migrated = migrate(c, at.schema, &absent);
  if (!migrated.ok()) return std::move(migrated).error();
  const Sql sql(at.schema);
  c.send(sql.begin_write, Params());
  auto locked = c.query(sql.lock_keys_now, Params().i64_array(keys));
  if (!locked.ok()) return std::move(locked).error();
  PgTables t(c, sql);
  Result<T> r = fn(t, locked->i64(0, 1));
  if (r.ok() && announce_tokens) {
    c.send(sql.notify, Params()
                           .text(notify_channel(at.schema))
                           .text(encode_changes("cli", {store::announce_tokens()})));
  }
  (void)c.sync();
  c.send(r.ok() ? sql.commit : sql.rollback, Params());
  if (auto s = c.sync(); !s.ok()) return std::move(s).error();
  if (r.ok() && unconfirmed) {
    auto pending = wait_for_token_acks(c, sql, "", std::chrono::milliseconds(3000));
    if (pending.ok()) *unconfirmed = std::move(*pending);
  }
  return r;
}

// What the audit log says about a change made with the CLI (like the data-directory CLI).
core::AuditEntry cli_audit(std::string action, std::string ns, std::string detail, TimeMs now) {
  core::AuditEntry e;
  e.at = now;
  e.actor = "cli";
  e.action = std::move(action);
  e.ns = std::move(ns);
  e.status = 200;
  e.remote = "local";
  e.detail = std::move(detail);
  return e;
}

}  // namespace

Result<NewToken> create_token_in_store(const StoreAddress& at, core::Role role,
                                       const std::string& scope, const std::string& label,
                                       std::optional<std::int64_t> expires_in_ms) {
  NewToken out;
  out.secret = new_token_secret();
  const std::string id = new_token_id();
  std::vector<std::int64_t> keys{job_key("token", id, ""), job_key("audit", "", "")};
  std::sort(keys.begin(), keys.end());
  auto stored = in_transaction<core::TokenInfo>(
      at, std::move(keys),
      [&](PgTables& t, TimeMs now) -> Result<core::TokenInfo> {
        std::optional<TimeMs> expires_at;
        if (expires_in_ms) expires_at = now + *expires_in_ms;
        auto info = core::make_token(id, out.secret, role, scope, label, now, expires_at);
        if (!info.ok()) return std::move(info).error();
        ICHIDO_TRY(t.insert_token(*info));
        auto a = t.insert_audit(
            cli_audit("token create", info->scope,
                      "id " + info->id + ", role " + std::string(core::to_string(role)), now));
        if (!a.ok()) return std::move(a).error();
        return std::move(*info);
      },
      /*announce_tokens=*/true);
  if (!stored.ok()) return std::move(stored).error();
  out.info = std::move(*stored);
  return out;
}

Result<std::vector<core::TokenInfo>> list_tokens_in_store(const StoreAddress& at) {
  return in_transaction<std::vector<core::TokenInfo>>(
      at, {}, [](PgTables& t, TimeMs) { return t.list_tokens(); });
}

Result<core::TokenInfo> revoke_token_in_store(const StoreAddress& at, const std::string& id,
                                              std::vector<std::string>* unconfirmed) {
  std::vector<std::int64_t> keys{job_key("token", id, ""), job_key("audit", "", "")};
  std::sort(keys.begin(), keys.end());
  return in_transaction<core::TokenInfo>(
      at, std::move(keys),
      [&](PgTables& t, TimeMs now) -> Result<core::TokenInfo> {
        auto tok = revoke_token_rows(t, id, now);
        if (!tok.ok()) return tok;
        auto a = t.insert_audit(cli_audit("token revoke", tok->scope, "id " + id, now));
        if (!a.ok()) return std::move(a).error();
        return tok;
      },
      /*announce_tokens=*/true, unconfirmed);
}

}  // namespace ichido::store::postgres
