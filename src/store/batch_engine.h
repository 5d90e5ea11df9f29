// The transaction engine of the durable stores: how a batch of write jobs runs in one
// transaction, and how every job is then answered. The SQLite writer and the PostgreSQL lanes
// both run their batches through run_transaction(); each provides a BatchTransaction (its
// connection, its SQL, its clock and locks) and keeps only what is its own around it: queues,
// threads, reconnection, retries, health.
//
// A batch runs in one of two modes:
//
// - optimistic (first try): the jobs run one after another in one transaction with no savepoint
//   between them. The rules decide before they write, so a job that fails (a 4xx answer) has
//   almost always written nothing; BatchTransaction::writes() tells. A savepoint per job would
//   cost more than all of a counter `next`'s statements, and on PostgreSQL a round trip each.
// - isolated (only when a failed job did write, or the store asks for it): the transaction is
//   rolled back and the whole batch runs again with a savepoint around each job, so a failed
//   job's writes are undone alone. Jobs are functions of (tables, now): each attempt runs them
//   with the `now` its begin() gave (see begin()).
//
// Either way one commit covers the batch. A job that throws (std::exception) is a failed job: its
// result slot stays empty and it answers internal (table_store.h); the batch goes on without it.
// A job can also fail for a reason of the store's (a record locked elsewhere): it then answers
// that error (JobErrors) and its writes are undone with its savepoint. Nothing is finished
// during a run: the caller answers the jobs with BatchResult::finish once it is ready to (the
// SQLite writer first frees its connection).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "ichido/clock.h"
#include "ichido/result.h"
#include "store/table_store.h"

namespace ichido::store {

enum class BatchMode { optimistic, isolated };

// What one step of a BatchTransaction came to. Cheap when ok (no error is built).
struct TxStep {
  enum class Kind {
    ok,
    // Only from job_done(): the job just run failed for a store reason (`error`, its answer).
    // The transaction goes on; in isolated mode the job's savepoint is rolled back.
    job_failed,
    // The transaction is rolled back; running the batch again isolated may commit it (a
    // statement failed in an optimistic attempt, not known whose). In an isolated attempt it is
    // a batch failure.
    rerun_isolated,
    // The transaction is over (rolled back, or the connection is gone): every job answers
    // `error`. What the store makes of it besides (retry, reconnect, latch) it keeps itself.
    batch_failed,
  };
  Kind kind = Kind::ok;
  std::optional<Error> error;  // set for every kind but ok

  static TxStep ok() { return {}; }
  static TxStep job_failed(Error e) { return {Kind::job_failed, std::move(e)}; }
  static TxStep rerun_isolated(Error e) { return {Kind::rerun_isolated, std::move(e)}; }
  static TxStep batch_failed(Error e) { return {Kind::batch_failed, std::move(e)}; }
  bool is_ok() const { return kind == Kind::ok; }
};

// The jobs of a batch that failed for a store reason, with their answers, by index in the batch.
// Empty (and without a heap block) in the usual case that no job did.
class JobErrors {
 public:
  // Records `e` as job `index`'s answer (replacing an earlier one).
  void set(std::size_t index, Error e);
  // Job `index`'s answer, or nullptr when it has none.
  const Error* find(std::size_t index) const;
  bool empty() const { return errors_.empty(); }
  std::size_t size() const { return errors_.size(); }
  void clear() { errors_.clear(); }

 private:
  std::vector<std::pair<std::size_t, Error>> errors_;  // sorted by index
};

// One store's side of a batch's transaction: the engine calls begin(), then per job (in queue
// order) savepoint() [isolated], the job's apply on tables(), job_done(), then
// rollback_to_savepoint() [isolated, job failed] and release_savepoint() [isolated]; after the
// last job flush() and commit(). rollback() ends an optimistic attempt the engine gives up on.
//
// A step that answers rerun_isolated or batch_failed has already ended the transaction (rolled
// it back, or found the connection gone); the engine calls nothing more of that attempt. The
// steps of one attempt need not wait for the database: a pipelining store may send statements
// and learn of their failure at a later step (job_done in isolated mode must know, though:
// a job's failure is known to be its own only there).
//
// Used by one thread at a time (the one that owns the store's write connection).
class BatchTransaction {
 public:
  virtual ~BatchTransaction() = default;

  struct Began {
    TxStep step;
    TimeMs now = 0;  // the jobs' clock for this attempt (when step is ok)
  };
  // Opens the transaction of one attempt at `batch` in `mode`, with tables() ready for its jobs.
  // `now`: the SQLite store gives the same value to every attempt at a batch (its clock, read
  // once); the PostgreSQL store reads the database's clock after the attempt's key locks (the
  // locks were let go in between, so another node may have written at a later time).
  // May answer jobs of the batch in `job_errors` before they run (their records are locked
  // elsewhere): the engine skips those. job_failed is not an answer of begin.
  virtual Began begin(BatchMode mode, std::span<Job> batch, JobErrors& job_errors) = 0;
  // The rows of the open transaction. Valid from a successful begin() to the attempt's end.
  virtual Tables& tables() = 0;
  // A count that grows with every write of the transaction (statements that changed rows,
  // writes deferred to flush): the engine compares it before and after a job.
  virtual std::uint64_t writes() = 0;
  // Isolated mode, before each job: a savepoint (ok, or batch_failed: the job cannot be
  // isolated, so the batch is given up rather than risk a partial effect).
  virtual TxStep savepoint() = 0;
  // After each job's apply: whether the transaction is still whole (batch_failed when not;
  // rerun_isolated in optimistic mode when a statement failed whose job is not known), and in
  // isolated mode whether this job's statements failed (job_failed, with its answer).
  virtual TxStep job_done(BatchMode mode) = 0;
  // Isolated mode, after a job that failed: undoes its writes alone.
  virtual TxStep rollback_to_savepoint() = 0;
  // Isolated mode, after each job (once rolled back to, if it was).
  virtual TxStep release_savepoint() = 0;
  // Optimistic mode: rolls the whole attempt back (a failed job had written) so that the batch
  // can run again isolated. ok: rolled back, and the connection is ready for the next begin().
  virtual TxStep rollback() = 0;
  // After the last job: writes that were deferred (period rows, sequences).
  virtual TxStep flush() = 0;
  // Commits, with what the kept jobs announce to other processes (Job::announce; empty for a
  // single-process store). ok: durable. batch_failed: not committed — or, when the store says
  // so in its error, not known.
  virtual TxStep commit(std::vector<Announcement> announcements) = 0;
};

// How a run ended, and what every job is to be answered.
struct BatchResult {
  bool committed = false;
  // An isolated attempt ran: the first one was isolated, or the optimistic one was rolled back.
  bool isolated = false;
  // Not committed: every job's answer.
  std::optional<Error> error;
  // Committed: the jobs that failed for a store reason, with their answers.
  JobErrors job_errors;

  // The hand-back: calls every job's finish — with `error` when the batch failed, else with
  // its own store error or nullptr (committed: the job delivers its own result). Call once.
  void finish(std::span<Job> batch) const;
};

// Runs `batch` in `tx`: one attempt in `first` mode and, when an optimistic one had a failed job
// that wrote (or the store asked for it), one isolated attempt. Calls no job's finish. Returns
// when the transaction has committed or is given up; the store then decides whether to run
// again (a store's retry of a failed batch starts in isolated mode when `isolated` says so).
// Allocates nothing per job beyond what the jobs and the store do (announcements are copied
// only from jobs that carry some).
BatchResult run_transaction(BatchTransaction& tx, std::span<Job> batch,
                            BatchMode first = BatchMode::optimistic);

}  // namespace ichido::store
