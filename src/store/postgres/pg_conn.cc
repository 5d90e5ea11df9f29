#include "store/postgres/pg_conn.h"

#include <endian.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <limits>

namespace ichido::store::postgres {
namespace {

constexpr Oid kBool = 16;
constexpr Oid kBytea = 17;
constexpr Oid kInt8 = 20;
constexpr Oid kText = 25;
constexpr Oid kTextArray = 1009;
constexpr Oid kInt8Array = 1016;

using SteadyClock = std::chrono::steady_clock;

// libpq messages end with a newline and may span lines (one per host tried): one line.
std::string one_line(const char* msg) {
  std::string s = msg ? msg : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  for (auto& c : s) {
    if (c == '\n') c = ' ';
  }
  return s.empty() ? "no details from libpq" : s;
}

}  // namespace

Error pg_unavailable(std::string_view what) {
  return Error(errc::store_unavailable,
               "The store is unavailable (PostgreSQL: " + std::string(what) +
                   "); nothing was changed, retry later.");
}

int poll_ms_until(std::chrono::steady_clock::duration left) {
  if (left <= std::chrono::steady_clock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<std::int64_t>(ms, std::numeric_limits<int>::max()));
}

PgFailure classify_sqlstate(std::string_view s) {
  if (s.size() != 5) return PgFailure::unavailable;  // no SQLSTATE: the connection failed
  if (s == "40001" || s == "40P01") return PgFailure::retry;
  const std::string_view cls = s.substr(0, 2);
  if (cls == "08" || cls == "53" || cls == "57" || cls == "58" || cls == "XX") {
    return PgFailure::unavailable;  // connection, resources, operator intervention, system,
                                    // internal
  }
  if (s == "25006") return PgFailure::unavailable;  // read-only transaction: a standby, or demoted
  if (s == "55P03") return PgFailure::busy;         // a lock wait timed out (lock_timeout)
  if (s == "55000" || s == "55006") return PgFailure::unavailable;  // object not in state / in use
  if (s == "26000") return PgFailure::unavailable;  // prepared statement unknown (a pooler)
  if (s == "42P01" || s == "3F000" || s == "42501") {
    return PgFailure::unavailable;  // table or schema missing, or no privilege: operator action
  }
  return PgFailure::statement;
}

// --- Params ----------------------------------------------------------------------------------

void Params::add(Oid type, std::string value, bool null, int format) {
  types_.push_back(type);
  values_.push_back(std::move(value));
  nulls_.push_back(null ? 1 : 0);
  formats_.push_back(format);
}

Params& Params::i64(std::int64_t v) {
  const std::uint64_t be = htobe64(static_cast<std::uint64_t>(v));
  add(kInt8, std::string(reinterpret_cast<const char*>(&be), 8), false, 1);
  return *this;
}

Params& Params::opt_i64(const std::optional<std::int64_t>& v) {
  if (v) return i64(*v);
  add(kInt8, std::string(), true, 1);
  return *this;
}

Params& Params::boolean(bool v) {
  add(kBool, std::string(1, v ? '\1' : '\0'), false, 1);
  return *this;
}

Params& Params::text(std::string_view v) {
  add(kText, std::string(v), false, 1);
  return *this;
}

Params& Params::opt_text(const std::optional<std::string>& v) {
  if (v) return text(*v);
  add(kText, std::string(), true, 1);
  return *this;
}

Params& Params::bytes(std::string_view v) {
  add(kBytea, std::string(v), false, 1);
  return *this;
}

Params& Params::opt_bytes(const std::optional<std::string>& v) {
  if (v) return bytes(*v);
  add(kBytea, std::string(), true, 1);
  return *this;
}

Params& Params::i64_array(const std::vector<std::int64_t>& v) {
  std::string s = "{";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) s.push_back(',');
    s += std::to_string(v[i]);
  }
  s.push_back('}');
  add(kInt8Array, std::move(s), false, 0);
  return *this;
}

