#include "store/postgres/pg_store.h"

#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <random>
#include <thread>

#include "base/thread_name.h"
#include "store/batch_engine.h"
#include "store/postgres/change_feed.h"
#include "store/postgres/schema.h"

namespace ichido::store::postgres {
namespace {

using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kFirstBackoff{100};
constexpr milliseconds kMaxBackoff{1000};
constexpr milliseconds kProbeHealthy{500};
constexpr milliseconds kProbeUnhealthy{200};
// The heartbeat (the monitor's probe, and its connection attempts) gives up after this: a
// database that does not answer makes the node not ready within kProbeHealthy + this.
constexpr int kHeartbeatTimeoutMs = 2000;
// Re-runs after a serialization failure or deadlock wait a random time up to this, doubling
// from kFirstRetryWait (full jitter: transactions that collided do not collide again in step).
constexpr milliseconds kFirstRetryWait{2};
constexpr milliseconds kMaxRetryWait{100};
// Heartbeat (decision 076): renewed at every healthy probe; a node silent this long no longer
// has live waiters (a dead node's waiters stop being granted locks after at most this).
constexpr std::int64_t kNodeLeaseMs = 3000;
// Rows of nodes silent this long (and places whose wait ended this long ago) are deleted, by
// whichever node's monitor gets there, every kCleanupEveryProbes healthy probes (~30 s).
constexpr std::int64_t kNodeForgetMs = 60000;
constexpr std::uint64_t kCleanupEveryProbes = 60;
// A revocation waits at most this long for the other live nodes to confirm it (decision 077).
constexpr milliseconds kTokenAckWait{3000};

Error closed_error() {
  return Error(errc::store_unavailable,
               "The store is unavailable (the server is shutting down); nothing was changed, retry "
               "later.");
}

Error unknown_outcome(const Error& cause) {
  Error e(errc::store_unavailable,
          "The connection to PostgreSQL was lost while the change was being committed, so it is "
          "not known whether it was saved (" +
              cause.message +
              "). Retrying with the same key or token is safe: it answers what was saved.");
  e.details.emplace("outcome", std::string("unknown"));
  return e;
}

Error timed_out_error() {
  return Error(errc::store_unavailable,
               "The store is unavailable (PostgreSQL did not answer within the request's time "
               "bound, --store-timeout); nothing was changed, retry later.");
}

Error unreachable_error() {
  return Error(errc::store_unavailable,
               "The store is unavailable (PostgreSQL does not answer: this node has lost its "
               "database); nothing was changed, retry later.");
}

Error busy_error() {
  return Error(errc::store_unavailable,
               "This record is locked by another transaction (another node's, or a database "
               "session's) for longer than the store's lock timeout; nothing was changed, retry "
               "in a moment.");
}

std::string random_node_id() {
  std::random_device rd;
  std::uniform_int_distribution<std::uint64_t> d;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(d(rd)));
  return buf;
}

}  // namespace

struct PgStore::Lane {
  Mutex mu;
  CondVar cv;
  std::deque<Queued> queue GUARDED_BY(mu);
  std::thread thread;
  // The lane thread's own.
  std::unique_ptr<PgConn> conn;
  Connecting connecting;  // a connection attempt under way (ensure)
  Steady::time_point retry_at{};
  milliseconds backoff = kFirstBackoff;
};

struct PgStore::Reader {
  std::thread thread;
  std::unique_ptr<PgConn> conn;  // the reader thread's own
  Connecting connecting;         // a connection attempt under way (ensure)
  Steady::time_point retry_at{};
  milliseconds backoff = kFirstBackoff;
};

PgConn::Settings connection_settings(const Options& o) {
  PgConn::Settings s;
  s.conninfo = o.url;
  s.io_timeout_ms = o.io_timeout_ms;
  s.connect_timeout_s = o.connect_timeout_s;
  s.mode = o.statements;
  s.application_name = o.application_name;
  return s;
}

Result<std::unique_ptr<PgConn>> open_checked(const PgConn::Settings& settings) {
  auto c = PgConn::connect(settings);
  if (!c.ok()) return std::move(c).error();
  const Stmt check{
      "SELECT current_setting('fsync'), current_setting('synchronous_commit'), "
      "current_setting('server_version_num')::int8"};
  auto r = (*c)->query(check, Params());
  if (!r.ok()) return std::move(r).error();
  ICHIDO_TRY((*c)->sync());
  const std::string fsync = r->str(0, 0);
  const std::string sync_commit = r->str(0, 1);
  if (fsync == "off" || sync_commit == "off") {
    return Error(errc::store_unavailable,
                 "PostgreSQL at " + (*c)->server() + " runs with fsync=" + fsync +
                     " and synchronous_commit=" + sync_commit +
                     ": a committed change could be lost in a crash, and ichido answers only "
                     "durable changes. Turn both on for the database ichido uses.");
  }
  if (r->i64(0, 2) < 140000) {
    return Error(errc::store_unavailable, "PostgreSQL at " + (*c)->server() +
                                              " is older than 14; ichido needs 14 or newer.");
  }
  return c;
}

