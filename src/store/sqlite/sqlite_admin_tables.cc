// SqliteTables: tokens and the audit log.
#include <algorithm>
#include <limits>

#include "store/once_sql.h"
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

// Empty filters are bound as '' / NULL and match everything; the id range uses the primary key.
#define AUDIT_FILTER                                                   \
  " FROM audit WHERE id > ?1 AND id < ?2 AND (?3 = '' OR actor = ?3) " \
  "AND (?4 = '' OR instr(action, ?4) > 0) AND (?5 IS NULL OR ns = ?5) "

Result<std::vector<core::AuditEntry>> SqliteTables::list_audit(const AuditQuery& a) {
  auto q =
      db_.query(a.newest_first ? "SELECT " AUDIT_COLUMNS AUDIT_FILTER "ORDER BY id DESC LIMIT ?6"
                               : "SELECT " AUDIT_COLUMNS AUDIT_FILTER "ORDER BY id LIMIT ?6");
  if (q.ok()) {
    q->bind(1, a.after).bind(2, a.before.value_or(std::numeric_limits<std::int64_t>::max()));
    q->bind(3, a.actor).bind(4, a.action).bind(5, a.ns).bind(6, std::int64_t{a.limit});
  }
  return many<core::AuditEntry>(db_, std::move(q), audit_from, "read the audit log");
}

Result<std::optional<NamespaceSettings>> SqliteTables::find_ns_settings(const std::string& ns) {
  auto q = db_.query("SELECT once_retention_ms FROM ns_settings WHERE ns = ?");
  if (!q.ok()) return std::move(q).error();
  q->bind(1, ns);
  const int rc = q->step();
  if (rc == SQLITE_DONE) return std::optional<NamespaceSettings>();
  if (rc != SQLITE_ROW) return db_.error("read namespace settings");
  return std::optional<NamespaceSettings>(NamespaceSettings{q->opt_int64(0)});
}

Result<void> SqliteTables::save_ns_settings(const std::string& ns, const NamespaceSettings& s) {
  if (s == NamespaceSettings{}) {
    auto q = db_.query("DELETE FROM ns_settings WHERE ns = ?");
    if (!q.ok()) return std::move(q).error();
    return q->bind(1, ns).run("clear namespace settings");
  }
  auto q = db_.query("INSERT OR REPLACE INTO ns_settings (ns, once_retention_ms) VALUES (?, ?)");
  if (!q.ok()) return std::move(q).error();
  return q->bind(1, ns).bind(2, s.once_retention_ms).run("save namespace settings");
}

// Distinct namespaces by index skipping (a recursive MIN(ns) > previous per table): one index
// probe per namespace instead of a scan of every row. Portable SQL (PostgreSQL runs it as is).
Result<std::vector<std::string>> SqliteTables::list_namespaces() {
  auto q = db_.query(
      "WITH RECURSIVE "
      "c(ns) AS (SELECT MIN(ns) FROM counters UNION ALL "
      "  SELECT (SELECT MIN(ns) FROM counters WHERE ns > c.ns) FROM c WHERE c.ns IS NOT NULL), "
      "o(ns) AS (SELECT MIN(ns) FROM once_records UNION ALL "
      "  SELECT (SELECT MIN(ns) FROM once_records WHERE ns > o.ns) FROM o "
      "  WHERE o.ns IS NOT NULL), "
      "l(ns) AS (SELECT MIN(ns) FROM locks UNION ALL "
      "  SELECT (SELECT MIN(ns) FROM locks WHERE ns > l.ns) FROM l WHERE l.ns IS NOT NULL) "
      "SELECT ns FROM c WHERE ns IS NOT NULL UNION SELECT ns FROM o WHERE ns IS NOT NULL "
      "UNION SELECT ns FROM l WHERE ns IS NOT NULL ORDER BY 1");
  return many<std::string>(
      db_, std::move(q), [](const Query& r) { return r.text(0); }, "list namespaces");
}

// Open records (processing, pending, dead) are counted on the partial index once_open; completed
// ones, which that index does not hold, as every record of the namespace less the open ones —
// one range of the (ns, key) unique index, stopped at `cap` plus the open count. Exact below the
// cap in one snapshot (every read runs in a transaction). When an open count itself reached the
// cap, the difference would be wrong: then the completed ones are counted row by row. Processing
// rows are read once: the lapsed ones (once_sql.h, OnceFilter::expired) counted among them, the
// live ones are the rest.
Result<OnceCounts> SqliteTables::count_once(const std::string& ns, TimeMs now, std::int64_t cap) {
  using F = core::OnceFilter;
  // Built once (Db finds each prepared statement by the text's address). ?1 ns, ?2 the cap.
  const auto capped_count = [](F f) {
    std::string q = "SELECT COUNT(*) FROM (SELECT 1 FROM once_records WHERE ns = ?1 AND " +
                    once_sql::state_term(f);
    if (f != F::completed) q += " AND " ICHIDO_ONCE_OPEN;
    return q + " LIMIT ?2)";
  };
  static const std::string kPending = capped_count(F::pending);
  static const std::string kDead = capped_count(F::dead);
  static const std::string kCompleted = capped_count(F::completed);
  // ?1 ns, ?2 now, ?3 the cap.
  static const std::string kProcessing = [] {
    const std::string lapsed = once_sql::lease_term(F::expired, "?2");
    return "SELECT COUNT(*), COALESCE(SUM(" + lapsed + "), 0), MIN(CASE WHEN " + lapsed +
           " THEN lease_expires_at END) FROM (SELECT lease_expires_at FROM once_records WHERE "
           "ns = ?1 AND " +
           once_sql::state_term(F::expired) +  // the processing rows, live or lapsed
           " AND " ICHIDO_ONCE_OPEN " LIMIT ?3)";
  }();

  OnceCounts c;
  auto count = [&](Result<Query> q, std::int64_t limit, std::int64_t& out) -> Result<void> {
    if (!q.ok()) return std::move(q).error();
    q->bind(1, ns).bind(2, limit);
    if (q->step() != SQLITE_ROW) return db_.error("count once records");
    out = q->int64(0);
    return {};
  };
  auto count_capped = [&](Result<Query> q, std::int64_t& out) -> Result<void> {
    ICHIDO_TRY(count(std::move(q), cap, out));
    if (out >= cap) c.capped = true;
    return {};
  };
  ICHIDO_TRY(count_capped(db_.query(kPending.c_str()), c.pending));
  ICHIDO_TRY(count_capped(db_.query(kDead.c_str()), c.dead));
  auto q = db_.query(kProcessing.c_str());
  if (!q.ok()) return std::move(q).error();
  q->bind(1, ns).bind(2, now).bind(3, cap);
  if (q->step() != SQLITE_ROW) return db_.error("count once records");
  const std::int64_t processing = q->int64(0);
  if (processing >= cap) c.capped = true;
  c.expired = q->int64(1);
  c.processing = processing - c.expired;
  c.oldest_expired_lease = q->opt_int64(2);

  if (c.capped) {
    ICHIDO_TRY(count_capped(db_.query(kCompleted.c_str()), c.completed));
    return c;
  }
  const std::int64_t open = c.pending + c.dead + processing;
  std::int64_t all = 0;
  ICHIDO_TRY(count(db_.query("SELECT COUNT(*) FROM (SELECT 1 FROM once_records WHERE ns = ?1 "
                             "LIMIT ?2)"),
                   cap + open, all));
  c.completed = std::min(all - open, cap);
  if (c.completed >= cap) c.capped = true;
  return c;
}

}  // namespace ichido::store::sqlite
