// Store: where ichido's state lives. One interface, several implementations (embedded SQLite,
// PostgreSQL for several nodes, an in-memory reference store); one conformance suite
// (src/store/testing/) runs every rule against each of them.
//
// Contract shared by every method:
//   - Asynchronous: the method returns at once; `done` is called exactly once, on a store-owned
//     thread. `done` must not block; hand work back to your own executor. Exceptions: the
//     in-memory store runs every command on the calling thread, and the embedded store may run a
//     lone write there when its options say the calling thread may wait for it
//     (store/sqlite/sqlite_store.h, Options::caller_may_commit); then `done` is called before the
//     method returns.
//   - Mutations (create_counter, next, void_number, set_last_value, and the lock commands
//     except get_lock/list_locks) call `done` with success only
//     after the effect is durable: on the embedded store, after the commit that contains it was
//     fsync'd (SQLite WAL, synchronous=FULL). An answered change survives kill -9 and power loss.
//   - On any error, nothing was changed. errc::store_unavailable means the store could not apply
//     or persist the change (disk full, I/O error, closed): the same command is safe to retry.
//   - Every command is validated by the core rulebook inside the store's transaction, so two stores
//     given the same commands in the same order give the same answers.
//   - Reads see every mutation whose `done` has been called.
//   - Admin mutations (create_counter, void_number, set_last_value, reset_once,
//     force_release_lock, create_token, revoke_token) take an optional audit entry. When given,
//     it is appended to the audit log in the same transaction as the command's effect: both are
//     durable, or neither is. Its `status` is kept as the caller set it (the success status),
//     except for create_counter, which sets 201 when it created the counter and 200 otherwise;
//     `at` is set to the store's clock when 0. A failing command writes no audit entry: the
//     caller records failures with append_audit.
// Thread-safety: all methods may be called concurrently from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/auth.h"
#include "core/counter.h"
#include "core/lock.h"
#include "core/once.h"
#include "ichido/result.h"