PgStore::PgStore(Options options)
    : TableStore(/*coordinates=*/true),  // nodes exclude each other by the jobs' keys
      opt_(std::move(options)),
      sql_(opt_.schema),
      settings_(connection_settings(opt_)),
      node_id_(random_node_id()),
      channel_(notify_channel(opt_.schema)) {}

Result<std::unique_ptr<PgStore>> PgStore::open(Options options) {
  ICHIDO_TRY(validate_schema_name(options.schema));
  if (options.lanes < 1 || options.readers < 1 || options.max_batch < 1) {
    return invalid_field("lanes", "The PostgreSQL store needs at least one lane and one reader.");
  }
  std::unique_ptr<PgStore> s(new PgStore(std::move(options)));
  auto started = s->start();
  if (!started.ok()) {
    s->close();
    return std::move(started).error();
  }
  return s;
}

Result<void> PgStore::start() {
  // The first connection proves the settings and runs the migrations; it becomes lane 0's.
  auto first = open_checked(settings_);
  if (!first.ok()) return std::move(first).error();
  if (opt_.migrate) {
    const Error emptied =
        Error(errc::store_unavailable,
              "This node served store " + opt_.expect_store_id + ", but schema \"" + opt_.schema +
                  "\" at " + (*first)->server() +
                  " holds no ichido store: the database was emptied, or the URL names another "
                  "database. A new, empty store is not created in its place (its counters would "
                  "start again from the beginning). Restore the database from a backup; or, to "
                  "start a new store on purpose, start this node once with --init.")
            .with("needs_operator", std::string("true"));
    auto m = migrate(**first, opt_.schema, opt_.expect_store_id.empty() ? nullptr : &emptied);
    if (!m.ok()) return std::move(m).error();
  }
  describe_ = (*first)->server() + "/" + opt_.schema;
  {
    auto id = (*first)->query(sql_.find_store_id, Params());
    if (!id.ok()) return std::move(id).error();
    ICHIDO_TRY((*first)->sync());
    if (id->rows() != 1) {
      return Error(errc::store_unavailable, "The schema \"" + opt_.schema + "\" at " +
                                                (*first)->server() +
                                                " has no store identity row; an operator must "
                                                "look (was it edited by hand?).")
          .with("needs_operator", std::string("true"));
    }
    store_id_ = id->str(0, 0);
    if (!opt_.expect_store_id.empty() && store_id_ != opt_.expect_store_id) {
      return Error(errc::store_unavailable,
                   "This node served store " + opt_.expect_store_id + ", but schema \"" +
                       opt_.schema + "\" at " + (*first)->server() + " holds store " + store_id_ +
                       ": the URL names another database, or the database was replaced. To serve "
                       "that store with this node on purpose, start it once with --init.")
          .with("needs_operator", std::string("true"));
    }
  }
  // The heartbeat row exists before any waiter of this node is queued (decision 076); when it
  // cannot be written now (a read-only database), the monitor keeps trying.
  (void)heartbeat(**first);
  {
    MutexLock lk(health_mu_);
    healthy_ = true;
  }
  for (int i = 0; i < opt_.lanes; ++i) lanes_.push_back(std::make_unique<Lane>());
  lanes_[0]->conn = std::move(*first);
  for (int i = 0; i < opt_.readers; ++i) readers_.push_back(std::make_unique<Reader>());
  for (std::size_t i = 0; i < lanes_.size(); ++i) {
    lanes_[i]->thread = named_thread("ichido-pgw-" + std::to_string(i),
                                     [this, lane = lanes_[i].get()] { lane_loop(*lane); });
  }
  for (std::size_t i = 0; i < readers_.size(); ++i) {
    readers_[i]->thread = named_thread("ichido-pgr-" + std::to_string(i),
                                       [this, rd = readers_[i].get()] { reader_loop(*rd); });
  }
  monitor_ = named_thread("ichido-pgmon", [this] { monitor_loop(); });
  acker_ = named_thread("ichido-pgack", [this] { acker_loop(); });
  if (opt_.listen) listener_ = named_thread("ichido-pglisten", [this] { listen_loop(); });
  return {};
}

PgStore::~PgStore() { close(); }

void PgStore::close() {
  std::call_once(close_once_, [this] {
    closing_.store(true);
    for (auto& l : lanes_) {
      {
        MutexLock lk(l->mu);
      }  // a lane between its check and its wait sees closing_
      l->cv.notify_all();
    }
    {
      MutexLock lk(read_mu_);
    }
    read_cv_.notify_all();
    {
      MutexLock lk(health_mu_);
    }
    health_cv_.notify_all();
    for (auto& l : lanes_) {
      if (l->thread.joinable()) l->thread.join();
    }
    for (auto& r : readers_) {
      if (r->thread.joinable()) r->thread.join();
    }
    {
      MutexLock lk(ack_mu_);  // the lanes are done: no revocation answer comes after this
      acker_stop_ = true;
    }
    ack_cv_.notify_all();
    if (acker_.joinable()) acker_.join();
    if (monitor_.joinable()) monitor_.join();
    if (listener_.joinable()) listener_.join();
    // This node's places in the waiter queue go with it at once, instead of at its heartbeat
    // lease's end (every waiter was answered before the store closes). Best effort: a node
    // that cannot reach the database leaves them to the lease.
    for (auto& l : lanes_) {
      if (!l->conn || l->conn->broken()) continue;
      (void)l->conn->query(sql_.node_leave, Params().text(node_id_));
      (void)l->conn->sync();
      break;
    }
    for (auto& l : lanes_) l->conn.reset();
    for (auto& r : readers_) r->conn.reset();
  });
}