Params& Params::text_array(const std::vector<std::string>& v) {
  std::string s = "{";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) s.push_back(',');
    s.push_back('"');
    for (char c : v[i]) {
      if (c == '"' || c == '\\') s.push_back('\\');
      s.push_back(c);
    }
    s.push_back('"');
  }
  s.push_back('}');
  add(kTextArray, std::move(s), false, 0);
  return *this;
}

// --- PgResult ---------------------------------------------------------------------------------

std::int64_t PgResult::i64(int row, int col) const {
  const char* p = PQgetvalue(r_.get(), row, col);
  switch (PQgetlength(r_.get(), row, col)) {
    case 8: {
      std::uint64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<std::int64_t>(be64toh(v));
    }
    case 4: {
      std::uint32_t v;
      std::memcpy(&v, p, 4);
      return static_cast<std::int32_t>(be32toh(v));
    }
    case 2: {
      std::uint16_t v;
      std::memcpy(&v, p, 2);
      return static_cast<std::int16_t>(be16toh(v));
    }
    default:
      return 0;
  }
}

bool PgResult::boolean(int row, int col) const {
  return PQgetlength(r_.get(), row, col) == 1 && PQgetvalue(r_.get(), row, col)[0] != 0;
}

std::string PgResult::str(int row, int col) const {
  return std::string(PQgetvalue(r_.get(), row, col),
                     static_cast<std::size_t>(PQgetlength(r_.get(), row, col)));
}

std::optional<std::int64_t> PgResult::opt_i64(int row, int col) const {
  if (is_null(row, col)) return std::nullopt;
  return i64(row, col);
}

std::optional<std::string> PgResult::opt_str(int row, int col) const {
  if (is_null(row, col)) return std::nullopt;
  return str(row, col);
}

std::int64_t PgResult::affected() const {
  const char* n = r_ ? PQcmdTuples(r_.get()) : "";
  return *n ? std::strtoll(n, nullptr, 10) : 0;
}

// --- PgConn -----------------------------------------------------------------------------------

PgConn::PgConn(PGconn* c, const Settings& s) : conn_(c), settings_(s) {}

PgConn::~PgConn() {
  if (conn_) PQfinish(conn_);
}

Result<std::unique_ptr<PgConn>> PgConn::connect(const Settings& s) {
  // Defaults first (the conninfo may override them), then the conninfo, then what ichido needs
  // whatever the conninfo says: UTF-8 text. Keepalives make a silently dead peer an error.
  const std::string timeout = std::to_string(s.connect_timeout_s);
  const char* keys[] = {"connect_timeout", "application_name",    "keepalives",
                        "keepalives_idle", "keepalives_interval", "keepalives_count",
                        "dbname",          "client_encoding",     nullptr};
  const char* values[] = {
      timeout.c_str(), s.application_name.c_str(), "1", "10", "5", "3", s.conninfo.c_str(), "UTF8",
      nullptr};
  PGconn* c = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (!c) return pg_unavailable("out of memory creating a connection");
  if (PQstatus(c) != CONNECTION_OK) {
    Error e = pg_unavailable("cannot connect: " + one_line(PQerrorMessage(c)));
    PQfinish(c);
    return e;
  }
  // Notices (DROP ... CASCADE details, "no transaction in progress") are not errors; libpq would
  // print them on stderr.
  PQsetNoticeProcessor(c, [](void*, const char*) {}, nullptr);
  if (PQsetnonblocking(c, 1) != 0 || PQenterPipelineMode(c) != 1) {
    Error e = pg_unavailable("cannot enter pipeline mode: " + one_line(PQerrorMessage(c)));
    PQfinish(c);
    return e;
  }
  return std::unique_ptr<PgConn>(new PgConn(c, s));
}

