// PgConn: one libpq connection in pipeline mode, for the PostgreSQL store (write lanes, readers,
// the health monitor, the LISTEN connection that wakes waiters across nodes) and for anything
// else that needs a connection of its own (the token CLI).
//
// Every statement goes through the extended protocol in pipeline mode: `send` queues a statement
// whose result nobody waits for (a write whose only possible answer is "done" — its failure is
// seen by the next call that waits), `query` queues one and waits for it (and so for everything
// queued before it), `sync` ends a pipeline segment and reports its first failure. So a job's
// writes cost no round trip of their own, and BEGIN + settings + the lock statement travel
// together. Parameters and results use the binary format (int8, bool, text, bytea).
//
// Statements are named and prepared once per connection on first use (`Mode::prepared`), or sent
// as unnamed statements every time (`Mode::unnamed`: what PgBouncer < 1.21 in transaction pooling
// mode needs, since a named statement prepared on one server connection is unknown on the next).
//
// No session state is ever set (no SET, no session advisory locks, no temp tables): transaction
// settings use SET LOCAL semantics (set_config(..., true)), so a connection may be one of
// PgBouncer's pooled server connections in transaction mode.
//
// Failures are classified (PgFailure) so that callers can tell "run the transaction again"
// (serialization failure, deadlock) from "this statement is wrong" from "the server cannot serve
// now" (down, restarting, read-only, full, connection lost). Every wait has a deadline
// (io_timeout_ms): a server that stops answering breaks the connection instead of hanging a thread.
//
// Lifecycle: connect() → use → destroy (closes). Once broken() it stays broken: make a new one.
// Thread-safety: none; one thread uses a connection at a time.
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ichido/result.h"

namespace ichido::store::postgres {

enum class PgFailure {
  none,
  retry,        // 40001 serialization failure, 40P01 deadlock: the transaction can run again
  busy,         // 55P03: a row or key lock was held by another transaction past lock_timeout —
                // that record's trouble, not the database's: the connection is fine
  statement,    // the statement failed (a bug, bad data); the connection is fine
  unavailable,  // the server cannot serve now (down, shutting down, read-only, disk full) or
                // the connection is gone: nothing was changed, retry later
};

// The store's error for a failed statement or connection: store_unavailable with the server's
// message (never a secret: libpq messages name hosts and users, not passwords).
Error pg_unavailable(std::string_view what);

// A statement. Its text is its identity: a connection prepares each distinct text once.
struct Stmt {
  std::string sql;
};

// Parameters in the binary format, with their types. Values are copied in.
class Params {
 public:
  Params& i64(std::int64_t v);
  Params& opt_i64(const std::optional<std::int64_t>& v);
  Params& boolean(bool v);
  Params& text(std::string_view v);  // must be valid UTF-8 without NUL (the server checks)
  Params& opt_text(const std::optional<std::string>& v);
  Params& bytes(std::string_view v);  // bytea: any bytes
  Params& opt_bytes(const std::optional<std::string>& v);
  // int8[] and text[] (sent in the text format, e.g. {1,-2,3} and {"a","b\\"c"}); strings
  // must be valid UTF-8 without NUL.
  Params& i64_array(const std::vector<std::int64_t>& v);
  Params& text_array(const std::vector<std::string>& v);

  int size() const { return static_cast<int>(types_.size()); }
  const Oid* types() const { return types_.data(); }

 private:
  friend class PgConn;
  void add(Oid type, std::string value, bool null, int format);
  std::vector<Oid> types_;
  std::vector<std::string> values_;
  std::vector<char> nulls_;
  std::vector<int> formats_;
};

// A result (owned). Columns are read in the binary format the queries ask for.
class PgResult {
 public:
  PgResult() = default;
  explicit PgResult(PGresult* r) : r_(r, &PQclear) {}

  int rows() const { return r_ ? PQntuples(r_.get()) : 0; }
  bool is_null(int row, int col) const { return PQgetisnull(r_.get(), row, col) != 0; }
  std::int64_t i64(int row, int col) const;  // int8, int4 or int2
  bool boolean(int row, int col) const;
  std::string str(int row, int col) const;  // text or bytea, raw bytes
  std::optional<std::int64_t> opt_i64(int row, int col) const;
  std::optional<std::string> opt_str(int row, int col) const;
  // Rows affected by an INSERT/UPDATE/DELETE.
  std::int64_t affected() const;

 private:
  std::shared_ptr<PGresult> r_;
};

class PgConn {
 public:
  enum class Mode { prepared, unnamed };
  struct Settings {
    std::string conninfo;       // libpq URI or key=value string; multi-host lists allowed
    int io_timeout_ms = 20000;  // bound on every wait for the server
    int connect_timeout_s = 5;  // per host, unless the conninfo sets connect_timeout
    Mode mode = Mode::prepared;
    std::string application_name = "ichido";
  };

  // Connects (blocking, bounded by connect_timeout per host) and enters pipeline mode.
  // Errors: store_unavailable with libpq's reason.
  static Result<std::unique_ptr<PgConn>> connect(const Settings& settings);
  ~PgConn();
  PgConn(const PgConn&) = delete;
  PgConn& operator=(const PgConn&) = delete;

