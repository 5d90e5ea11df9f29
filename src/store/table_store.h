// TableStore: implements every Store command once, on top of Tables and the core rulebook.
//
// A backend derives from it and provides two things: how a write job runs (inside a durable
// transaction, possibly batched with others) and how a read job runs. The command logic itself
// (load rows, ask core, save rows) is shared, so the backends cannot drift apart.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "ichido/clock.h"
#include "ichido/store.h"
#include "store/tables.h"

namespace ichido::store {

// The key of one record a write job reads and writes (a counter, a once key, a lock, a token),
// for stores shared by several processes: the PostgreSQL store takes a transaction-scoped
// advisory lock on every key of a batch, in sorted order, before it reads the clock and runs the
// jobs, so two nodes never interleave on one record (docs/decisions/071). A single-process
// store's jobs carry none (its writer is already serial; TableStore::extras).
//
// FNV-1a 64 of kind '\0' a '\0' b. It is part of the PostgreSQL store's protocol between nodes:
// two nodes that hashed differently would no longer exclude each other, so it never changes.
// A collision only makes two unrelated records share a lock. The key leaves out the PostgreSQL
// schema, so two stores in one database serialize records of equal names: a wait, never a wrong
// answer. Putting the schema in would break exclusion between nodes of two versions during a
// rolling upgrade.
std::int64_t job_key(std::string_view kind, std::string_view a, std::string_view b);
inline std::vector<std::int64_t> counter_keys(const CounterRef& r) {
  return {job_key("counter", r.ns, r.name)};
}
inline std::vector<std::int64_t> once_keys(const OnceRef& r) {
  return {job_key("once", r.ns, r.key)};
}
inline std::vector<std::int64_t> lock_keys(const LockRef& r) {
  return {job_key("lock", r.ns, r.name)};
}

// What a committed write job may have ended for waiters elsewhere: a lock released, a once
// record finished, failed, reset or abandoned, a token created or revoked. Stores shared by
// several processes tell the others (the PostgreSQL store: one NOTIFY per committed transaction,
// docs/decisions/075); a single-process store's jobs carry none.
struct Announcement {
  enum class Kind { lock, once, tokens };
  Kind kind;
  std::string ns;
  std::string name;  // lock name or once key; empty for tokens
};
inline Announcement announce_lock(const LockRef& r) {
  return {Announcement::Kind::lock, r.ns, r.name};
}
inline Announcement announce_once(const OnceRef& r) {
  return {Announcement::Kind::once, r.ns, r.key};
}
inline Announcement announce_tokens() { return {Announcement::Kind::tokens, "", ""}; }

// One unit of work for a backend. `apply` runs inside a transaction and returns true when its
// changes should be kept (false: the backend rolls back just this job). `finish` runs after the
// transaction's fate is known: with nullptr when committed durably, else with the store error
// that undid it (then the job's own result must not be delivered).
struct Job {
  std::function<bool(Tables&, TimeMs now)> apply;
  std::function<void(const Error* store_error)> finish;
  // Write jobs: the job_key of every record `apply` may write (and the reads its decision rests
  // on). Empty for reads, for writes that need no exclusion or take care of it themselves
  // (purge: Tables::purge_once), and for every job of a store that does not coordinate
  // processes (this one, `prefetch` and `announce`: JobExtras).
  std::vector<std::int64_t> keys;
  // Optional: announces the rows `apply` will look up (Tables::prefetch_*). Called on every job
  // of a batch, after the batch's key locks are taken, before the first job runs.
  std::function<void(Tables&)> prefetch;
  // Announced to other processes when the job committed and succeeded (see Announcement).
  std::vector<Announcement> announce;
  // What `apply` and `finish` point to, when they do not own it themselves (make_job): a Job's
  // functions are called only while the Job (or a copy or move of it) lives.
  std::shared_ptr<void> state;
};

// A write job's keys, prefetch and announcements: what only a store shared by several processes
// uses (a PostgreSQL store: TableStore's `coordinates`). Built through TableStore::extras(), which
// skips building them for a single-process store: that saves up to eight allocations and string
// copies a write.
struct JobExtras {
  std::vector<std::int64_t> keys;
  std::function<void(Tables&)> prefetch;
  std::vector<Announcement> announce;
};

class TableStore : public Store {
 public:
  void create_counter(CreateCounterCmd cmd, Callback<CreateCounterReply> done) override;
  void next(NextCmd cmd, Callback<NextReply> done) override;
  void void_number(VoidCmd cmd, Callback<core::IssuedNumber> done) override;
  void set_last_value(SetCmd cmd, Callback<core::CounterInfo> done) override;
  void get_counter(CounterRef ref, Callback<core::CounterInfo> done) override;
  void list_counters(std::string ns, Callback<std::vector<core::CounterInfo>> done) override;
  void list_issued(IssuedQuery q, Callback<IssuedPage> done) override;

  // Once records: defined in once_ops.cc.
  void begin_once(BeginOnceCmd cmd, Callback<BeginOnceReply> done) override;
  void complete_once(CompleteOnceCmd cmd, Callback<core::OnceRecord> done) override;
  void fail_once(FailOnceCmd cmd, Callback<core::OnceRecord> done) override;
  void renew_once(RenewOnceCmd cmd, Callback<core::OnceRecord> done) override;
  void get_once(OnceRef ref, Callback<core::OnceRecord> done) override;
  void list_once(OnceQuery q, Callback<OncePage> done) override;
  void abandon_once(AbandonOnceCmd cmd, Callback<bool> done) override;
  void reset_once(ResetOnceCmd cmd, Callback<core::OnceRecord> done) override;
  void purge_once(PurgeOnceCmd cmd, Callback<std::int64_t> done) override;

