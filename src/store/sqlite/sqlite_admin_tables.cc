// SqliteTables: tokens and the audit log.
#include "store/sqlite/rows.h"
#include "store/sqlite/sqlite_tables.h"

namespace ichido::store::sqlite {
namespace {

#define TOKEN_COLUMNS "id, hash, role, scope, label, created_at, expires_at, revoked_at"
#define AUDIT_COLUMNS "id, at, actor, action, ns, status, remote, detail"

Result<core::TokenInfo> token_from(const Query& q) {
  core::TokenInfo t;
  t.id = q.text(0);
  t.hash = q.text(1);
  auto role = core::parse_role(q.text(2));
  if (!role.ok())
    return Error(errc::store_unavailable, "The store holds a token with an unknown role.");
  t.role = *role;
  t.scope = q.text(3);
  t.label = q.text(4);
  t.created_at = q.int64(5);
  t.expires_at = q.opt_int64(6);
  t.revoked_at = q.opt_int64(7);
  return t;
}

core::AuditEntry audit_from(const Query& q) {
  core::AuditEntry e;
  e.id = q.int64(0);
  e.at = q.int64(1);
  e.actor = q.text(2);
  e.action = q.text(3);
  e.ns = q.text(4);
  e.status = static_cast<unsigned>(q.int64(5));
  e.remote = q.text(6);
  e.detail = q.text(7);
  return e;
}

}  // namespace

Result<void> SqliteTables::insert_token(const core::TokenInfo& t) {
  auto q = db_.query("INSERT INTO tokens (" TOKEN_COLUMNS ") VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
  if (!q.ok()) return std::move(q).error();
  q->bind(1, t.id).bind(2, t.hash).bind(3, core::to_string(t.role)).bind(4, t.scope);
  q->bind(5, t.label).bind(6, t.created_at).bind(7, t.expires_at).bind(8, t.revoked_at);
  return q->run("store a token");
}

Result<std::optional<core::TokenInfo>> SqliteTables::find_token(const std::string& id) {
  auto q = db_.query("SELECT " TOKEN_COLUMNS " FROM tokens WHERE id = ?");
  if (q.ok()) q->bind(1, id);
  return one<core::TokenInfo>(db_, std::move(q), token_from, "read a token");
}

Result<std::optional<core::TokenInfo>> SqliteTables::find_token_by_hash(const std::string& hash) {
  auto q = db_.query("SELECT " TOKEN_COLUMNS " FROM tokens WHERE hash = ?");
  if (q.ok()) q->bind(1, hash);
  return one<core::TokenInfo>(db_, std::move(q), token_from, "look up a token");
}

Result<void> SqliteTables::save_token(const core::TokenInfo& t) {
  auto q = db_.query(
      "UPDATE tokens SET role = ?, scope = ?, label = ?, expires_at = ?, revoked_at = ? "
      "WHERE id = ?");
  if (!q.ok()) return std::move(q).error();
  q->bind(1, core::to_string(t.role)).bind(2, t.scope).bind(3, t.label).bind(4, t.expires_at);
  q->bind(5, t.revoked_at).bind(6, t.id);
  return q->run("update a token");
}

Result<std::vector<core::TokenInfo>> SqliteTables::list_tokens() {
  auto q = db_.query("SELECT " TOKEN_COLUMNS " FROM tokens ORDER BY created_at, id");
  return many<core::TokenInfo>(db_, std::move(q), token_from, "list tokens");
}

Result<std::int64_t> SqliteTables::insert_audit(const core::AuditEntry& e) {
  auto q = db_.query(
      "INSERT INTO audit (at, actor, action, ns, status, remote, detail) "
      "VALUES (?, ?, ?, ?, ?, ?, ?)");
  if (!q.ok()) return std::move(q).error();
  q->bind(1, e.at).bind(2, e.actor).bind(3, e.action).bind(4, e.ns);
  q->bind(5, static_cast<std::int64_t>(e.status)).bind(6, e.remote).bind(7, e.detail);
  ICHIDO_TRY(q->run("append to the audit log"));
  return static_cast<std::int64_t>(sqlite3_last_insert_rowid(db_.raw()));
}

Result<std::vector<core::AuditEntry>> SqliteTables::list_audit(std::int64_t after, int limit) {
  auto q = db_.query("SELECT " AUDIT_COLUMNS " FROM audit WHERE id > ? ORDER BY id LIMIT ?");
  if (q.ok()) q->bind(1, after).bind(2, std::int64_t{limit});
  return many<core::AuditEntry>(db_, std::move(q), audit_from, "read the audit log");
}

}  // namespace ichido::store::sqlite
