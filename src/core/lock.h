// The lock rulebook: the pure decisions behind acquire / release / renew / force-release of a
// named lock with a lease and a fencing token. No I/O and no clock: the store loads the lock's
// row, calls these with `now` (read once per command) and writes what they return in the same
// transaction as the token it drew.
//
// Invariants a store must keep (the conformance suite checks each):
//   L1. A lock has at most one record; a record names exactly one holder (owner, token, lease end).
//   L2. Tokens are drawn from the store's one durable sequence in the transaction that grants the
//       lock, so every token is unique in the store and every grant of a lock carries a token
//       larger than every earlier grant of that lock, across restarts — what API.md promises and
//       what a guarded resource relies on. On every store. Across different locks and once records
//       the order of grants and of tokens agree only where one writer draws them (the embedded
//       and memory stores); PostgreSQL's write connections and nodes draw tokens ahead in their
//       own transactions, so a later grant of another lock may carry a smaller token (decision
//       071).
//   L3. A lock is *held* exactly when it has a record whose lease is live at now
//       (core::lease_live_at: now < lease_expires_at; a lease ending at now has lapsed). GET,
//       list, the held count and `?token=` answers use this definition only (is_held; the SQL
//       stores' listing through store/lease_sql.h): a lapsed record is never reported as held.
//   L4. acquire grants only when the lock is not held (no record, or a lapsed one); a grant
//       replaces any lapsed record wholesale, so the lapsed holder's token stops matching.
//   L5. release and renew succeed only for the token of the current record, held or lapsed; any
//       other token (older grant, force-released, never granted) is not_holder and changes nothing.
//   L6. renew sets lease_expires_at = now + lease_ms and never changes the token.
//   L7. release and force-release delete the record; after them the lock is free (L3).
//   L8. A grant stores the acquire's request_id (if any). An acquire whose owner and request_id
//       equal the current record's (held, or lapsed and not taken over) is a *replay* of that
//       grant: it answers the record as it is (same token, current lease end) and writes only
//       the mark of L9 (the first time) — the retry of a caller whose first answer was lost
//       (docs/API.md, "request_id").
//   L9. `replayed` marks a grant a replay (L8) answered (never shown to clients; a new grant
//       starts unmarked). A release on behalf of a client that went away before its grant's
//       answer reached it (ReleaseLockCmd::for_gone_client) changes nothing when the grant is
//       marked: the client's retry was answered that grant and holds it (decision 135).
//
// Fair waiting across processes (stores that keep a durable waiter queue: PostgreSQL, decision
// 076; the memory and SQLite stores keep none, and for them Q1–Q4 never apply):
//   Q1. A queued waiter has a place (a sequence number in the order its enqueue committed) and is
//       *live* while its process's heartbeat lease and its own wait deadline last.
//   Q2. acquire grants a free or lapsed lock only when no live waiter is queued ahead of the
//       caller (every live waiter is ahead of a caller without a place): a newcomer never
//       overtakes a queued waiter, whatever process either runs on. A replay (L8) is answered
//       before this rule, so a retry never waits for itself.
//   Q3. release and force-release, in their own transaction, grant the lock to the head live
//       waiter (token drawn then) and remove its place: the lock is never free while a live
//       waiter is queued. The grant names the waiter (LockRecord::waiter), so the waiter finds
//       it when it asks again, on any path. Its lease is min(lease_ms, kLockPickupMs) until the
//       waiter picks it up (asks again, or leaves and keeps it), which sets it to now + the
//       waiter's lease_ms: a grant made for a waiter whose process just died lapses within
//       kLockPickupMs instead of holding everyone up for its whole lease.
//   Q4. A waiter that leaves (deadline, client gone) loses its place; when the lock was granted
//       to it meanwhile, leaving answers that grant, and the caller decides (keep or release).
//
// States and the transitions between them (function behind each arrow):
//
//                     decide_acquire → grant
//        ┌──────────────────────────────────────────────┐
//        │                                              ▼
//     ┌──────┐   decide_release / force-release    ┌────────┐
//     │ FREE │ ◀────────────────────────────────── │  HELD  │ ◀──┐ decide_renew
//     └──────┘                                     └────────┘ ───┘
//        ▲                                     now ≥ lease end │  ▲ decide_renew (same token:
//        │ decide_release / force-release                      ▼  │  held again from now)
//        │                                             ┌──────────────────────┐
//        └──────────────────────────────────────────── │ LAPSED (not taken    │
//                                                      │ over): GET held:false│
//                                                      └──────────────────────┘
//                                                                │ decide_acquire → grant
//                                                                ▼ (new holder, new token)
//                                                              HELD
// LAPSED is not a stored state: it is a HELD record read at a `now` past its lease end. Nothing
// sweeps it; it ends when someone touches the lock (Redis-style lazy expiry). The service arms a
// timer at the lease end only so that a queued waiter retries at that moment.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/lease.h"
#include "ichido/clock.h"
#include "ichido/result.h"