std::string PgConn::server() const {
  if (!conn_) return "?";
  const char* h = PQhost(conn_);
  const char* p = PQport(conn_);
  std::string host = h ? h : "?";
  if (!host.empty() && host[0] == '/') return host + " (socket " + (p ? p : "") + ")";
  return host + ":" + (p ? p : "");
}

void PgConn::note_broken(const std::string& why, bool timed_out) {
  if (!broken_) {
    broken_ = true;
    timed_out_ = timed_out;
    if (failure_ == PgFailure::none || failure_ == PgFailure::statement) {
      failure_ = PgFailure::unavailable;
      sqlstate_.clear();
      message_ = why;
    }
  }
  pending_.clear();
}

void PgConn::note_failure(PGresult* r) {
  if (PQstatus(conn_) == CONNECTION_BAD) {
    note_broken("connection lost: " +
                one_line(r ? PQresultErrorMessage(r) : PQerrorMessage(conn_)));
    return;
  }
  if (failure_ != PgFailure::none) return;  // keep the first
  const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  sqlstate_ = state ? state : "";
  message_ = one_line(r ? PQresultErrorMessage(r) : PQerrorMessage(conn_));
  if (!sqlstate_.empty()) message_ += " [SQLSTATE " + sqlstate_ + "]";
  failure_ = classify_sqlstate(sqlstate_);
  // The server ends the session after these (terminated, shutting down, connection errors):
  // the socket's EOF may not have been read yet, but the connection is gone all the same.
  if (sqlstate_.rfind("08", 0) == 0 || sqlstate_ == "57P01" || sqlstate_ == "57P02" ||
      sqlstate_ == "57P03") {
    broken_ = true;
    pending_.clear();
  }
}

Error PgConn::current_error() const {
  return pg_unavailable(message_.empty() ? "a statement failed" : message_);
}

void PgConn::queue(const Stmt& stmt, const Params& params, Entry kind,
                   std::function<void(const PgResult&)> on_result) {
  if (broken_) return;
  if (!segment_open_) {
    // A new pipeline segment starts clean. (After a failure the server skips everything until
    // the next sync point, so the failure sticks to the segment, not to one statement.)
    failure_ = PgFailure::none;
    sqlstate_.clear();
    message_.clear();
    // Segments ended by sync_nowait() are read to their last ReadyForQuery before anything new
    // is sent (see sync_nowait()). Their failure, if any, is this segment's (reported by the
    // next query() or sync(), as sync_nowait() promises); a lost connection stops here.
    while (!pending_.empty()) {
      if (!read_front(nullptr).ok()) return;
    }
    segment_open_ = true;
  }
  const int n = params.size();
  std::vector<const char*> values(n);
  std::vector<int> lengths(n);
  for (int i = 0; i < n; ++i) {
    values[i] = params.nulls_[i] ? nullptr : params.values_[i].data();
    lengths[i] = static_cast<int>(params.values_[i].size());
  }
  bool ok;
  if (settings_.mode == Mode::prepared) {
    auto it = prepared_.find(stmt.sql);
    if (it == prepared_.end()) {
      const std::string name = "ichido_" + std::to_string(next_name_++);
      ok = PQsendPrepare(conn_, name.c_str(), stmt.sql.c_str(), n, params.types()) == 1;
      if (!ok) return note_broken("cannot send: " + one_line(PQerrorMessage(conn_)));
      it = prepared_.emplace(stmt.sql, name).first;
      pending_.push_back({Entry::prepare, stmt.sql, {}});
    }
    ok = PQsendQueryPrepared(conn_, it->second.c_str(), n, values.data(), lengths.data(),
                             params.formats_.data(), /*resultFormat=*/1) == 1;
  } else {
    ok = PQsendQueryParams(conn_, stmt.sql.c_str(), n, params.types(), values.data(),
                           lengths.data(), params.formats_.data(), /*resultFormat=*/1) == 1;
  }
  if (!ok) return note_broken("cannot send: " + one_line(PQerrorMessage(conn_)));
  pending_.push_back({kind, {}, std::move(on_result)});
}