void PgStore::submit_write(Job job) {
  static const Error full(errc::store_unavailable,
                          "The store is unavailable (too many queued writes); nothing was "
                          "changed, retry later.");
  if (!lanes_.empty() && !closing_.load()) {
    // One key's jobs always go to the same lane, so they commit in the order they came.
    const std::uint64_t h = job.keys.empty() ? 0 : static_cast<std::uint64_t>(job.keys.front());
    Lane& lane = *lanes_[h % lanes_.size()];
    const auto deadline = Steady::now() + milliseconds(opt_.timeout_ms);
    MutexLock lk(lane.mu);
    if (!closing_.load()) {
      if (lane.queue.size() >= opt_.max_queue) {
        lk.unlock();
        job.finish(&full);
        return;
      }
      lane.queue.push_back(Queued{std::move(job), deadline});
      lane.cv.notify_one();
      return;
    }
  }
  const Error e = closed_error();
  job.finish(&e);
}

void PgStore::submit_read(Job job) {
  static const Error full(errc::store_unavailable,
                          "The store is unavailable (too many queued reads); nothing was "
                          "changed, retry later.");
  {
    const auto deadline = Steady::now() + milliseconds(opt_.timeout_ms);
    MutexLock lk(read_mu_);
    if (!closing_.load() && !readers_.empty() && read_queue_.size() < opt_.max_queue) {
      read_queue_.push_back(Queued{std::move(job), deadline});
      read_cv_.notify_one();
      return;
    }
  }
  if (closing_.load() || readers_.empty()) {
    const Error e = closed_error();
    job.finish(&e);
  } else {
    job.finish(&full);
  }
}

PgConn* PgStore::ensure(std::unique_ptr<PgConn>& slot, Connecting& connecting,
                        Steady::time_point& retry_at, milliseconds& backoff, Error& error,
                        Steady::time_point deadline) {
  if (slot && !slot->broken()) return slot.get();
  slot.reset();
  if (!connecting.valid()) {
    if (Steady::now() < retry_at) {
      if (error.message.empty()) error = pg_unavailable("reconnecting");
      return nullptr;
    }
    // In the background: an attempt may take connect_timeout per host (libpq then tries the
    // next host of a multi-host URI), longer than a request may wait. The request waits for it
    // until its bound only; a later one takes the connection when it comes.
    // Named: a thread inherits its creator's name (a lane's or a reader's), which no other
    // thread may carry (ServerThreads.EveryThreadIsNamed).
    connecting = std::async(std::launch::async, [s = settings_] {
      name_this_thread("ichido-pgconn");
      return open_checked(s);
    });
  }
  if (connecting.wait_until(deadline) != std::future_status::ready) {
    error = timed_out_error();
    return nullptr;
  }
  auto c = connecting.get();
  if (!c.ok()) {
    error = std::move(c).error();
    retry_at = Steady::now() + backoff;
    backoff = std::min(backoff * 2, kMaxBackoff);
    mark_unhealthy(error.message);
    return nullptr;
  }
  backoff = kFirstBackoff;
  retry_at = {};
  slot = std::move(*c);
  return slot.get();
}

void PgStore::mark_unhealthy(const std::string& why, bool unreachable) {
  {
    MutexLock lk(health_mu_);
    healthy_ = false;
    health_reason_ = why;
    recheck_ = true;
  }
  if (unreachable) unreachable_.store(true);
  health_cv_.notify_all();
}

// --- writes ------------------------------------------------------------------------------------

void PgStore::lane_loop(Lane& lane) {
  std::vector<Job> batch;
  std::vector<Job> late;
  for (;;) {
    Steady::time_point deadline = Steady::time_point::max();
    {
      MutexLock lk(lane.mu);
      while (!closing_.load() && lane.queue.empty()) lane.cv.wait(lane.mu);
      if (lane.queue.empty()) return;  // closing and drained
      const auto now = Steady::now();
      while (!lane.queue.empty() && batch.size() < opt_.max_batch) {
        Queued& q = lane.queue.front();
        if (q.deadline <= now) {
          late.push_back(std::move(q.job));  // waited its whole time bound in the queue
        } else {
          deadline = std::min(deadline, q.deadline);
          batch.push_back(std::move(q.job));
        }
        lane.queue.pop_front();
      }
    }
    if (!late.empty()) {
      const Error e = timed_out_error();
      failed_commits_.fetch_add(1);
      for (auto& j : late) j.finish(&e);
    }
    if (!batch.empty()) run_batch(lane, batch, deadline);
    batch.clear();
    late.clear();
  }
}

