// The lock commands of TableStore: load the lock's row, ask core/lock.h, write the result (and the
// token drawn for a grant) in the same transaction. Rules and invariants L1–L7: core/lock.h.
#include <algorithm>
#include <functional>
#include <utility>

#include "store/table_store.h"

namespace ichido::store {

namespace {

// Q3: hands a lock just freed in this transaction to the head live waiter, if any.
Result<void> grant_to_head(Tables& t, const LockRef& ref, TimeMs now) {
  if (!t.keeps_lock_queue()) return {};
  auto q = t.find_lock_queue(ref.ns, ref.name, std::string());
  if (!q.ok()) return std::move(q).error();
  if (!q->head) return {};
  const LockWaiterRow& head = *q->head;
  auto token = t.next_token();  // L2: same transaction as the grant
  if (!token.ok()) return std::move(token).error();
  auto grant = core::make_grant(ref.name, head.owner, *token,
                                std::min(head.lease_ms, core::kLockPickupMs), now, head.request_id);
  grant.waiter = head.waiter_id;
  ICHIDO_TRY(t.save_lock(ref.ns, grant));
  return t.delete_lock_waiter(ref.ns, ref.name, head.waiter_id);
}

// A lock command's keys and prefetch (the lock's row), and its announcement when `wakes`: the
// command may free the lock, or leave its queue, for waiters on other nodes.
JobExtras lock_extras(const LockRef& ref, bool wakes) {
  JobExtras e{lock_keys(ref), [ref](Tables& t) { t.prefetch_lock(ref.ns, ref.name); }, {}};
  if (wakes) e.announce.push_back(announce_lock(ref));
  return e;
}

// What release and force-release read: the lock's row and its queue's head (Q3).
JobExtras release_extras(const LockRef& ref) {
  JobExtras e = lock_extras(ref, /*wakes=*/true);
  e.prefetch = [ref](Tables& t) {
    t.prefetch_lock(ref.ns, ref.name);
    t.prefetch_lock_queue(ref.ns, ref.name, std::string());
  };
  return e;
}

// Q3: the waiter a grant was made for picks it up; its lease runs from now.
Result<core::LockRecord> pick_up(Tables& t, const std::string& ns, core::LockRecord granted,
                                 std::int64_t lease_ms, TimeMs now) {
  auto picked = core::pick_up(std::move(granted), lease_ms, now);
  ICHIDO_TRY(t.save_lock(ns, picked));
  return picked;
}

// The live holder of `current` at `now`, or an empty record.
core::LockRecord holder_of(std::optional<core::LockRecord>& current, TimeMs now) {
  if (core::is_held(current, now)) return std::move(*current);
  return core::LockRecord{};
}

}  // namespace

void TableStore::acquire_lock(AcquireLockCmd cmd, Callback<AcquireLockReply> done) {
  JobExtras x = extras([&] {
    JobExtras e = lock_extras(cmd.ref, /*wakes=*/false);
    e.prefetch = [ref = cmd.ref, waiter = cmd.waiter_id.value_or(std::string())](Tables& t) {
      t.prefetch_lock(ref.ns, ref.name);
      t.prefetch_lock_queue(ref.ns, ref.name, waiter);
      t.prefetch_token();
    };
    return e;
  });
  write<AcquireLockReply>(
      [cmd = std::move(cmd)](Tables& t, TimeMs now) -> Result<AcquireLockReply> {
        ICHIDO_TRY(core::validate_lease_ms(cmd.lease_ms));
        auto current = t.find_lock(cmd.ref.ns, cmd.ref.name);
        if (!current.ok()) return std::move(current).error();
        const std::string me = cmd.waiter_id.value_or(std::string());
        LockQueueView queue;
        if (t.keeps_lock_queue()) {
          if (!me.empty() && *current && (*current)->waiter == me) {  // Q3: made for this waiter
            auto picked = pick_up(t, cmd.ref.ns, std::move(**current), cmd.lease_ms, now);
            if (!picked.ok()) return std::move(picked).error();
            return AcquireLockReply{true, false, std::move(*picked), now};
          }
          auto q = t.find_lock_queue(cmd.ref.ns, cmd.ref.name, me);
          if (!q.ok()) return std::move(q).error();
          queue = std::move(*q);
        }
        const bool ahead = queue.head && (!queue.mine || queue.head->seq < *queue.mine);  // Q2
        // Nothing is written unless granted, queued or replayed the first time (L9); the job
        // still commits (empty), which keeps the answer ordered after every earlier durable
        // change.
        switch (core::decide_acquire(*current, now, cmd.owner, cmd.request_id, ahead)) {
          case core::AcquireVerdict::replay: {
            core::LockRecord& granted = **current;
            if (!granted.replayed) {  // L9: a release for its gone first attempt must keep it
              granted.replayed = true;
              ICHIDO_TRY(t.save_lock(cmd.ref.ns, granted));
            }
            return AcquireLockReply{true, true, std::move(granted), now};
          }
          case core::AcquireVerdict::busy: {
            AcquireLockReply busy{false, false, holder_of(*current, now), now};
            if (ahead) busy.head_waiter = queue.head->waiter_id;
            if (t.keeps_lock_queue() && !me.empty() && !cmd.replay_only) {
              if (!queue.mine) {
                ICHIDO_TRY(t.enqueue_lock_waiter(
                    cmd.ref.ns, cmd.ref.name,
                    LockWaiterRow{0, me, cmd.owner, cmd.lease_ms, cmd.request_id}, cmd.wait_ms));
              }
              busy.queued = true;
            }
            return busy;
          }
          case core::AcquireVerdict::grant:
            break;
        }
        if (cmd.replay_only) return AcquireLockReply{false, false, holder_of(*current, now), now};
        auto token = t.next_token();  // L2: same transaction as the grant
        if (!token.ok()) return std::move(token).error();
        auto grant =
            core::make_grant(cmd.ref.name, cmd.owner, *token, cmd.lease_ms, now, cmd.request_id);
        ICHIDO_TRY(t.save_lock(cmd.ref.ns, grant));
        if (queue.mine) ICHIDO_TRY(t.delete_lock_waiter(cmd.ref.ns, cmd.ref.name, me));
        return AcquireLockReply{true, false, std::move(grant), now};
      },
      std::move(done), std::move(x));
}

void TableStore::leave_lock_queue(LeaveLockQueueCmd cmd, Callback<AcquireLockReply> done) {
  JobExtras x = extras([&] { return lock_extras(cmd.ref, /*wakes=*/true); });
  write<AcquireLockReply>(
      [cmd = std::move(cmd)](Tables& t, TimeMs now) -> Result<AcquireLockReply> {
        auto current = t.find_lock(cmd.ref.ns, cmd.ref.name);
        if (!current.ok()) return std::move(current).error();
        if (t.keeps_lock_queue()) {
          if (*current && (*current)->waiter == cmd.waiter_id) {  // Q4: granted meanwhile
            ICHIDO_TRY(core::validate_lease_ms(cmd.lease_ms));
            auto picked = pick_up(t, cmd.ref.ns, std::move(**current), cmd.lease_ms, now);
            if (!picked.ok()) return std::move(picked).error();
            return AcquireLockReply{true, false, std::move(*picked), now};
          }
          ICHIDO_TRY(t.delete_lock_waiter(cmd.ref.ns, cmd.ref.name, cmd.waiter_id));
        }
        return AcquireLockReply{false, false, holder_of(*current, now), now};
      },
      // The waiter may have been the head of a free lock: the next one must look again
      // (lock_extras' announcement).
      std::move(done), std::move(x));
}

void TableStore::release_lock(ReleaseLockCmd cmd, Callback<Unit> done) {
  JobExtras x = extras([&] { return release_extras(cmd.ref); });
  write<Unit>(
      [cmd = std::move(cmd)](Tables& t, TimeMs now) -> Result<Unit> {
        auto current = t.find_lock(cmd.ref.ns, cmd.ref.name);
        if (!current.ok()) return std::move(current).error();
        if (cmd.for_gone_client && core::kept_by_replay(*current, cmd.token)) return Unit{};  // L9
        ICHIDO_TRY(core::decide_release(*current, cmd.token));
        ICHIDO_TRY(t.delete_lock(cmd.ref.ns, cmd.ref.name));
        ICHIDO_TRY(grant_to_head(t, cmd.ref, now));  // Q3
        return Unit{};
      },
      std::move(done), std::move(x));
}

void TableStore::renew_lock(RenewLockCmd cmd, Callback<core::LockRecord> done) {
  JobExtras x = extras([&] { return lock_extras(cmd.ref, /*wakes=*/false); });
  write<core::LockRecord>(
      [cmd = std::move(cmd)](Tables& t, TimeMs now) -> Result<core::LockRecord> {
        auto current = t.find_lock(cmd.ref.ns, cmd.ref.name);
        if (!current.ok()) return std::move(current).error();
        auto renewed = core::decide_renew(*current, cmd.token, cmd.lease_ms, now);
        if (!renewed.ok()) return std::move(renewed).error();
        ICHIDO_TRY(t.save_lock(cmd.ref.ns, *renewed));
        return std::move(*renewed);
      },
      std::move(done), std::move(x));
}

void TableStore::force_release_lock(ForceReleaseCmd cmd, Callback<ForceReleaseReply> done) {
  JobExtras x = extras([&] { return release_extras(cmd.ref); });
  write_audited<ForceReleaseReply>(
      [ref = std::move(cmd.ref)](Tables& t, TimeMs now) -> Result<ForceReleaseReply> {
        auto current = t.find_lock(ref.ns, ref.name);
        if (!current.ok()) return std::move(current).error();
        // Q3 also when nothing was held: a free lock with a live waiter queued (its head left a
        // moment ago, or its node came back) is handed on here too.
        if (!*current) {
          ICHIDO_TRY(grant_to_head(t, ref, now));
          return ForceReleaseReply{false, std::nullopt};
        }
        ICHIDO_TRY(t.delete_lock(ref.ns, ref.name));
        ICHIDO_TRY(grant_to_head(t, ref, now));
        return ForceReleaseReply{true, std::move(*current)};
      },
      std::move(cmd.audit), std::move(done), std::move(x));
}

void TableStore::get_lock(LockRef ref, Callback<LockState> done) {
  read<LockState>(
      [ref = std::move(ref)](Tables& t, TimeMs now) -> Result<LockState> {
        auto current = t.find_lock(ref.ns, ref.name);
        if (!current.ok()) return std::move(current).error();
        LockState s;
        s.now = now;
        if (core::is_held(*current, now)) s.holder = std::move(*current);  // L3
        auto queued = t.count_lock_waiters(ref.ns, ref.name);
        if (!queued.ok()) return std::move(queued).error();
        s.queued = *queued;
        return s;
      },
      std::move(done));
}

void TableStore::list_locks(std::string ns, Callback<std::vector<LockState>> done) {
  read<std::vector<LockState>>(
      [ns = std::move(ns)](Tables& t, TimeMs now) -> Result<std::vector<LockState>> {
        auto held = t.list_live_locks(ns, now);
        if (!held.ok()) return std::move(held).error();
        // With a waiter queue (several nodes), the waiters of every node, as get_lock (Q1): one
        // query for the whole namespace.
        auto queued = t.count_lock_waiters_in(ns);
        if (!queued.ok()) return std::move(queued).error();
        std::vector<LockState> out;
        out.reserve(held->size());
        for (auto& l : *held) {
          std::optional<std::int64_t> n;
          if (*queued) {
            auto it = (*queued)->find(l.name);
            n = it == (*queued)->end() ? 0 : it->second;
          }
          out.push_back(LockState{std::move(l), now, n});
        }
        return out;
      },
      std::move(done));
}

}  // namespace ichido::store