  // Queues `stmt`; its result is checked later (by the next query() or sync()). Never blocks for
  // the server, except to read the answers of a segment ended by sync_nowait() (see there).
  void send(const Stmt& stmt, const Params& params);
  // Queues `stmt`; when its result is read (by a later query(), sync() or wait_results()) it is
  // handed to `on_result`, on the caller's thread, in statement order. Not called when the
  // statement fails (failure() says so).
  void send_read(const Stmt& stmt, const Params& params,
                 std::function<void(const PgResult&)> on_result);
  // Sends everything and reads every queued result. Fails like query().
  Result<void> wait_results();
  // Queues `stmt`, sends everything, and waits for every earlier result and then this one.
  // Fails when this statement or any earlier one since the last sync() failed (the first
  // failure is reported; see failure()).
  Result<PgResult> query(const Stmt& stmt, const Params& params);
  // Ends the pipeline segment: sends a sync point and waits for every result. Returns the first
  // failure of the segment. Inside an explicit transaction a failure leaves it aborted (the
  // caller rolls back or rolls back to a savepoint); the connection itself stays usable unless
  // broken().
  Result<void> sync();
  // Ends the pipeline segment like sync() but does not wait: its results are read (and checked)
  // by the next query() or sync(). For statements whose answer nobody needs now (a read-only
  // transaction's ROLLBACK). The next statement queued first reads every result up to this sync
  // point's ReadyForQuery (waiting at most io_timeout_ms), and only then sends anything: a
  // transaction pooler (PgBouncer in transaction mode) hands the server connection back to its
  // pool when that ReadyForQuery ("idle") passes, and drops the answers to whatever the client
  // had already sent on it — a statement sent earlier would never be answered.
  Result<void> sync_nowait();

  // Runs SQL text with the simple protocol, outside the pipeline (schema migrations: several
  // statements, no parameters, no results wanted). The pipeline must be idle.
  Result<void> exec_script(const std::string& sql);

  // Every wait for the server from now on also ends at `deadline` (a request's time bound), if
  // earlier than io_timeout_ms from its start; nullopt: io_timeout_ms alone. A wait ended by it
  // breaks the connection (timed_out(), deadline_passed()), as io_timeout_ms does.
  void set_deadline(std::optional<std::chrono::steady_clock::time_point> deadline) {
    deadline_ = deadline;
  }
  // Broken because a wait reached the deadline set by set_deadline().
  bool deadline_passed() const { return deadline_passed_; }

  // The classification of the first failure of the current pipeline segment (the statements
  // since the last sync(); none when all went well). It stays readable after sync() returns,
  // until the next statement is queued.
  PgFailure failure() const { return failure_; }
  const std::string& failure_sqlstate() const { return sqlstate_; }
  // The connection is unusable (lost, timed out, protocol error). Sticky.
  bool broken() const { return broken_; }
  // Broken because the server did not answer (or take data) within io_timeout_ms: it may be
  // wedged rather than gone, so a new connection would likely wait as long again.
  bool timed_out() const { return timed_out_; }
  // Something was queued or is unread: results are outstanding.
  bool busy() const { return !pending_.empty(); }

  // For callers that watch the socket themselves (LISTEN/NOTIFY) or need libpq directly.
  PGconn* raw() { return conn_; }
  // The server's host and port of this connection, e.g. "10.0.0.5:5432" (for logs).
  std::string server() const;

 private:
  explicit PgConn(PGconn* c, const Settings& s);
  enum class Entry : std::uint8_t { discard, keep, callback, sync, prepare };
  struct Pending {
    Entry kind;
    std::string name;  // prepare: the statement text it prepares (key of prepared_)
    std::function<void(const PgResult&)> on_result;  // callback
  };
  void queue(const Stmt& stmt, const Params& params, Entry kind,
             std::function<void(const PgResult&)> on_result = {});
  Result<void> flush();
  Result<PGresult*> next_result();
  // Reads the results of the front entry. For `keep`, hands over its result.
  Result<void> read_front(PgResult* out);
  void note_failure(PGresult* r);
  void note_broken(const std::string& why, bool timed_out = false);
  Error current_error() const;

  PGconn* conn_ = nullptr;
  Settings settings_;
  std::deque<Pending> pending_;
  // Statement text -> name, for every statement whose PREPARE was queued or done.
  std::unordered_map<std::string, std::string> prepared_;
  int next_name_ = 0;
  // The end of one wait that starts now: io_timeout_ms, or the deadline when earlier (`by_deadline`
  // says which).
  std::chrono::steady_clock::time_point wait_until(bool* by_deadline) const;
  void note_wait_ended(bool by_deadline, const std::string& why);
  bool broken_ = false;
  bool timed_out_ = false;
  bool deadline_passed_ = false;
  std::optional<std::chrono::steady_clock::time_point> deadline_;
  bool segment_open_ = false;  // statements were queued since the last sync point
  PgFailure failure_ = PgFailure::none;
  std::string sqlstate_;
  std::string message_;
};

// Classifies a SQLSTATE (empty: connection-level failure).
PgFailure classify_sqlstate(std::string_view sqlstate);

// How long poll() may wait, in whole milliseconds, for `left` to pass: rounded up, so a wait
// that ends at the poll's timeout has reached its deadline (rounded down, an io_timeout would
// end up to 1 ms early). 0 when `left` is zero or negative: the deadline has passed.
int poll_ms_until(std::chrono::steady_clock::duration left);

}  // namespace ichido::store::postgres