milliseconds serialization_retry_wait(int retries) {
  thread_local std::minstd_rand rng(std::random_device{}());
  const auto cap = std::min(kMaxRetryWait, kFirstRetryWait * (1 << std::clamp(retries, 0, 10)));
  return milliseconds(std::uniform_int_distribution<std::int64_t>(0, cap.count())(rng));
}

// A lane connection's side of a batch's transaction (batch_engine.h), pipelined: begin() sends
// BEGIN, the settings, the key locks, the clock read and (optimistic) the prefetch of every
// job's rows and waits once for all of them; an optimistic attempt then waits for nothing until
// its COMMIT, an isolated one once per job (so that a failure is known to be its own). After
// keys_alone (a busy outcome), begin() takes each key in a savepoint of its own and answers the
// jobs of a key locked elsewhere with busy_error. Every step that ends an attempt leaves the
// connection idle, outside a transaction, unless it is broken, and records why in outcome().
// Lives for one run_batch, on its lane thread.
class PgStore::LaneTransaction final : public BatchTransaction {
 public:
  // `keys`: the batch's job keys, sorted and deduplicated.
  LaneTransaction(PgStore& s, const std::vector<std::int64_t>& keys) : s_(s), keys_(keys) {}

  // The connection of the next attempt, and how its keys are locked.
  void use(PgConn& c, bool keys_alone) {
    c_ = &c;
    keys_alone_ = keys_alone;
  }
  // What ended the last attempt that did not commit (committed after one that did).
  Outcome outcome() const { return outcome_; }

  Began begin(BatchMode mode, std::span<Job> batch, JobErrors& job_errors) override {
    PgConn& c = *c_;
    const Sql& sql = s_.sql_;
    isolate_ = mode != BatchMode::optimistic;
    outcome_ = Outcome::committed;
    tables_.emplace(c, sql, s_.node_id_);
    tables_->set_batch_mode(!isolate_);
    tables_->set_token_batch(static_cast<int>(std::min<std::size_t>(batch.size(), 64)));
    c.send(sql.begin_write, Params());
    c.send(sql.tx_settings, Params()
                                .text(std::to_string(s_.opt_.lock_timeout_ms))
                                .text(std::to_string(s_.opt_.idle_in_tx_timeout_ms)));
    TimeMs now = 0;
    if (keys_alone_) {
      // Each key in its own savepoint, in the same sorted order: a key whose lock another
      // transaction holds past lock_timeout fails alone, and so do the jobs that need it.
      std::vector<std::int64_t> busy;
      for (const std::int64_t k : keys_) {
        c.send(sql.savepoint, Params());
        c.send(sql.lock_keys_now, Params().i64_array({k}));
        if (auto s = c.sync(); !s.ok()) {
          if (c.broken() || c.failure() != PgFailure::busy) return {fail(s.error(), false)};
          busy.push_back(k);
          c.send(sql.rollback_to_savepoint, Params());
        }
        c.send(sql.release_savepoint, Params());
      }
      for (std::size_t i = 0; i < batch.size(); ++i) {
        for (const std::int64_t k : batch[i].keys) {
          if (std::binary_search(busy.begin(), busy.end(), k)) job_errors.set(i, busy_error());
        }
      }
      // The clock after the locks, as below.
      c.send_read(sql.now, Params(), [&now](const PgResult& r) { now = r.i64(0, 0); });
    } else {
      c.send_read(sql.lock_keys_now, Params().i64_array(keys_),
                  [&now](const PgResult& r) { now = r.i64(0, 1); });
    }
    if (!isolate_) {
      // Every row the jobs announce, and the tokens they may draw, behind the locks in the same
      // pipeline: the whole start of the batch is one round trip.
      for (auto& job : batch) {
        if (job.prefetch) job.prefetch(*tables_);
      }
      tables_->end_prefetch();
    }
    if (auto r = c.wait_results(); !r.ok()) return {fail(r.error(), false)};
    if (s_.opt_.clock) now = s_.opt_.clock->now_ms();
    return {TxStep::ok(), now};
  }

  Tables& tables() override { return *tables_; }
  std::uint64_t writes() override { return tables_->writes(); }

  TxStep savepoint() override {
    c_->send(s_.sql_.savepoint, Params());
    return TxStep::ok();
  }

  TxStep job_done(BatchMode mode) override {
    PgConn& c = *c_;
    if (c.broken()) return fail(pg_unavailable("the connection was lost"), false);
    if (mode == BatchMode::isolated) {
      // Wait for every statement of this job, so that a failure is known to be its own.
      if (auto s = c.sync(); !s.ok()) {
        if (c.broken() || c.failure() == PgFailure::retry ||
            c.failure() == PgFailure::unavailable) {
          return fail(s.error(), false);
        }
        return TxStep::job_failed(c.failure() == PgFailure::busy ? busy_error() : s.error());
      }
    } else if (c.failure() != PgFailure::none) {
      // A statement of this job or a pipelined write of an earlier one failed: the transaction
      // is aborted.
      return fail(pg_unavailable("a statement failed"), false);
    }
    return TxStep::ok();
  }

