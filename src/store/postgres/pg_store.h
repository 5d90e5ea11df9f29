// PgStore: the store of several stateless ichido nodes sharing one PostgreSQL database
// (docs/decisions/070-073). Same TableStore command logic and core rulebook as the embedded
// store; only how rows are found and saved, and how jobs are run, differ.
//
// Writes: `lanes` write connections, each owned by one thread that does group commit like the
// SQLite writer: it takes every job queued on its lane (up to max_batch) and runs them in ONE
// READ COMMITTED transaction:
//
//   1. BEGIN; transaction-scoped settings (lock_timeout, idle_in_transaction_session_timeout);
//      pg_advisory_xact_lock on every key of the batch (Job::keys, sorted, deduplicated), then
//      the database's clock — one round trip in pipeline mode. Every node takes the locks of a
//      key before reading or writing its rows, so two nodes never interleave on one record, and
//      sorted order means no two batches can deadlock on them.
//   2. The jobs, in queue order, with that `now` (optimistic: no savepoints, writes pipelined).
//   3. COMMIT (the database fsyncs; with synchronous replication the standby too), then every
//      job's `finish`. No answer leaves before its COMMIT succeeded.
//
// A job routes to lane job_key % lanes, so one key's jobs stay in order on one lane and jobs on
// different keys commit in parallel. If a job fails after it wrote, or a statement fails, the
// transaction is rolled back and the batch runs again with a SAVEPOINT per job (isolated), so
// only the failing job fails (the transaction engine, store/batch_engine.h, shared with the
// SQLite store, runs those attempts; this store provides its LaneTransaction and keeps the
// re-runs below). Serialization failures and deadlocks (40001, 40P01) re-run the batch
// (up to max_retries). A connection lost before COMMIT was sent re-runs the batch once on a new
// connection (libpq picks the host again: a multi-host URI follows a failover); lost after COMMIT
// was sent, the outcome is unknown: the jobs fail with store_unavailable and
// details.outcome = "unknown" (a keyed retry is safe: it replays or finds the record).
//
// Time: `now` is always the database's clock (clock_timestamp() read after the batch's locks), so
// nodes with different clocks decide identically. Options::clock replaces it in tests only.
//
// Reads: `readers` connections, each read job in a REPEATABLE READ READ ONLY transaction (one
// snapshot that contains every COMMIT acknowledged before it started, on any node).
//
// Trouble on one record: a row or key lock that another transaction (another node's, a database
// session's) holds past lock_timeout (SQLSTATE 55P03) fails only the jobs that need it — the batch
// runs again with each job in a savepoint, taking its keys one by one, and those jobs answer
// store_unavailable (503 with Retry-After); the others commit and the node stays ready. A job that
// throws answers internal (500) alone, as on the embedded store. 40001/40P01 re-runs wait a
// random, doubling time first (up to 100 ms).
//
// Time bounds: every job is answered within Options::timeout_ms of its submission. It waits for
// the database only until then (PgConn::set_deadline, and a connection attempt runs in the
// background, waited for until then); past it the connection is dropped (the
// node is then taken as cut off from its database until the next probe) and the job answers
// store_unavailable — with details.outcome "unknown" when its COMMIT had been sent. A job that
// waited its whole bound in the queue answers at once.
//
// Health: a monitor connection probes every 500 ms (pg_is_in_recovery, transaction_read_only),
// giving up after 2 s (its own io and connect timeouts: the heartbeat); check_ready() fails while
// the database is unreachable, read-only or in recovery, and right after any lane saw it
// unavailable — so a node cut off from its database (no reset, no refusal: packets dropped) is
// not ready within about 2.5 s. While it does not answer (the heartbeat got no answer or no
// connection, or a request reached its time bound) requests answer store_unavailable at once
// instead of each waiting out its bound; the first successful probe ends that. check_health()
// (/healthz) fails, latched, when the database under the URL is no longer the store this node
// opened (docs/decisions/074): another store_id, a schema newer than this build (a newer node
// upgraded it), or a token sequence that went backwards (an older backup restored under running
// nodes); writes are then refused too. Lanes and readers reconnect by themselves (at most every 100
// ms to 1 s while it stays down); nothing needs a restart.
//
// Session state: none. Everything is transaction-scoped, so the store works through PgBouncer in
// transaction pooling mode (with Options::statements = unnamed before PgBouncer 1.21).
//
// Lifecycle: open() (connects, migrates, checks durability settings) → use → close() (drains
// queued jobs). Thread-safety: all public methods are safe from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "ichido/clock.h"
#include "store/postgres/pg_conn.h"
#include "store/postgres/pg_tables.h"
#include "store/table_store.h"