namespace ichido::core {

inline constexpr std::int64_t kLockDefaultLeaseMs = 30000;  // bounds: core/lease.h
inline constexpr std::size_t kLockMaxOwnerBytes = 256;
inline constexpr std::int64_t kLockPickupMs = 3000;  // Q3

struct LockRecord {
  std::string name;
  std::string owner;
  std::int64_t token = 0;
  TimeMs acquired_at = 0;
  TimeMs lease_expires_at = 0;
  std::optional<std::string> request_id;  // of the acquire that made this grant (L8)
  // Q3: the queued waiter this grant was made for by a release; empty when the caller's own
  // acquire made it. Never shown to clients.
  std::optional<std::string> waiter;
  bool replayed = false;  // L9: a replay answered this grant. Never shown to clients.

  bool operator==(const LockRecord&) const = default;
};

// L3: the record's holder is live at `now`: its lease is live (LeaseSide::live).
inline bool is_held(const std::optional<LockRecord>& r, TimeMs now) {
  return r.has_value() && lease_live_at(r->lease_expires_at, now);
}

// Owner: free text shown to other callers, valid UTF-8, at most 256 bytes, no NUL (field "owner").
Result<void> validate_lock_owner(const std::string& owner);

enum class AcquireVerdict { grant, busy, replay };

// L8: replay when `request_id` is set and the current record (held or lapsed) carries the same
// request_id and owner. Otherwise L4: grant when the lock is free or lapsed at `now`, busy when
// someone holds a live lease — or (Q2) when `waiter_ahead`: a live queued waiter comes first.
AcquireVerdict decide_acquire(const std::optional<LockRecord>& current, TimeMs now,
                              const std::string& owner,
                              const std::optional<std::string>& request_id,
                              bool waiter_ahead = false);

// The record a grant writes: `token` must be freshly drawn from the store's sequence (L2).
LockRecord make_grant(const std::string& name, const std::string& owner, std::int64_t token,
                      std::int64_t lease_ms, TimeMs now, std::optional<std::string> request_id);

// L5/L7: Ok when `token` is the current record's (held or lapsed): the store deletes the record.
// Errors: not_holder (details.token), when there is no record or another token holds it.
Result<void> decide_release(const std::optional<LockRecord>& current, std::int64_t token);

// L9: a release for a gone client (ReleaseLockCmd::for_gone_client) of `token` leaves the grant
// alone: a replay answered it.
inline bool kept_by_replay(const std::optional<LockRecord>& current, std::int64_t token) {
  return current && current->token == token && current->replayed;
}

// Q3: the record a queued waiter picks up: the grant made for it, its lease from now.
LockRecord pick_up(LockRecord granted, std::int64_t lease_ms, TimeMs now);

// L5/L6: the renewed record (same token, lease from now). Errors: not_holder.
Result<LockRecord> decide_renew(const std::optional<LockRecord>& current, std::int64_t token,
                                std::int64_t lease_ms, TimeMs now);

}  // namespace ichido::core