namespace ichido {

// A command's answer, called once. The result is passed by rvalue reference: moved from, never
// copied, on its way to the handler (a by-value parameter cost two more moves per hop).
template <class T>
using Callback = std::function<void(Result<T>&&)>;

// --- counters --------------------------------------------------------------------------------

struct CounterRef {
  std::string ns;
  std::string name;
};

// The audit entry of an admin mutation, written atomically with it (see the contract above).
using AuditNote = std::optional<core::AuditEntry>;

struct CreateCounterCmd {
  CounterRef ref;
  core::CounterConfig config;
  AuditNote audit;
};
struct CreateCounterReply {
  bool created = false;  // false: it already existed with this exact config
  core::CounterInfo info;
};

struct NextCmd {
  CounterRef ref;
  core::NextCommand next;
};
struct NextReply {
  core::IssuedNumber record;
  bool replayed = false;
};

struct VoidCmd {
  CounterRef ref;
  std::int64_t value = 0;
  std::optional<std::string> period;  // default: the current period
  std::string reason;
  AuditNote audit;
};

struct SetCmd {
  CounterRef ref;
  std::int64_t expected_last_value = 0;
  std::int64_t last_value = 0;
  AuditNote audit;
};

struct IssuedQuery {
  CounterRef ref;
  std::optional<std::string> key;     // when set: the record of this key (0 or 1 items)
  std::optional<std::string> period;  // default: the current period
  std::int64_t after = 0;             // values strictly greater than this
  int limit = 100;                    // 1..kMaxIssuedLimit
};
inline constexpr int kMaxIssuedLimit = 1000;
struct IssuedPage {
  std::vector<core::IssuedNumber> items;
  std::optional<std::int64_t> next_after;  // set when more items may follow
};

// --- once records ---------------------------------------------------------------------------

struct OnceRef {
  std::string ns;
  std::string key;
};

struct BeginOnceCmd {
  OnceRef ref;
  core::BeginCommand begin;
};
struct BeginOnceReply {
  core::BeginOutcome outcome = core::BeginOutcome::acquired;
  core::OnceRecord record;          // after the decision (acquired: with its new token)
  std::int64_t retry_after_ms = 0;  // in_progress
  bool replayed = false;            // acquired again for the same request_id (core/once.h O8)
};

struct CompleteOnceCmd {
  OnceRef ref;
  std::int64_t token = 0;
  std::string result_json;  // serialized JSON, at most core::kMaxResultBytes
};
struct FailOnceCmd {
  OnceRef ref;
  std::int64_t token = 0;
  std::string error;
  bool retry = true;
};
struct RenewOnceCmd {
  OnceRef ref;
  std::int64_t token = 0;
  std::int64_t lease_ms = core::kDefaultLeaseMs;
};

struct AbandonOnceCmd {
  OnceRef ref;
  std::int64_t token = 0;
};

struct ResetOnceCmd {
  OnceRef ref;
  AuditNote audit;
};

struct OnceQuery {
  std::string ns;
  core::OnceFilter filter = core::OnceFilter::all;
  std::string after;  // keys strictly greater than this (byte order)
  int limit = 100;    // 1..kMaxOnceLimit
};
inline constexpr int kMaxOnceLimit = 1000;
struct OncePage {
  std::vector<core::OnceRecord> items;
  std::optional<std::string> next_after;  // set when more items may follow
};

// Purge of finished records: completed or dead records older than their namespace's retention
// (NamespaceSettings::once_retention_ms when the namespace has one, else finished_at <
// older_than), at most `limit` of them in all, oldest first within a namespace.
struct PurgeOnceCmd {
  TimeMs older_than = 0;
  int limit = 100;
  // When set, older_than is ignored: the cut-off is the store's clock minus this, read in the
  // purge's transaction (with PostgreSQL the database's clock, so every node purges alike
  // whatever its own clock says).
  std::optional<std::int64_t> retention_ms;
};

// --- locks -----------------------------------------------------------------------------------

struct LockRef {
  std::string ns;
  std::string name;
};

struct AcquireLockCmd {
  LockRef ref;
  std::string owner;
  std::int64_t lease_ms = core::kLockDefaultLeaseMs;
  std::optional<std::string> request_id;  // core/lock.h L8
  // Only answer a replay (L8); otherwise answer acquired=false without granting, even when the
  // lock is free. For a retry that must not overtake queued waiters.
  bool replay_only = false;
  // Stores that keep a waiter queue (Store::queues_lock_waiters, core/lock.h Q1–Q4): the caller's
  // waiter id. When the lock is not granted, the caller is queued under this id (or keeps the
  // place it has), live until now + wait_ms; a grant a release made for this waiter (Q3) is
  // answered as acquired. Ignored by stores without a queue.
  std::optional<std::string> waiter_id;
  std::int64_t wait_ms = 0;
};
struct AcquireLockReply {
  bool acquired = false;
  bool replayed = false;  // acquired: the current grant answered again (L8), nothing written
  // acquired: the grant. Otherwise: the live holder that made the lock busy (empty record when
  // replay_only found no replay and nobody holds a live lease).
  core::LockRecord record;
  // The store's clock when it decided (lease ends are on this clock; the service converts them
  // into steady-clock timers by the difference, so server clock jumps cannot stall a waiter).
  TimeMs now = 0;
  bool queued = false;  // not acquired: the caller holds a place in the store's waiter queue
  // Not acquired because of the queue (Q2): the head live waiter, which comes first.
  std::optional<std::string> head_waiter;
};

// Q4: give up a place in the waiter queue.
struct LeaveLockQueueCmd {
  LockRef ref;
  std::string waiter_id;
  std::int64_t lease_ms = core::kLockDefaultLeaseMs;  // of a grant it picks up (Q3)
};

struct ReleaseLockCmd {
  LockRef ref;
  std::int64_t token = 0;
  // The service releases a grant whose client went away before the answer reached it: nothing
  // changes (and the answer is Ok) when a replay answered that grant meanwhile (core L9).
  bool for_gone_client = false;
};
struct RenewLockCmd {
  LockRef ref;
  std::int64_t token = 0;
  std::int64_t lease_ms = core::kLockDefaultLeaseMs;
};
struct ForceReleaseCmd {
  LockRef ref;
  AuditNote audit;
};
struct ForceReleaseReply {
  bool released = false;                     // false: there was no record to end
  std::optional<core::LockRecord> previous;  // the record that was deleted (held or lapsed)
};
// What GET answers: the live holder (absent when free or lapsed), and the store's clock.
struct LockState {
  std::optional<core::LockRecord> holder;
  TimeMs now = 0;
  // Stores that keep a waiter queue: the live waiters queued, on every process (Q1).
  std::optional<std::int64_t> queued;
};

// --- tokens -----------------------------------------------------------------------------------

struct CreateTokenCmd {
  core::TokenInfo token;  // hash only: the secret never reaches the store
  AuditNote audit;
};
struct RevokeTokenCmd {
  std::string id;
  AuditNote audit;
};

// Per-namespace settings (PUT /v1/ns/{ns}/settings). An unset field means the server's default.
struct NamespaceSettings {
  std::optional<std::int64_t> once_retention_ms;  // completed/dead once records kept this long
  friend bool operator==(const NamespaceSettings&, const NamespaceSettings&) = default;
};
struct PutNsSettingsCmd {
  std::string ns;
  NamespaceSettings settings;
  AuditNote audit;
};

// --- audit, namespaces -----------------------------------------------------------------------

// A page of the audit log. Filters combine (AND); an empty filter matches everything.
struct AuditQuery {
  std::int64_t after = 0;              // ids greater than this
  std::optional<std::int64_t> before;  // ids less than this
  bool newest_first = false;           // false: increasing id order
  std::string actor;                   // exact token id ("" = any)
  std::string action;                  // substring of the action ("" = any), case-sensitive
  std::optional<std::string> ns;       // exact namespace
  int limit = 100;                     // 1..kMaxAuditLimit
};
inline constexpr int kMaxAuditLimit = 1000;

// Once records of one namespace by state, at the store's clock. Each count stops at the cap the
// caller gave (counting a 10M-row state exactly on every look would be a full index scan);
// `capped` says which reached it.
struct OnceCounts {
  std::int64_t processing = 0;  // live leases only
  std::int64_t expired = 0;     // processing with a lapsed lease (the holder probably crashed)
  std::int64_t pending = 0;
  std::int64_t completed = 0;
  std::int64_t dead = 0;
  bool capped = false;                         // some count reached the cap
  std::optional<TimeMs> oldest_expired_lease;  // the earliest lapsed lease end, if any
};
struct NamespaceSummary {
  std::string ns;
  std::int64_t counters = 0;
  std::int64_t locks_held = 0;  // live leases
  OnceCounts once;
};

// Counters of the store's own work, for /metrics and the benchmarks.
struct StoreStats {
  std::uint64_t commits = 0;             // write transactions committed
  std::uint64_t committed_commands = 0;  // commands in them (commands / commits = batch size)
  std::uint64_t failed_commits = 0;
  // Batches re-run with a savepoint per job because a failing command had already written
  // (normally 0: the rules decide before they write).
  std::uint64_t isolated_batches = 0;
  // Time spent in COMMIT (the fsync) over all commits, in microseconds.
  std::uint64_t commit_us_total = 0;
  // The fatal write latch: a commit failed with an I/O error and every later write is refused
  // until the process restarts (LevelDB's rule: never carry on after a failed fsync).
  bool write_failed = false;
  // Figures of one store's own machinery (the embedded store's checkpoints and key index, …),
  // served on /metrics as they are. Names start with ichido_store_.
  struct Metric {
    enum class Type { counter, gauge };
    std::string name;
    Type type = Type::counter;
    std::string help;
    std::uint64_t value = 0;
  };
  std::vector<Metric> own;
};

// What other processes sharing the store committed that may end a wait in this one (several
// nodes on one PostgreSQL: docs/decisions/075). A hint, never a state: whoever is woken asks the
// store again, so a spurious entry costs one read and a missing one at most the store's re-check
// interval.
struct ExternalChanges {
  bool all_waiters = false;             // unknown what changed: every waiter re-checks
  std::vector<std::string> namespaces;  // every waiter in these namespaces re-checks
  std::vector<LockRef> locks;           // released or force-released
  std::vector<OnceRef> once;            // completed, failed, reset or abandoned
  bool tokens = false;                  // a token was created or revoked: reload them
};
using ExternalChangeHandler = std::function<void(const ExternalChanges&)>;

class Store {
 public:
  virtual ~Store() = default;

