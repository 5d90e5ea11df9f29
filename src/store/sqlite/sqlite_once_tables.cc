// SqliteTables: the once-record rows (table once_records, schema migrations 4, 6, 10 and 11).
#include <array>
#include <iterator>

#include "store/once_sql.h"
#include "store/sqlite/sqlite_tables.h"

namespace ichido::store::sqlite {
namespace {

#define ONCE_COLUMNS                                                                         \
  "key, state, owner, fingerprint, token, attempt, max_attempts, lease_expires_at, result, " \
  "last_error, holder_done, created_at, updated_at, finished_at, request_id, replayed"

Result<core::OnceState> parse_state(const std::string& s) {
  if (s == "processing") return core::OnceState::processing;
  if (s == "pending") return core::OnceState::pending;
  if (s == "completed") return core::OnceState::completed;
  if (s == "dead") return core::OnceState::dead;
  return Error(errc::store_unavailable, "The store holds a once record in an unknown state.");
}

// The record from ONCE_COLUMNS.
Result<core::OnceRecord> once_from(const Query& q) {
  core::OnceRecord r;
  r.key = q.text(0);
  auto state = parse_state(q.text(1));
  if (!state.ok()) return std::move(state).error();
  r.state = *state;
  r.owner = q.text(2);
  r.fingerprint = q.opt_text(3);
  r.token = q.int64(4);
  r.attempt = q.int64(5);
  r.max_attempts = q.int64(6);
  r.lease_expires_at = q.int64(7);
  r.result = q.opt_text(8);
  r.last_error = q.text(9);
  r.holder_done = q.int64(10) != 0;
  r.created_at = q.int64(11);
  r.updated_at = q.int64(12);
  r.finished_at = q.opt_int64(13);
  r.request_id = q.opt_text(14);
  r.replayed = q.int64(15) != 0;
  return r;
}

// ?1 ns, ?2 key, ?3… the record's other columns in ONCE_COLUMNS order (?17 replayed).
void bind_once(Query& q, const std::string& ns, const core::OnceRecord& r) {
  q.bind(1, ns).bind(2, r.key).bind(3, core::to_string(r.state)).bind(4, r.owner);
  q.bind(5, r.fingerprint).bind(6, r.token).bind(7, r.attempt).bind(8, r.max_attempts);
  q.bind(9, r.lease_expires_at).bind(10, r.result).bind(11, r.last_error);
  q.bind(12, std::int64_t{r.holder_done}).bind(13, r.created_at).bind(14, r.updated_at);
  q.bind(15, r.finished_at).bind(16, r.request_id).bind(17, std::int64_t{r.replayed});
}

#define ONCE_INSERT                             \
  "INSERT INTO once_records (ns, " ONCE_COLUMNS \
  ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)"

Result<std::vector<core::OnceRecord>> rows(Db& db, Result<Query> q) {
  if (!q.ok()) return std::move(q).error();
  std::vector<core::OnceRecord> out;
  for (;;) {
    const int rc = q->step();
    if (rc == SQLITE_DONE) return out;
    if (rc != SQLITE_ROW) return db.error("list once records");
    auto r = once_from(*q);
    if (!r.ok()) return std::move(r).error();
    out.push_back(std::move(*r));
  }
}

// The listing of each filter (once_sql.h), built once and kept at one address, so that Db finds
// its prepared statement by that address. ?1 ns, ?2 after, then ?3 now when the filter looks at
// the lease, and the limit last. Open states add ICHIDO_ONCE_OPEN to be served by once_open;
// completed records (most of a namespace) are found through the (ns, key) unique index, each
// row's state read from the table, so the first `limit` come after few others.
const char* list_once_sql(core::OnceFilter f) {
  static const auto sql = [] {
    std::array<std::string, std::size(core::kOnceFilters)> out;
    for (const core::OnceFilter each : core::kOnceFilters) {
      const auto state = core::filter_terms(each).state;
      std::string& q = out[static_cast<std::size_t>(each)];
      q = "SELECT " ONCE_COLUMNS " FROM once_records WHERE ns = ?1 AND key > ?2";
      if (const std::string w = once_sql::where(each, "?3"); !w.empty()) q += " AND " + w;
      if (state && *state != core::OnceState::completed) q += " AND " ICHIDO_ONCE_OPEN;
      q += once_sql::uses_now(each) ? " ORDER BY key LIMIT ?4" : " ORDER BY key LIMIT ?3";
    }
    return out;
  }();
  return sql[static_cast<std::size_t>(f)].c_str();
}

}  // namespace

Result<std::optional<core::OnceRecord>> SqliteTables::find_once(const std::string& ns,
                                                                const std::string& key) {
  if (cache_) cache_->absent_once_.clear();
  auto q = db_.query("SELECT " ONCE_COLUMNS " FROM once_records WHERE ns = ? AND key = ?");
  if (!q.ok()) return std::move(q).error();
  q->bind(1, ns).bind(2, key);
  const int rc = q->step();
  if (rc == SQLITE_DONE) {
    if (cache_) cache_->absent_once_ = row_key(ns, key);
    return std::optional<core::OnceRecord>();
  }
  if (rc != SQLITE_ROW) return db_.error("read a once record");
  auto r = once_from(*q);
  if (!r.ok()) return std::move(r).error();
  return std::optional<core::OnceRecord>(std::move(*r));
}