namespace ichido::store::postgres {

struct Options {
  std::string url;                 // libpq URI or key=value conninfo (multi-host lists allowed)
  std::string schema = "ichido";   // the PostgreSQL schema holding ichido's tables
  int lanes = 4;                   // write connections: batches on different keys in parallel
  int readers = 2;                 // read connections
  std::size_t max_batch = 256;     // jobs per transaction at most
  std::size_t max_queue = 100000;  // queued jobs per lane beyond this are refused (503)
  PgConn::Mode statements = PgConn::Mode::prepared;
  // A request's time bound (--store-timeout): a job is answered at most this long after it was
  // submitted — store_unavailable when the database did not answer in time, with
  // details.outcome "unknown" when its COMMIT had been sent (see "Time bounds" above).
  int timeout_ms = 5000;
  int io_timeout_ms = 20000;  // any one wait for the server, also outside requests, at most this
  int connect_timeout_s = 5;  // per host, unless the URL sets connect_timeout
  // Waiting for a row or key lock another transaction holds at most this (55P03 past it: that
  // job alone answers store_unavailable). Well inside timeout_ms: a batch may wait twice.
  int lock_timeout_ms = 1250;
  int idle_in_tx_timeout_ms = 5000;  // a frozen or cut-off node's transaction ends after this
  int max_retries = 10;              // re-runs after serialization failures / deadlocks
  bool migrate = true;               // create or upgrade the schema at open()
  // The store this node served before (its --data DIR/store.id), "" when none: open() then
  // refuses to create a new store in an empty schema (the database was emptied, or the URL
  // names another database), and refuses a schema holding another store. Both needs_operator.
  std::string expect_store_id;
  std::string application_name = "ichido";  // shown in pg_stat_activity
  Clock* clock = nullptr;                   // tests only: replaces the database's clock
  // The change feed between nodes (docs/decisions/075). listen_url: the LISTEN connection's own
  // URL (empty: url), e.g. the database directly when url is a PgBouncer in transaction mode,
  // where LISTEN does not work. recheck_ms: every waiter re-checks at least this often, so a
  // lost notification costs at most that. listen = false: no LISTEN connection at all (tools).
  std::string listen_url;
  bool listen = true;
  int recheck_ms = 1000;
  int listen_ping_ms = 2000;  // the LISTEN connection is checked with a query this often
};

// The connection settings every connection of a store with these options uses.
PgConn::Settings connection_settings(const Options& o);

// Opens a connection and checks that what it commits is durable (fsync and synchronous_commit
// not off). Errors: store_unavailable.
Result<std::unique_ptr<PgConn>> open_checked(const PgConn::Settings& settings);

// How long a batch waits before its re-run number `retries` (0 first) after a serialization
// failure or deadlock: uniformly random up to 2 ms doubled per re-run, at most 100 ms (full
// jitter: batches that collided do not run again in step and collide again).
std::chrono::milliseconds serialization_retry_wait(int retries);

class PgStore final : public TableStore {
  friend class PgStoreTestPeer;  // tests submit hand-made jobs

 public:
  // Connects, migrates (Options::migrate) and starts the threads. Errors: store_unavailable
  // (unreachable, newer schema, durability off), invalid_request (field schema).
  static Result<std::unique_ptr<PgStore>> open(Options options);
  ~PgStore() override;

  Result<void> check_ready() override;
  Result<void> check_health() override;
  void watch_external_changes(ExternalChangeHandler handler) override;
  // First come, first served across nodes (core/lock.h Q1–Q4, docs/decisions/076): waiters are
  // queued in the database, live while this node's heartbeat lease (renewed by the monitor
  // every 500 ms, 3 s long) lasts.
  bool queues_lock_waiters() const override { return true; }
  // Answers once every live node has applied the revocation (decision 077), or after 3 s
  // (a node that has not confirmed by then has lost its database connections; it reloads its
  // tokens when it gets them back). The revocation itself is durable before any of this.
  void revoke_token(RevokeTokenCmd cmd, Callback<core::TokenInfo> done) override;
  StoreStats stats() const override;
  void close() override;

  // "host:port/schema" of the first connection, for logs.
  const std::string& describe() const { return describe_; }
  // The store's identity (schema table store_identity, made with the schema): 32 hex digits.
  const std::string& store_id() const { return store_id_; }
  // This process's id in the change feed (random at open; its own notifications are ignored).
  const std::string& node_id() const { return node_id_; }
  // Change feed counters (tests, /metrics later): notifications sent and received from others,
  // and how often the LISTEN connection was (re-)established.
  struct FeedStats {
    std::uint64_t sent = 0, received = 0, listens = 0;
  };
  FeedStats feed_stats() const { return {sent_.load(), received_.load(), listens_.load()}; }