  // PUT a counter: created, or already existing with an identical config (created=false).
  // Errors: invalid_request (field), counter_exists.
  virtual void create_counter(CreateCounterCmd cmd, Callback<CreateCounterReply> done) = 0;
  // Issue the next number, or replay the number already issued to cmd.next.key.
  // Errors: counter_not_found, key_required, counter_exhausted.
  virtual void next(NextCmd cmd, Callback<NextReply> done) = 0;
  // Mark an issued number as voided (idempotent). Errors: counter_not_found, value_not_issued,
  // invalid_request (field period).
  virtual void void_number(VoidCmd cmd, Callback<core::IssuedNumber> done) = 0;
  // Compare-and-set of the current period's last value. Errors: counter_not_found,
  // value_mismatch, value_below_issued, invalid_request (field last_value).
  virtual void set_last_value(SetCmd cmd, Callback<core::CounterInfo> done) = 0;

  virtual void get_counter(CounterRef ref, Callback<core::CounterInfo> done) = 0;
  virtual void list_counters(std::string ns, Callback<std::vector<core::CounterInfo>> done) = 0;
  // Errors: counter_not_found, invalid_request (field period, or limit outside 1..1000).
  virtual void list_issued(IssuedQuery q, Callback<IssuedPage> done) = 0;