void PgConn::send(const Stmt& stmt, const Params& params) { queue(stmt, params, Entry::discard); }

void PgConn::send_read(const Stmt& stmt, const Params& params,
                       std::function<void(const PgResult&)> on_result) {
  queue(stmt, params, Entry::callback, std::move(on_result));
}

Result<void> PgConn::wait_results() {
  if (broken_) return current_error();
  if (!pending_.empty()) {
    if (PQsendFlushRequest(conn_) != 1) {
      note_broken("cannot send: " + one_line(PQerrorMessage(conn_)));
      return current_error();
    }
    ICHIDO_TRY(flush());
    while (!pending_.empty()) ICHIDO_TRY(read_front(nullptr));
  }
  if (failure_ != PgFailure::none) return current_error();
  return {};
}

SteadyClock::time_point PgConn::wait_until(bool* by_deadline) const {
  const auto io = SteadyClock::now() + std::chrono::milliseconds(settings_.io_timeout_ms);
  *by_deadline = deadline_ && *deadline_ < io;
  return *by_deadline ? *deadline_ : io;
}

void PgConn::note_wait_ended(bool by_deadline, const std::string& why) {
  if (by_deadline) {
    deadline_passed_ = true;
    note_broken("no answer within the request's time bound (--store-timeout)",
                /*timed_out=*/true);
  } else {
    note_broken(why, /*timed_out=*/true);
  }
}

Result<void> PgConn::flush() {
  bool by_deadline = false;
  const auto deadline = wait_until(&by_deadline);
  for (;;) {
    const int r = PQflush(conn_);
    if (r == 0) return {};
    if (r < 0) {
      note_broken("cannot send: " + one_line(PQerrorMessage(conn_)));
      return current_error();
    }
    const int left = poll_ms_until(deadline - SteadyClock::now());
    if (left == 0) {
      note_wait_ended(by_deadline, "the server took no data for " +
                                       std::to_string(settings_.io_timeout_ms) + " ms");
      return current_error();
    }
    pollfd p{PQsocket(conn_), POLLOUT | POLLIN, 0};
    const int pr = ::poll(&p, 1, left);
    if (pr < 0 && errno != EINTR) {
      note_broken(std::string("poll failed: ") + std::strerror(errno));
      return current_error();
    }
    if (pr > 0 && (p.revents & POLLIN) && !PQconsumeInput(conn_)) {
      note_broken("connection lost: " + one_line(PQerrorMessage(conn_)));
      return current_error();
    }
  }
}

Result<PGresult*> PgConn::next_result() {
  bool by_deadline = false;
  const auto deadline = wait_until(&by_deadline);
  while (PQisBusy(conn_)) {
    const int left = poll_ms_until(deadline - SteadyClock::now());
    if (left == 0) {
      note_wait_ended(by_deadline,
                      "no answer within " + std::to_string(settings_.io_timeout_ms) + " ms");
      return current_error();
    }
    pollfd p{PQsocket(conn_), POLLIN, 0};
    const int pr = ::poll(&p, 1, left);
    if (pr < 0 && errno != EINTR) {
      note_broken(std::string("poll failed: ") + std::strerror(errno));
      return current_error();
    }
    if (pr > 0 && !PQconsumeInput(conn_)) {
      note_broken("connection lost: " + one_line(PQerrorMessage(conn_)));
      return current_error();
    }
  }
  return PQgetResult(conn_);
}