  TxStep rollback_to_savepoint() override {
    c_->send(s_.sql_.rollback_to_savepoint, Params());
    return TxStep::ok();
  }

  TxStep release_savepoint() override {
    c_->send(s_.sql_.release_savepoint, Params());
    return TxStep::ok();
  }

  TxStep rollback() override {
    PgConn& c = *c_;
    (void)c.sync();
    c.send(s_.sql_.rollback, Params());
    if (auto s = c.sync(); !s.ok()) return fail(s.error(), false);
    if (c.broken()) return fail(pg_unavailable("the connection was lost"), false);
    return TxStep::ok();
  }

  TxStep flush() override {
    if (auto r = tables_->flush_writes(); !r.ok()) return fail(r.error(), false);
    return TxStep::ok();
  }

  TxStep commit(std::vector<Announcement> announcements) override {
    PgConn& c = *c_;
    // The change feed: one notification for the whole transaction, delivered by PostgreSQL when
    // (and only if) it commits. Pipelined: no extra round trip.
    if (!announcements.empty()) {
      c.send(
          s_.sql_.notify,
          Params().text(s_.channel_).text(encode_changes(s_.node_id_, std::move(announcements))));
      s_.sent_.fetch_add(1);
    }
    c.send(s_.sql_.commit, Params());
    if (auto s = c.sync(); !s.ok()) {
      // Either a pipelined statement failed (the COMMIT was skipped, nothing was saved) or the
      // COMMIT itself failed (rolled back) — unless the connection broke: then nobody knows.
      return fail(s.error(), true);
    }
    return TxStep::ok();
  }

 private:
  // After a failure `e`: leaves the aborted transaction (unless the connection is gone) and
  // records what the lane makes of it; an optimistic attempt's failed statement asks for an
  // isolated one.
  TxStep fail(const Error& e, bool commit_sent) {
    outcome_ = classify(commit_sent);
    if (outcome_ == Outcome::isolate) return TxStep::rerun_isolated(e);
    return TxStep::batch_failed(e);
  }
  Outcome classify(bool commit_sent) {
    PgConn& c = *c_;
    if (c.broken()) return commit_sent ? Outcome::unknown : Outcome::lost;
    const PgFailure f = c.failure();
    (void)c.sync();  // end the failed segment, then leave the aborted transaction
    c.send(s_.sql_.rollback, Params());
    (void)c.sync();
    if (c.broken()) return commit_sent ? Outcome::unknown : Outcome::lost;
    switch (f) {
      case PgFailure::retry:
        return Outcome::retry;
      case PgFailure::busy:
        return Outcome::busy;
      case PgFailure::unavailable:
        return Outcome::unavailable;
      case PgFailure::statement:
      case PgFailure::none:
        return isolate_ ? Outcome::unavailable : Outcome::isolate;
    }
    return Outcome::unavailable;
  }

  PgStore& s_;
  const std::vector<std::int64_t>& keys_;
  PgConn* c_ = nullptr;
  bool keys_alone_ = false;
  bool isolate_ = false;
  Outcome outcome_ = Outcome::committed;
  std::optional<PgTables> tables_;  // the open attempt's
};

void PgStore::run_batch(Lane& lane, std::vector<Job>& batch, Steady::time_point deadline) {
  std::vector<std::int64_t> keys;
  for (const auto& j : batch) keys.insert(keys.end(), j.keys.begin(), j.keys.end());
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());

  auto fail_all = [&](const Error& e) {
    failed_commits_.fetch_add(1);
    for (auto& j : batch) j.finish(&e);
  };
  {
    std::optional<Error> lost;
    {
      MutexLock lk(health_mu_);
      lost = identity_lost_;
    }
    if (lost) return fail_all(*lost);
  }
  LaneTransaction tx(*this, keys);
  BatchMode mode = BatchMode::optimistic;
  bool keys_alone = false;
  bool reconnected = false;
  int retries = 0;
  for (;;) {
    // The database does not answer (the heartbeat, or another request's time bound, found
    // so): answer now instead of waiting out the bound; the monitor says when it is back.
    if (unreachable_.load()) return fail_all(unreachable_error());
    Error error;
    PgConn* conn = ensure(lane.conn, lane.connecting, lane.retry_at, lane.backoff, error, deadline);
    if (!conn) return fail_all(error);
    conn->set_deadline(deadline);
    tx.use(*conn, keys_alone);
    // The engine runs the batch optimistically and, when a failed job wrote or a statement
    // failed, once more isolated (a savepoint per job); what else ended it is tx.outcome().
    BatchResult result = run_transaction(tx, batch, mode);
    if (result.isolated && mode == BatchMode::optimistic) {
      isolated_batches_.fetch_add(1);
      mode = BatchMode::isolated;  // a re-run below stays isolated
    }
    if (result.error) error = *result.error;
    const bool late = conn->deadline_passed();
    if (!conn->broken()) conn->set_deadline(std::nullopt);
    if (late) mark_unhealthy(error.message, /*unreachable=*/true);
    if (result.committed) {
      commits_.fetch_add(1);
      committed_commands_.fetch_add(batch.size());
      result.finish(batch);
      return;
    }
    switch (tx.outcome()) {
      case Outcome::committed:  // not after a failed run: every failing step names its outcome
      case Outcome::isolate:    // an isolated attempt cannot be isolated further
        return fail_all(error);
      case Outcome::busy:
        // A lock held past lock_timeout: run again with each job alone, taking the keys one by
        // one, so that only the jobs of that record fail (busy_error) — once.
        if (keys_alone) return fail_all(error);  // cannot happen: busy is per key
        if (mode == BatchMode::optimistic) isolated_batches_.fetch_add(1);
        mode = BatchMode::isolated;
        keys_alone = true;
        continue;
      case Outcome::retry: {
        // 40001 / 40P01: run again after a random wait, within the time bound.
        const auto wait = serialization_retry_wait(retries);
        if (++retries > opt_.max_retries || Steady::now() + wait >= deadline) {
          return fail_all(error);
        }
        std::this_thread::sleep_for(wait);
        continue;
      }
      case Outcome::lost:
        lane.conn.reset();
        // The transaction never committed. Run it on a new connection — once, and not after
        // its time bound passed (nothing was changed either way).
        if (!reconnected && !late) {
          reconnected = true;
          continue;
        }
        if (!late) mark_unhealthy(error.message);
        return fail_all(late ? timed_out_error() : error);
      case Outcome::unavailable:
        lane.conn.reset();  // e.g. read-only after a failover: reconnect picks the host again
        mark_unhealthy(error.message);
        return fail_all(error);
      case Outcome::unknown:
        lane.conn.reset();
        if (!late) mark_unhealthy(error.message);
        return fail_all(unknown_outcome(error));
    }
  }
}

