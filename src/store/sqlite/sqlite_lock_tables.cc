// SqliteTables: the lock rows (table `locks`, schema migration "locks").
#include "store/lease_sql.h"
#include "store/sqlite/sqlite_tables.h"

namespace ichido::store::sqlite {
namespace {

#define LOCK_COLUMNS "name, owner, token, acquired_at, lease_expires_at, request_id, replayed"

// The record from LOCK_COLUMNS.
core::LockRecord lock_from(const Query& q) {
  return core::LockRecord{q.text(0),  q.text(1),     q.int64(2),   q.int64(3),
                          q.int64(4), q.opt_text(5), std::nullopt, q.int64(6) != 0};
}

}  // namespace

Result<std::optional<core::LockRecord>> SqliteTables::find_lock(const std::string& ns,
                                                                const std::string& name) {
  auto q = db_.query("SELECT " LOCK_COLUMNS " FROM locks WHERE ns = ? AND name = ?");
  if (!q.ok()) return std::move(q).error();
  q->bind(1, ns).bind(2, name);
  const int rc = q->step();
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) return db_.error("read a lock");
  std::optional<core::LockRecord> found;
  if (rc == SQLITE_ROW) found = lock_from(*q);
  return found;
}

Result<void> SqliteTables::save_lock(const std::string& ns, const core::LockRecord& r) {
  auto q = db_.query(
      "INSERT INTO locks (ns, " LOCK_COLUMNS
      ") VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
      "ON CONFLICT (ns, name) DO UPDATE SET owner = excluded.owner, token = excluded.token, "
      "acquired_at = excluded.acquired_at, lease_expires_at = excluded.lease_expires_at, "
      "request_id = excluded.request_id, replayed = excluded.replayed");
  if (!q.ok()) return std::move(q).error();
  q->bind(1, ns).bind(2, r.name).bind(3, r.owner).bind(4, r.token).bind(5, r.acquired_at);
  q->bind(6, r.lease_expires_at).bind(7, r.request_id).bind(8, std::int64_t{r.replayed});
  ICHIDO_TRY(q->run("save a lock"));
  return {};
}

Result<void> SqliteTables::delete_lock(const std::string& ns, const std::string& name) {
  auto q = db_.query("DELETE FROM locks WHERE ns = ? AND name = ?");
  if (!q.ok()) return std::move(q).error();
  q->bind(1, ns).bind(2, name);
  ICHIDO_TRY(q->run("delete a lock"));
  return {};
}

Result<std::vector<core::LockRecord>> SqliteTables::list_live_locks(const std::string& ns,
                                                                    TimeMs now) {
  // The held locks (core/lock.h L3) through lease_sql.h's live term. Built once (Db finds the
  // prepared statement by the text's address). ?1 ns, ?2 now.
  static const std::string kSql = "SELECT " LOCK_COLUMNS " FROM locks WHERE ns = ?1 AND " +
                                  lease_sql::term(core::LeaseSide::live, "?2") + " ORDER BY name";
  auto q = db_.query(kSql.c_str());
  if (!q.ok()) return std::move(q).error();
  q->bind(1, ns).bind(2, now);
  std::vector<core::LockRecord> out;
  for (;;) {
    const int rc = q->step();
    if (rc == SQLITE_DONE) return out;
    if (rc != SQLITE_ROW) return db_.error("list locks");
    out.push_back(lock_from(*q));
  }
}

}  // namespace ichido::store::sqlite