Result<void> PgConn::read_front(PgResult* out) {
  const Pending p = std::move(pending_.front());
  auto first = next_result();
  if (!first.ok()) return std::move(first).error();
  PGresult* r = *first;
  if (p.kind == Entry::sync) {
    const bool is_sync = r && PQresultStatus(r) == PGRES_PIPELINE_SYNC;
    if (r) PQclear(r);
    if (!is_sync) {
      note_broken("unexpected answer at a pipeline sync point");
      return current_error();
    }
    pending_.pop_front();
    return {};
  }
  if (!r) {
    // Results of a command end with a null; a null first means the connection went away.
    note_broken("connection lost: " + one_line(PQerrorMessage(conn_)));
    return current_error();
  }
  switch (PQresultStatus(r)) {
    case PGRES_COMMAND_OK:
    case PGRES_TUPLES_OK:
      if (out && p.kind == Entry::keep) {
        *out = PgResult(r);
        r = nullptr;
      } else if (p.kind == Entry::callback && p.on_result) {
        p.on_result(PgResult(r));
        r = nullptr;
      }
      break;
    case PGRES_PIPELINE_ABORTED:
      if (p.kind == Entry::prepare) prepared_.erase(p.name);
      if (failure_ == PgFailure::none) {
        failure_ = PgFailure::statement;
        message_ = "a statement was skipped after an earlier failure";
      }
      break;
    default:
      if (p.kind == Entry::prepare) prepared_.erase(p.name);
      note_failure(r);
      break;
  }
  if (r) PQclear(r);
  if (broken_) return current_error();
  // The terminating null of this command's results.
  auto end = next_result();
  if (!end.ok()) return std::move(end).error();
  if (*end != nullptr) {
    PQclear(*end);
    note_broken("more than one result for one statement");
    return current_error();
  }
  pending_.pop_front();
  return {};
}

Result<PgResult> PgConn::query(const Stmt& stmt, const Params& params) {
  queue(stmt, params, Entry::keep);
  if (broken_) return current_error();
  if (PQsendFlushRequest(conn_) != 1) {
    note_broken("cannot send: " + one_line(PQerrorMessage(conn_)));
    return current_error();
  }
  ICHIDO_TRY(flush());
  PgResult out;
  while (!pending_.empty()) {
    ICHIDO_TRY(read_front(pending_.size() == 1 ? &out : nullptr));
  }
  if (failure_ != PgFailure::none) return current_error();
  return out;
}

Result<void> PgConn::sync() {
  if (broken_) return current_error();
  if (PQpipelineSync(conn_) != 1) {
    note_broken("cannot send: " + one_line(PQerrorMessage(conn_)));
    return current_error();
  }
  pending_.push_back({Entry::sync, {}, {}});
  segment_open_ = false;
  ICHIDO_TRY(flush());
  while (!pending_.empty()) ICHIDO_TRY(read_front(nullptr));
  if (failure_ != PgFailure::none) return current_error();
  return {};
}

Result<void> PgConn::sync_nowait() {
  if (broken_) return current_error();
  if (PQpipelineSync(conn_) != 1) {
    note_broken("cannot send: " + one_line(PQerrorMessage(conn_)));
    return current_error();
  }
  pending_.push_back({Entry::sync, {}, {}});
  segment_open_ = false;
  return flush();
}

Result<void> PgConn::exec_script(const std::string& sql) {
  if (broken_) return current_error();
  if (!pending_.empty() || segment_open_) {
    return pg_unavailable("internal: a script was run inside an open pipeline segment");
  }
  failure_ = PgFailure::none;
  sqlstate_.clear();
  message_.clear();
  if (PQexitPipelineMode(conn_) != 1 || PQsetnonblocking(conn_, 0) != 0) {
    note_broken("cannot leave pipeline mode: " + one_line(PQerrorMessage(conn_)));
    return current_error();
  }
  PGresult* r = PQexec(conn_, sql.c_str());
  const bool ok =
      r && (PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK);
  if (!ok) note_failure(r);
  if (r) PQclear(r);
  // Drain anything left (PQexec returns the last result; there is no more).
  if (PQsetnonblocking(conn_, 1) != 0 || PQenterPipelineMode(conn_) != 1) {
    note_broken("cannot re-enter pipeline mode: " + one_line(PQerrorMessage(conn_)));
  }
  if (!ok || broken_) return current_error();
  return {};
}

}  // namespace ichido::store::postgres