// --- reads -------------------------------------------------------------------------------------

void PgStore::reader_loop(Reader& rd) {
  for (;;) {
    Queued q;
    {
      MutexLock lk(read_mu_);
      while (!closing_.load() && read_queue_.empty()) read_cv_.wait(read_mu_);
      if (read_queue_.empty()) return;
      q = std::move(read_queue_.front());
      read_queue_.pop_front();
    }
    Job& job = q.job;
    // A read that lost its connection runs once more on a new one (it changed nothing) — not
    // one that waited for an answer until a timeout: a wedged server would make it wait as long
    // again before its 503.
    for (int attempt = 0;; ++attempt) {
      if (Steady::now() >= q.deadline) {
        const Error e = timed_out_error();
        job.finish(&e);
        break;
      }
      if (unreachable_.load()) {
        const Error e = unreachable_error();
        job.finish(&e);
        break;
      }
      Error error;
      PgConn* c = ensure(rd.conn, rd.connecting, rd.retry_at, rd.backoff, error, q.deadline);
      if (!c) {
        job.finish(&error);
        break;
      }
      c->set_deadline(q.deadline);
      PgTables t(*c, sql_);
      c->send(sql_.begin_read, Params());
      auto now = c->query(sql_.now, Params());
      if (now.ok()) {
        try {
          (void)job.apply(t, opt_.clock ? opt_.clock->now_ms() : now->i64(0, 0));
        } catch (const std::exception&) {
          // No result in the job's slot: it answers internal (table_store.h).
        }
      }
      if (c->broken()) {
        const bool timed_out = c->timed_out();
        if (c->deadline_passed()) mark_unhealthy("no answer within --store-timeout", true);
        rd.conn.reset();
        if (attempt == 0 && !timed_out) continue;
        job.finish(now.ok() ? nullptr : &now.error());  // the job's own answer says why
        break;
      }
      c->set_deadline(std::nullopt);
      // Read only: nothing to commit. When all went well the ROLLBACK is sent and not waited
      // for (the next read reads its answer); after a failure the segment is ended first.
      if (c->failure() == PgFailure::none) {
        c->send(sql_.rollback, Params());
        (void)c->sync_nowait();
      } else {
        (void)c->sync();
        c->send(sql_.rollback, Params());
        (void)c->sync();
      }
      if (c->broken()) rd.conn.reset();
      job.finish(now.ok() ? nullptr : &now.error());
      break;
    }
  }
}

// --- change feed ---------------------------------------------------------------------------------

void PgStore::watch_external_changes(ExternalChangeHandler handler) {
  MutexLock lk(change_mu_);
  handler_ = std::move(handler);
  if (handler_) confirm_tokens_.store(true);
}

bool PgStore::deliver(const ExternalChanges& changes) {
  MutexLock lk(change_mu_);
  if (!handler_) return false;
  handler_(changes);
  return true;
}