  // Once records (core/once.h has the lifecycle). All mutations are durable when answered.
  // begin: acquired / in_progress / completed / dead. Errors: fingerprint_mismatch.
  virtual void begin_once(BeginOnceCmd cmd, Callback<BeginOnceReply> done) = 0;
  // The record as completed. Errors: once_not_found, stale_token.
  virtual void complete_once(CompleteOnceCmd cmd, Callback<core::OnceRecord> done) = 0;
  // The record as pending or dead. Errors: once_not_found, stale_token.
  virtual void fail_once(FailOnceCmd cmd, Callback<core::OnceRecord> done) = 0;
  // The record with its new lease. Errors: once_not_found, stale_token.
  virtual void renew_once(RenewOnceCmd cmd, Callback<core::OnceRecord> done) = 0;
  // Errors: once_not_found.
  virtual void get_once(OnceRef ref, Callback<core::OnceRecord> done) = 0;
  // Records in key order. Errors: invalid_request (field limit).
  virtual void list_once(OnceQuery q, Callback<OncePage> done) = 0;
  // Undoes the acquisition of `token` whose answer could not be delivered (core::decide_abandon;
  // not one a replay answered: O9): answers whether anything was undone. Errors: none beyond the
  // store's own.
  virtual void abandon_once(AbandonOnceCmd cmd, Callback<bool> done) = 0;
  // Forgets the record; answers it as it was. Errors: once_not_found.
  virtual void reset_once(ResetOnceCmd cmd, Callback<core::OnceRecord> done) = 0;
  // Deletes up to cmd.limit finished records past their namespace's retention; answers how many.
  virtual void purge_once(PurgeOnceCmd cmd, Callback<std::int64_t> done) = 0;
  // --- tokens and the audit log ---
  // Stores a new token (its hash, never the secret). Errors: invalid_request.
  virtual void create_token(CreateTokenCmd cmd, Callback<core::TokenInfo> done) = 0;
  // Marks a token revoked (idempotent; the first revocation time is kept). Errors:
  // token_not_found.
  virtual void revoke_token(RevokeTokenCmd cmd, Callback<core::TokenInfo> done) = 0;
  virtual void list_tokens(Callback<std::vector<core::TokenInfo>> done) = 0;
  // The token whose secret hashes to `hash` (SHA-256 hex), revoked or not; nullopt when none.
  virtual void find_token_by_hash(std::string hash,
                                  Callback<std::optional<core::TokenInfo>> done) = 0;
  // Appends one audit record; the store assigns its id (increasing).
  virtual void append_audit(core::AuditEntry entry, Callback<core::AuditEntry> done) = 0;
  // Up to q.limit (1..kMaxAuditLimit + 1) records matching q, in q's order. Errors:
  // invalid_request (field limit).
  virtual void list_audit(AuditQuery q, Callback<std::vector<core::AuditEntry>> done) = 0;
  // The settings of a namespace (all unset when it has none; never an error for a valid name).
  virtual void get_ns_settings(std::string ns, Callback<NamespaceSettings> done) = 0;
  // Replaces the settings of a namespace (durable when answered); answers them.
  virtual void put_ns_settings(PutNsSettingsCmd cmd, Callback<NamespaceSettings> done) = 0;
  // One summary per namespace (every namespace with a counter, a once record or a lock row, in
  // byte order; only `only_ns` when set, even if empty), once counts capped at `cap` each.
  virtual void summarize_namespaces(std::optional<std::string> only_ns, std::int64_t cap,
                                    Callback<std::vector<NamespaceSummary>> done) = 0;
  // --- locks (rules: core/lock.h) ---
  // Replays the current grant when cmd carries its owner and request_id (core/lock.h L8); else
  // grants the lock when it is free or lapsed (with a fresh token from the store's sequence), or
  // answers acquired=false with the live holder; the lock is unchanged then. With
  // cmd.replay_only it never grants. With a waiter queue (queues_lock_waiters) a free lock is
  // granted only when no live waiter is queued ahead (Q2), and cmd.waiter_id queues the caller
  // when not granted. Errors: none beyond the store's own.
  virtual void acquire_lock(AcquireLockCmd cmd, Callback<AcquireLockReply> done) = 0;
  // Whether this store keeps a durable waiter queue shared by every process using it (Q1–Q4):
  // the lock service then waits through the queue instead of its in-process line.
  virtual bool queues_lock_waiters() const { return false; }
  // Q4: removes the waiter's place (nothing when it has none). When the lock was granted to this
  // waiter meanwhile, picks the grant up (Q3) and answers acquired=true with it (the caller now
  // holds it); otherwise
  // acquired=false with the live holder. Stores without a queue answer acquired=false.
  virtual void leave_lock_queue(LeaveLockQueueCmd cmd, Callback<AcquireLockReply> done) = 0;
  // Deletes the record when `token` is the current one (held or lapsed); with a waiter queue,
  // grants the lock to the head live waiter in the same transaction (Q3). With for_gone_client,
  // a grant a replay answered is kept and the answer is Ok (L9). Errors: not_holder.
  virtual void release_lock(ReleaseLockCmd cmd, Callback<Unit> done) = 0;
  // Moves the lease end to now + lease_ms, same token. Errors: not_holder, invalid_request.
  virtual void renew_lock(RenewLockCmd cmd, Callback<core::LockRecord> done) = 0;
  // Deletes any record of the lock (idempotent: released=false when there was none); with a
  // waiter queue, then grants the lock to the head live waiter (Q3).
  virtual void force_release_lock(ForceReleaseCmd cmd, Callback<ForceReleaseReply> done) = 0;
  virtual void get_lock(LockRef ref, Callback<LockState> done) = 0;
  // The held locks of a namespace (live leases only), by name: `holder` always set, `queued` as
  // for get_lock (the waiters of every process, with a waiter queue).
  virtual void list_locks(std::string ns, Callback<std::vector<LockState>> done) = 0;

  // Synchronous and cheap: can the store read and write right now? (/readyz)
  virtual Result<void> check_ready() = 0;
  // Synchronous and cheap: is the process still fit to serve (/healthz)? Fails for latched
  // conditions a restart or an operator must clear (a failed fsync, damage in the data).
  virtual Result<void> check_health() { return {}; }
  virtual StoreStats stats() const = 0;
  // Registers the handler of changes committed by OTHER processes sharing the store (replacing
  // the previous one; an empty function unregisters). When this returns, the previous handler
  // is not running and will not run again. The handler runs on a store thread and must not
  // block. Stores that only one process uses (memory, SQLite) never call it: this process's
  // services see their own changes.
  virtual void watch_external_changes(ExternalChangeHandler handler) { (void)handler; }
  // Stops accepting commands, finishes those already queued (their callbacks run), releases
  // files and connections. Later calls fail with store_unavailable. Idempotent; blocks.
  virtual void close() = 0;
};

}  // namespace ichido