// An UPDATE first, an INSERT when there was no row. Both statements take the same numbered
// parameters. Cheaper than `INSERT … ON CONFLICT DO UPDATE`, whose update path costs about a
// third more than a plain UPDATE (measured with this table and its indexes); most saves are
// updates (complete, fail, renew), and a new record pays one missed index lookup.
Result<void> SqliteTables::save_once(const std::string& ns, const core::OnceRecord& r) {
  bool absent = false;  // the writer's job just found no row (WriterCache::absent_once_)
  if (cache_ && !cache_->absent_once_.empty()) {
    absent = cache_->absent_once_ == row_key(ns, r.key);
    cache_->absent_once_.clear();
  }
  auto bind = [&](Query& q) { bind_once(q, ns, r); };
#define ONCE_SET                                                                             \
  "UPDATE once_records SET state = ?3, owner = ?4, fingerprint = ?5, token = ?6, "           \
  "attempt = ?7, max_attempts = ?8, lease_expires_at = ?9, result = ?10, last_error = ?11, " \
  "holder_done = ?12, created_at = ?13, updated_at = ?14, finished_at = ?15, request_id = "  \
  "?16, replayed = ?17 "
  if (!absent) {
    auto q = db_.query(ONCE_SET "WHERE ns = ?1 AND key = ?2");
    if (!q.ok()) return std::move(q).error();
    bind(*q);
    ICHIDO_TRY(q->run("save a once record"));
    if (sqlite3_changes(db_.raw()) > 0) return {};
  }
#undef ONCE_SET
  auto q = db_.query(ONCE_INSERT);
  if (!q.ok()) return std::move(q).error();
  bind(*q);
  ICHIDO_TRY(q->run("save a once record"));
  return {};
}

// The insert's own search of the (ns, key) unique index tells whether the key is taken, so a new
// key costs one search of it instead of find_once's and then the insert's. The token the row
// carries is the one next_token will draw (peek_token), drawn only once the row is in: a key
// found taken leaves the sequence as it was, as the default implementation does.
Result<std::optional<core::OnceRecord>> SqliteTables::insert_once_unless_found(
    const std::string& ns, core::OnceRecord& rec) {
  if (cache_) cache_->absent_once_.clear();
  auto token = peek_token();
  if (!token.ok()) return std::move(token).error();
  rec.token = *token;
  ICHIDO_TRY(core::check_invariants(rec));
  auto q = db_.query(ONCE_INSERT " ON CONFLICT (ns, key) DO NOTHING");
  if (!q.ok()) return std::move(q).error();
  bind_once(*q, ns, rec);
  ICHIDO_TRY(q->run("save a once record"));
  if (sqlite3_changes(db_.raw()) == 0) {
    rec.token = 0;  // not drawn
    auto found = find_once(ns, rec.key);
    if (found.ok() && !*found) {
      return Error(errc::internal,
                   "A once record's key was taken, and then no record with it was found; nothing "
                   "was changed.");
    }
    return found;
  }
  auto drawn = next_token();
  if (!drawn.ok()) return std::move(drawn).error();
  if (*drawn != rec.token) {
    return Error(errc::internal, "The token sequence moved while a once record was inserted.");
  }
  return std::optional<core::OnceRecord>();
}

Result<bool> SqliteTables::delete_once(const std::string& ns, const std::string& key) {
  auto q = db_.query("DELETE FROM once_records WHERE ns = ? AND key = ?");
  if (!q.ok()) return std::move(q).error();
  q->bind(1, ns).bind(2, key);
  ICHIDO_TRY(q->run("delete a once record"));
  return sqlite3_changes(db_.raw()) > 0;
}

Result<std::vector<core::OnceRecord>> SqliteTables::list_once(const std::string& ns,
                                                              core::OnceFilter filter, TimeMs now,
                                                              const std::string& after, int limit) {
  auto q = db_.query(list_once_sql(filter));
  if (!q.ok()) return std::move(q).error();
  q->bind(1, ns).bind(2, after);
  if (once_sql::uses_now(filter)) {
    q->bind(3, now).bind(4, std::int64_t{limit});
  } else {
    q->bind(3, std::int64_t{limit});
  }
  return rows(db_, std::move(q));
}

Result<std::int64_t> SqliteTables::purge_once_in(const std::string& ns, TimeMs older_than,
                                                 int limit) {
  // Index once_ns_finished (migration 6): a range of (ns, finished_at), oldest first.
  auto q = db_.query(
      "DELETE FROM once_records WHERE id IN (SELECT id FROM once_records "
      "WHERE ns = ? AND finished_at IS NOT NULL AND finished_at < ? ORDER BY finished_at "
      "LIMIT ?)");
  if (!q.ok()) return std::move(q).error();
  q->bind(1, ns).bind(2, older_than).bind(3, std::int64_t{limit});
  ICHIDO_TRY(q->run("purge finished once records"));
  return static_cast<std::int64_t>(sqlite3_changes(db_.raw()));
}

}  // namespace ichido::store::sqlite