// The LISTEN connection (decision 075): its own connection (Options::listen_url), never in the
// write pool. Waits on its socket at most 100 ms at a time (so close() is prompt); delivers
// every notification of another node; every recheck_ms delivers "all waiters" (a lost
// notification costs at most that); every listen_ping_ms runs a query so that a connection the
// network silently dropped is found; after every re-established LISTEN delivers "all waiters and
// tokens" (notifications sent while it was down are lost).
void PgStore::listen_loop() {
  PgConn::Settings ls = settings_;
  if (!opt_.listen_url.empty()) ls.conninfo = opt_.listen_url;
  ls.io_timeout_ms = std::min(ls.io_timeout_ms, 5000);
  ls.application_name = opt_.application_name + "-listen";
  const Stmt ping{"SELECT 1"};
  std::unique_ptr<PgConn> conn;
  bool first = true;
  milliseconds backoff = kFirstBackoff;
  auto next_recheck = Steady::now() + milliseconds(opt_.recheck_ms);
  auto next_ping = Steady::now() + milliseconds(opt_.listen_ping_ms);
  ExternalChanges everyone;
  everyone.all_waiters = true;
  while (!closing_.load()) {
    const auto now = Steady::now();
    if (now >= next_recheck) {
      deliver(everyone);
      next_recheck = now + milliseconds(opt_.recheck_ms);
    }
    if (!conn) {
      auto c = PgConn::connect(ls);
      Result<void> listening =
          c.ok() ? (*c)->exec_script("LISTEN \"" + channel_ + "\"") : Result<void>(c.error());
      if (!listening.ok()) {
        MutexLock lk(health_mu_);
        const auto until = Steady::now() + backoff;
        while (!closing_.load() && health_cv_.wait_until(health_mu_, until)) {
        }
        backoff = std::min(backoff * 2, kMaxBackoff);
        continue;
      }
      conn = std::move(*c);
      backoff = kFirstBackoff;
      listens_.fetch_add(1);
      next_ping = Steady::now() + milliseconds(opt_.listen_ping_ms);
      if (!first) {
        ExternalChanges all = everyone;
        all.tokens = true;
        deliver_tokens(*conn, all);
      }
      first = false;
    }
    // A node started around a revocation loaded its tokens before that commit and began to
    // LISTEN after its notification: it confirms the epoch once, as soon as it can apply it.
    if (confirm_tokens_.exchange(false)) {
      ExternalChanges all = everyone;
      all.tokens = true;
      deliver_tokens(*conn, all);
    }
    PGconn* raw = conn->raw();
    pollfd pfd{PQsocket(raw), POLLIN, 0};
    // Rounded up (poll_ms_until): with less than 1 ms left, a wait of 0 would spin until then.
    const int wait = std::min(poll_ms_until(std::min(next_recheck, next_ping) - now), 100);
    (void)::poll(&pfd, 1, wait);
    bool lost = PQconsumeInput(raw) == 0 || PQstatus(raw) != CONNECTION_OK;
    if (!lost && Steady::now() >= next_ping) {
      auto r = conn->query(ping, Params());
      lost = !r.ok() || !conn->sync().ok() || conn->broken();
      next_ping = Steady::now() + milliseconds(opt_.listen_ping_ms);
    }
    while (PGnotify* n = PQnotifies(raw)) {
      auto d = decode_changes(n->extra ? n->extra : "");
      PQfreemem(n);
      if (!d) {
        received_.fetch_add(1);
        ExternalChanges all = everyone;
        all.tokens = true;
        deliver_tokens(*conn, all);
      } else if (d->node != node_id_) {
        received_.fetch_add(1);
        if (d->changes.tokens) {
          deliver_tokens(*conn, d->changes);
        } else {
          deliver(d->changes);
        }
      }
    }
    if (lost) conn.reset();
  }
}

void PgStore::deliver_tokens(PgConn& conn, const ExternalChanges& changes) {
  // Read first: every revocation up to this epoch committed before the handler makes the node
  // reload its tokens, so recording the epoch afterwards never claims more than was applied.
  auto epoch = conn.query(sql_.token_epoch, Params());
  const bool read = conn.sync().ok() && epoch.ok() && epoch->rows() == 1;
  const bool applied = deliver(changes);
  // Not confirmed (unread, or no handler yet to reload the tokens): the revoker waits for this
  // node until its 3 s are up, or until it confirms later.
  if (!read || !applied) return;
  (void)conn.query(sql_.node_tokens_applied, Params().text(node_id_).i64(epoch->i64(0, 0)));
  (void)conn.sync();
}

void PgStore::revoke_token(RevokeTokenCmd cmd, Callback<core::TokenInfo> done) {
  TableStore::revoke_token(std::move(cmd), [this, done](Result<core::TokenInfo> r) {
    if (!r.ok()) return done(std::move(r));
    MutexLock lk(ack_mu_);
    if (acker_stop_) {
      lk.unlock();
      return done(std::move(r));
    }
    acks_.push_back([done, r = std::move(r)]() mutable { done(std::move(r)); });
    ack_cv_.notify_one();
  });
}

void PgStore::acker_loop() {
  std::unique_ptr<PgConn> conn;
  for (;;) {
    std::deque<std::function<void()>> answers;
    {
      MutexLock lk(ack_mu_);
      while (acks_.empty() && !acker_stop_) ack_cv_.wait(ack_mu_);
      if (acks_.empty()) return;
      answers.swap(acks_);
    }
    if (!closing_.load()) {
      if (!conn || conn->broken()) {
        auto c = open_checked(settings_);
        if (c.ok()) conn = std::move(*c);
      }
      if (conn) (void)wait_for_token_acks(*conn, sql_, node_id_, kTokenAckWait);
    }
    for (auto& answer : answers) answer();
  }
}