  // admin_ops.cc
  void create_token(CreateTokenCmd cmd, Callback<core::TokenInfo> done) override;
  void revoke_token(RevokeTokenCmd cmd, Callback<core::TokenInfo> done) override;
  void list_tokens(Callback<std::vector<core::TokenInfo>> done) override;
  void find_token_by_hash(std::string hash, Callback<std::optional<core::TokenInfo>> done) override;
  void append_audit(core::AuditEntry entry, Callback<core::AuditEntry> done) override;
  void list_audit(AuditQuery q, Callback<std::vector<core::AuditEntry>> done) override;
  void get_ns_settings(std::string ns, Callback<NamespaceSettings> done) override;
  void put_ns_settings(PutNsSettingsCmd cmd, Callback<NamespaceSettings> done) override;
  void summarize_namespaces(std::optional<std::string> only_ns, std::int64_t cap,
                            Callback<std::vector<NamespaceSummary>> done) override;
  // Not in Store: stores `token` (its created_at set to the store's clock) only when the store
  // holds no token at all — the first start's admin token — and answers whether it did. Atomic
  // across processes sharing the store: of several nodes starting together on an empty
  // PostgreSQL database, exactly one gets true. (admin_ops.cc)
  // `audit` is appended in the same transaction when the token is stored.
  void create_first_token(core::TokenInfo token, AuditNote audit, Callback<bool> done);
  // Locks: defined in lock_ops.cc.
  void acquire_lock(AcquireLockCmd cmd, Callback<AcquireLockReply> done) override;
  void leave_lock_queue(LeaveLockQueueCmd cmd, Callback<AcquireLockReply> done) override;
  void release_lock(ReleaseLockCmd cmd, Callback<Unit> done) override;
  void renew_lock(RenewLockCmd cmd, Callback<core::LockRecord> done) override;
  void force_release_lock(ForceReleaseCmd cmd, Callback<ForceReleaseReply> done) override;
  void get_lock(LockRef ref, Callback<LockState> done) override;
  void list_locks(std::string ns, Callback<std::vector<LockState>> done) override;

 protected:
  // `coordinates`: the store is shared by several processes and uses a write job's keys,
  // prefetch and announcements (JobExtras); a single-process store is not, and its jobs carry
  // none of them.
  explicit TableStore(bool coordinates = false) : coordinates_(coordinates) {}

  // Backends run `job` durably (write) or on a consistent snapshot (read), then call finish.
  virtual void submit_write(Job job) = 0;
  virtual void submit_read(Job job) = 0;

  // `build()` when this store coordinates processes, else nothing (it is not called): the
  // JobExtras of a write. `build` runs before the command is moved into the job, so it may read
  // the command by reference.
  template <class Build>
  JobExtras extras(Build&& build) const {
    if (!coordinates_) return {};
    return std::forward<Build>(build)();
  }

  // Runs `fn` (Result<T>(Tables&, TimeMs)) as a write (durable) or read job and delivers its
  // result to `done`.
  template <class T, class Fn>
  void write(Fn fn, Callback<T> done, JobExtras x = {}) {
    Job job = make_job<T>(std::move(fn), std::move(done));
    job.keys = std::move(x.keys);
    job.prefetch = std::move(x.prefetch);
    job.announce = std::move(x.announce);
    submit_write(std::move(job));
  }
  template <class T, class Fn>
  void read(Fn fn, Callback<T> done) {
    submit_read(make_job<T>(std::move(fn), std::move(done)));
  }

  // Runs `fn` as a write job; when it succeeds and `audit` is set, appends the audit entry in
  // the same transaction (the Store contract for admin mutations). `status_of` may adjust the
  // entry's status from the result (create_counter: 201 or 200). `x`: as for write(); an
  // audited job also takes the audit log's key (audit ids in commit order).
  template <class T, class Fn>
  void write_audited(Fn fn, AuditNote audit, Callback<T> done, JobExtras x = {},
                     int (*status_of)(const T&) = nullptr) {
    if (!audit) {
      write<T>(std::move(fn), std::move(done), std::move(x));
      return;
    }
    if (coordinates_) x.keys.push_back(job_key("audit", "", ""));
    write<T>(
        [fn = std::move(fn), entry = std::move(*audit), status_of](Tables& t,
                                                                   TimeMs now) -> Result<T> {
          auto r = fn(t, now);
          if (!r.ok()) return r;
          core::AuditEntry e = entry;
          if (e.at == 0) e.at = now;
          if (status_of) e.status = static_cast<unsigned>(status_of(*r));
          auto id = t.insert_audit(e);
          if (!id.ok()) return std::move(id).error();
          return r;
        },
        std::move(done), std::move(x));
  }

  // One heap block per job for the function, the callback and the result: apply and finish
  // hold a plain pointer to it (small enough for std::function's inline storage, so neither
  // allocates), Job::state owns it. The function is held as its own type, not boxed again in a
  // std::function, which would allocate a box of its own.
  template <class T, class Fn>
  static Job make_job(Fn fn, Callback<T> done) {
    struct State {
      Fn fn;
      Callback<T> done;
      std::optional<Result<T>> result;
    };
    auto state = std::make_shared<State>(State{std::move(fn), std::move(done), std::nullopt});
    State* s = state.get();
    Job job;
    job.apply = [s](Tables& t, TimeMs now) {
      s->result.emplace(s->fn(t, now));
      return s->result->ok();
    };
    job.finish = [s](const Error* store_error) {
      if (store_error) {
        s->done(*store_error);
      } else if (s->result) {
        s->done(std::move(*s->result));
      } else {
        s->done(Error(errc::internal,
                      "An internal error stopped this command; nothing of it was saved."));
      }
    };
    job.state = std::move(state);
    return job;
  }

 private:
  const bool coordinates_;
};

}  // namespace ichido::store