 protected:
  void submit_write(Job job) override;
  void submit_read(Job job) override;

 private:
  // A job waiting for a lane or a reader.
  struct Queued {
    Job job;
    std::chrono::steady_clock::time_point deadline;  // submitted + Options::timeout_ms
  };
  struct Lane;
  struct Reader;
  // What ended an attempt at a batch. isolate: a statement failed in an optimistic attempt
  // (the engine runs it again isolated); busy: a lock was held past lock_timeout (run again
  // isolated, each key locked in a savepoint of its own: keys_alone).
  enum class Outcome { committed, isolate, busy, retry, lost, unavailable, unknown };
  // A lane connection's BatchTransaction (store/batch_engine.h); pg_store.cc.
  class LaneTransaction;

  explicit PgStore(Options options);
  Result<void> start();
  void lane_loop(Lane& lane);
  // `deadline`: the earliest of the batch's jobs' time bounds.
  void run_batch(Lane& lane, std::vector<Job>& batch,
                 std::chrono::steady_clock::time_point deadline);
  void reader_loop(Reader& reader);
  void monitor_loop();
  // Renews this node's heartbeat lease (its row in the nodes table).
  Result<void> heartbeat(PgConn& conn);
  void listen_loop();
  // Runs the handler; false when none is installed (nothing was applied).
  bool deliver(const ExternalChanges& changes);
  // deliver() of a token change, confirmed in this node's row (decision 077): the epoch is read
  // before the handler runs and recorded after it — only when a handler ran.
  void deliver_tokens(PgConn& conn, const ExternalChanges& changes);
  void acker_loop();
  using Connecting = std::future<Result<std::unique_ptr<PgConn>>>;
  // A usable connection in `slot`, connecting when needed (not more often than the backoff),
  // in the background (`connecting`): waited for until `deadline` at most.
  PgConn* ensure(std::unique_ptr<PgConn>& slot, Connecting& connecting,
                 std::chrono::steady_clock::time_point& retry_at,
                 std::chrono::milliseconds& backoff, Error& error,
                 std::chrono::steady_clock::time_point deadline);
  // Not ready until the monitor's next probe succeeds (it probes at once). `unreachable`: the
  // database did not answer in time; requests answer at once until that probe.
  void mark_unhealthy(const std::string& why, bool unreachable = false);

  // Constant after construction.
  const Options opt_;
  const Sql sql_;
  const PgConn::Settings settings_;
  std::string describe_;
  std::string store_id_;  // set by start()
  const std::string node_id_;
  const std::string channel_;
  Mutex change_mu_;  // held while the handler runs (watch_external_changes waits for it)
  ExternalChangeHandler handler_ GUARDED_BY(change_mu_);
  // A handler was installed: the LISTEN thread delivers a token change and confirms the epoch
  // (a node that started around a revocation may never hear its notification).
  std::atomic<bool> confirm_tokens_{false};
  std::thread listener_;
  std::atomic<std::uint64_t> sent_{0}, received_{0}, listens_{0};

  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<std::unique_ptr<Reader>> readers_;
  Mutex read_mu_;
  CondVar read_cv_;  // readers wait here
  std::deque<Queued> read_queue_ GUARDED_BY(read_mu_);

  Mutex health_mu_;
  CondVar health_cv_;  // the monitor waits here
  bool healthy_ GUARDED_BY(health_mu_) = false;
  std::string health_reason_ GUARDED_BY(health_mu_);
  bool recheck_ GUARDED_BY(health_mu_) = false;  // a lane saw a failure: probe now
  // Latched: the database is no longer this store (see check_health); never cleared.
  std::optional<Error> identity_lost_ GUARDED_BY(health_mu_);
  std::int64_t highest_token_seen_ = 0;  // the monitor thread's own
  std::thread monitor_;

  // Answers of revocations waiting for the other nodes' confirmation (decision 077).
  Mutex ack_mu_;
  CondVar ack_cv_;
  std::deque<std::function<void()>> acks_ GUARDED_BY(ack_mu_);
  bool acker_stop_ GUARDED_BY(ack_mu_) = false;  // set by close() once the lanes are done
  std::thread acker_;

  std::atomic<bool> closing_{false};
  // The database does not answer (see "Health" above): set by the monitor and by a request that
  // reached its time bound, cleared by the monitor's next successful probe.
  std::atomic<bool> unreachable_{false};
  std::atomic<std::uint64_t> commits_{0};
  std::atomic<std::uint64_t> committed_commands_{0};
  std::atomic<std::uint64_t> failed_commits_{0};
  std::atomic<std::uint64_t> isolated_batches_{0};
  std::once_flag close_once_;
};

}  // namespace ichido::store::postgres