// --- health ------------------------------------------------------------------------------------

Result<void> PgStore::heartbeat(PgConn& conn) {
  auto r = conn.query(sql_.node_heartbeat, Params().text(node_id_).i64(kNodeLeaseMs));
  auto s = conn.sync();
  if (!r.ok()) return std::move(r).error();
  return s;
}

void PgStore::monitor_loop() {
  // The heartbeat's own bounds: a database that does not answer is found within
  // kProbeHealthy + kHeartbeatTimeoutMs, not after the requests' io_timeout.
  PgConn::Settings hs = settings_;
  hs.io_timeout_ms = std::min(hs.io_timeout_ms, kHeartbeatTimeoutMs);
  hs.connect_timeout_s = std::min(hs.connect_timeout_s, kHeartbeatTimeoutMs / 1000);
  hs.application_name = opt_.application_name + "-monitor";
  std::unique_ptr<PgConn> conn;
  std::uint64_t probes = 0;
  for (;;) {
    bool ok = false;
    bool unreachable = false;  // no connection, or no answer in time (not: a standby, read-only)
    std::string why;
    {
      auto c = conn && !conn->broken() ? Result<std::unique_ptr<PgConn>>(std::move(conn))
                                       : open_checked(hs);
      if (c.ok()) {
        conn = std::move(*c);
        auto r = conn->query(sql_.probe, Params());
        (void)conn->sync();
        if (!r.ok()) {
          why = r.error().message;
          unreachable = conn->timed_out();
        } else if (r->boolean(0, 0)) {
          why = "PostgreSQL at " + conn->server() + " is a standby (in recovery), not a primary";
        } else if (r->boolean(0, 1)) {
          why = "PostgreSQL at " + conn->server() + " is read-only";
        } else {
          ok = true;
          (void)heartbeat(*conn);
          if (++probes % kCleanupEveryProbes == 0) {
            (void)conn->query(sql_.node_cleanup, Params().i64(kNodeForgetMs));
            (void)conn->sync();
          }
          const std::string id = r->opt_str(0, 2).value_or("");
          const std::int64_t version = r->i64(0, 3);
          const std::int64_t token = r->i64(0, 4);
          std::string lost;
          if (id != store_id_) {
            lost = "the database at " + conn->server() + " is another store now (store " +
                   (id.empty() ? std::string("none") : id) + ", this node opened store " +
                   store_id_ + "): was the URL pointed elsewhere or the database replaced?";
          } else if (version > current_schema_version()) {
            lost = "a newer ichido upgraded the schema to version " + std::to_string(version) +
                   " (this build knows " + std::to_string(current_schema_version()) +
                   "): run the newer version on every node";
          } else if (token < highest_token_seen_) {
            lost = "the fencing token sequence went back from " +
                   std::to_string(highest_token_seen_) + " to " + std::to_string(token) +
                   ": an older backup was restored under running nodes; raise the sequence "
                   "above every token handed out (setval) before serving again";
          }
          highest_token_seen_ = std::max(highest_token_seen_, token);
          if (!lost.empty()) {
            MutexLock lk(health_mu_);
            if (!identity_lost_) {
              identity_lost_ =
                  Error(errc::store_unavailable, "The store refuses to serve: " + lost +
                                                     ". Restart the node "
                                                     "once an operator has checked.")
                      .with("needs_operator", std::string("true"));
            }
          }
        }
        if (!ok) conn.reset();  // reconnect: a multi-host URI may lead elsewhere now
      } else {
        why = c.error().message;
        unreachable = true;
      }
    }
    // Requests answer at once while the database does not answer, and wait for it again as
    // soon as it does (run_batch, reader_loop).
    if (ok) unreachable_.store(false);
    if (unreachable) unreachable_.store(true);
    MutexLock lk(health_mu_);
    healthy_ = ok;
    health_reason_ = why;
    recheck_ = false;
    const auto until = Steady::now() + (ok ? kProbeHealthy : kProbeUnhealthy);
    while (!closing_.load() && !recheck_) {
      if (!health_cv_.wait_until(health_mu_, until)) break;
    }
    if (closing_.load()) return;
  }
}

Result<void> PgStore::check_health() {
  MutexLock lk(health_mu_);
  if (identity_lost_) return *identity_lost_;
  return {};
}

Result<void> PgStore::check_ready() {
  if (closing_.load()) return closed_error();
  MutexLock lk(health_mu_);
  if (identity_lost_) return *identity_lost_;
  if (!healthy_) {
    return Error(errc::store_unavailable, "The store is unavailable (" + health_reason_ + ").");
  }
  return {};
}

StoreStats PgStore::stats() const {
  return StoreStats{commits_.load(), committed_commands_.load(), failed_commits_.load(),
                    isolated_batches_.load()};
}

}  // namespace ichido::store::postgres
