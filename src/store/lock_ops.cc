// The lock commands of TableStore: load the lock's row, ask core/lock.h, write the result (and the
// token drawn for a grant) in the same transaction. Rules and invariants L1–L7: core/lock.h.
#include <utility>

#include "store/table_store.h"

namespace ichido::store {

void TableStore::acquire_lock(AcquireLockCmd cmd, Callback<AcquireLockReply> done) {
  auto keys = lock_keys(cmd.ref);
  auto prefetch = [ref = cmd.ref](Tables& t) {
    t.prefetch_lock(ref.ns, ref.name);
    t.prefetch_token();
  };
  write<AcquireLockReply>(
      [cmd = std::move(cmd)](Tables& t, TimeMs now) -> Result<AcquireLockReply> {
        ICHIDO_TRY(core::validate_lease_ms(cmd.lease_ms));
        auto current = t.find_lock(cmd.ref.ns, cmd.ref.name);
        if (!current.ok()) return std::move(current).error();
        // Nothing is written unless granted; the job still commits (empty), which keeps the
        // answer ordered after every earlier durable change.
        switch (core::decide_acquire(*current, now, cmd.owner, cmd.request_id)) {
          case core::AcquireVerdict::replay:
            return AcquireLockReply{true, true, std::move(**current), now};
          case core::AcquireVerdict::busy:
            return AcquireLockReply{false, false, std::move(**current), now};
          case core::AcquireVerdict::grant:
            break;
        }
        if (cmd.replay_only) {
          core::LockRecord holder;
          if (core::is_held(*current, now)) holder = std::move(**current);
          return AcquireLockReply{false, false, std::move(holder), now};
        }
        auto token = t.next_token();  // L2: same transaction as the grant
        if (!token.ok()) return std::move(token).error();
        auto grant =
            core::make_grant(cmd.ref.name, cmd.owner, *token, cmd.lease_ms, now, cmd.request_id);
        ICHIDO_TRY(t.save_lock(cmd.ref.ns, grant));
        return AcquireLockReply{true, false, std::move(grant), now};
      },
      std::move(done), std::move(keys), std::move(prefetch));
}

void TableStore::release_lock(ReleaseLockCmd cmd, Callback<Unit> done) {
  auto keys = lock_keys(cmd.ref);
  auto prefetch = [ref = cmd.ref](Tables& t) { t.prefetch_lock(ref.ns, ref.name); };
  const LockRef woken = cmd.ref;
  write<Unit>(
      [cmd = std::move(cmd)](Tables& t, TimeMs) -> Result<Unit> {
        auto current = t.find_lock(cmd.ref.ns, cmd.ref.name);
        if (!current.ok()) return std::move(current).error();
        ICHIDO_TRY(core::decide_release(*current, cmd.token));
        ICHIDO_TRY(t.delete_lock(cmd.ref.ns, cmd.ref.name));
        return Unit{};
      },
      std::move(done), std::move(keys), std::move(prefetch), {announce_lock(woken)});
}

void TableStore::renew_lock(RenewLockCmd cmd, Callback<core::LockRecord> done) {
  auto keys = lock_keys(cmd.ref);
  auto prefetch = [ref = cmd.ref](Tables& t) { t.prefetch_lock(ref.ns, ref.name); };
  write<core::LockRecord>(
      [cmd = std::move(cmd)](Tables& t, TimeMs now) -> Result<core::LockRecord> {
        auto current = t.find_lock(cmd.ref.ns, cmd.ref.name);
        if (!current.ok()) return std::move(current).error();
        auto renewed = core::decide_renew(*current, cmd.token, cmd.lease_ms, now);
        if (!renewed.ok()) return std::move(renewed).error();
        ICHIDO_TRY(t.save_lock(cmd.ref.ns, *renewed));
        return std::move(*renewed);
      },
      std::move(done), std::move(keys), std::move(prefetch));
}

void TableStore::force_release_lock(ForceReleaseCmd cmd, Callback<ForceReleaseReply> done) {
  auto keys = lock_keys(cmd.ref);
  auto prefetch = [r = cmd.ref](Tables& t) { t.prefetch_lock(r.ns, r.name); };
  const LockRef woken = cmd.ref;
  write_audited<ForceReleaseReply>(
      [ref = std::move(cmd.ref)](Tables& t, TimeMs) -> Result<ForceReleaseReply> {
        auto current = t.find_lock(ref.ns, ref.name);
        if (!current.ok()) return std::move(current).error();
        if (!*current) return ForceReleaseReply{false, std::nullopt};
        ICHIDO_TRY(t.delete_lock(ref.ns, ref.name));
        return ForceReleaseReply{true, std::move(*current)};
      },
      std::move(cmd.audit), std::move(done), std::move(keys), std::move(prefetch), nullptr,
      {announce_lock(woken)});
}

void TableStore::get_lock(LockRef ref, Callback<LockState> done) {
  read<LockState>(
      [ref = std::move(ref)](Tables& t, TimeMs now) -> Result<LockState> {
        auto current = t.find_lock(ref.ns, ref.name);
        if (!current.ok()) return std::move(current).error();
        LockState s;
        s.now = now;
        if (core::is_held(*current, now)) s.holder = std::move(*current);  // L3
        return s;
      },
      std::move(done));
}

void TableStore::list_locks(std::string ns, Callback<std::vector<core::LockRecord>> done) {
  read<std::vector<core::LockRecord>>(
      [ns = std::move(ns)](Tables& t, TimeMs now) -> Result<std::vector<core::LockRecord>> {
        return t.list_live_locks(ns, now);
      },
      std::move(done));
}

}  // namespace ichido::store
