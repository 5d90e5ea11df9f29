// The once-record rulebook: the lifecycle of "process item K exactly once" as pure decisions
// over (record or none, command, now). No I/O, no clock, no token source: stores load the
// record, call a decide_* function with `now`, draw a token from their durable sequence when the
// decision says `acquired`, and save what it returns inside one transaction.
//
// Invariants every stored record keeps (check_invariants() tests them; the conformance suite
// and the stores call it):
//   O1. 1 <= attempt <= max_attempts and token > 0: a record exists only after an acquisition,
//       and every acquisition is one attempt carrying one token.
//   O2. processing: the holder of `token` has not concluded (holder_done = false); it holds the
//       item while now < lease_expires_at. No result, no finished_at.
//   O3. pending: the holder of `token` failed with retry and attempt < max_attempts
//       (holder_done = true). No result, no finished_at; the next begin acquires it.
//   O4. completed: result (serialized JSON) and finished_at are set; holder_done = true. A
//       completed record never changes again; only reset or the retention purge remove it.
//   O5. dead: finished_at is set, no result. holder_done = true when the holder's own `fail`
//       killed it; false when its lease lapsed on the last attempt (last_error "lease expired").
//   O6. `token` changes only on acquisition, to a fresh value of the store's durable sequence
//       (shared by locks and once records): unique in the store, and larger than every token
//       this record had before, across restarts. (Larger than every token of other records only
//       where one writer draws them: lock.h L2.)
//   O7. `fingerprint` is the one of the begin that created the record (absent: never checked).
//   O8. `request_id` is the one of the begin that made the latest acquisition. A begin with the
//       same owner and request_id while that acquisition is still processing (live, or lapsed
//       and not taken over) is a *replay*: it answers `acquired` with the record unchanged (same
//       token and attempt, current lease end); it writes only the mark of O9 (the first time).
//   O9. `replayed`: a replay (O8) answered the latest acquisition (never shown to clients; a new
//       acquisition clears it). decide_abandon — the undo of an acquisition whose client went
//       away before its answer arrived — leaves a replayed acquisition alone: the client's retry
//       holds it, and undoing it would hand the item to a second worker while the first works.
//
// State diagram (the function behind each edge):
//
//            decide_begin (no record): attempt 1
//   (none) ───────────────────────────────────▶ PROCESSING ◀─┐ decide_renew (same token)
//     ▲                                          │  │  │  └───┘
//     │ reset (any state)       decide_complete  │  │  │ decide_fail, retry and attempt < max
//     │ purge (completed/dead,  ┌────────────────┘  │  ▼
//     │  older than retention)  ▼                   │  PENDING ──decide_begin──▶ PROCESSING
//     │                   COMPLETED                 │                           (attempt + 1)
//     │                                             │ decide_fail, !retry or attempt == max
//     │                                             ▼
//     └──────────────────────────────────────────  DEAD
//   PROCESSING with a lapsed lease ("expired"), when a begin touches it:
//     attempt < max → PROCESSING (attempt + 1, new token)      [decide_begin]
//     attempt = max → DEAD, last_error "lease expired"          [decide_begin]
//   The lapsed holder itself may still complete / fail / renew until someone else touches it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/lease.h"
#include "ichido/clock.h"
#include "ichido/result.h"

namespace ichido::core {

inline constexpr std::int64_t kDefaultLeaseMs = 60000;  // bounds: core/lease.h
inline constexpr std::int64_t kDefaultMaxAttempts = 5;
inline constexpr std::int64_t kMaxMaxAttempts = 1000;
inline constexpr std::size_t kMaxResultBytes = 32 * 1024;  // serialized JSON
inline constexpr std::size_t kMaxOwnerBytes = 256;
inline constexpr std::size_t kMaxFingerprintBytes = 512;
inline constexpr std::size_t kMaxErrorBytes = 4096;
inline constexpr std::string_view kLeaseExpired = "lease expired";

enum class OnceState { processing, pending, completed, dead };
std::string_view to_string(OnceState s);

// What GET ?state= selects. `processing` = live leases only, `expired` = processing with a
// lapsed lease, `all` = every record.
enum class OnceFilter { all, processing, expired, pending, completed, dead };
inline constexpr OnceFilter kOnceFilters[] = {OnceFilter::all,       OnceFilter::processing,
                                              OnceFilter::expired,   OnceFilter::pending,
                                              OnceFilter::completed, OnceFilter::dead};
Result<OnceFilter> parse_once_filter(std::string_view s);  // error names field "state"

// --- the state of a record at time `now` ---------------------------------------------------------
// Decided here once, for begin's takeover (lease_live), GET ?state= and the overview counts
// (matches), on the lease boundary of core/lease.h (lease_live_at: a lease ending at now has
// lapsed, the record shows as `expired` and the next begin takes it over). The SQL stores cannot
// call matches() inside a statement: they translate filter_terms() into SQL (store/once_sql.h),
// and the conformance suite checks that every store's listing and counts by state select what
// matches() selects.

// What a filter selects, as two conditions that must both hold: the record's state, and which
// side of its lease end `now` is (core/lease.h; only the processing state looks at its lease).
struct OnceFilterTerms {
  std::optional<OnceState> state;  // nullopt: every state
  LeaseSide lease = LeaseSide::any;
};
OnceFilterTerms filter_terms(OnceFilter f);

struct OnceRecord {
  std::string key;
  OnceState state = OnceState::processing;
  std::string owner;                       // of the latest acquisition
  std::optional<std::string> fingerprint;  // O7
  std::optional<std::string> request_id;   // O8: of the latest acquisition
  std::int64_t token = 0;                  // of the latest acquisition
  std::int64_t attempt = 0;                // acquisitions so far
  std::int64_t max_attempts = kDefaultMaxAttempts;
  TimeMs lease_expires_at = 0;        // meaningful while processing
  std::optional<std::string> result;  // serialized JSON, completed only
  std::string last_error;
  bool holder_done = false;  // the holder of `token` concluded (complete/fail)
  TimeMs created_at = 0;
  TimeMs updated_at = 0;
  std::optional<TimeMs> finished_at;  // completed or dead since
  bool replayed = false;              // O9: a replay answered the latest acquisition

  bool operator==(const OnceRecord&) const = default;
};

// True when `r` is selected by `f` at `now`: filter_terms(f) hold for it (its state, and
// on_side of its lease end).
bool matches(OnceFilter f, const OnceRecord& r, TimeMs now);

// True while the holder's lease is live: processing and lease_live_at(r.lease_expires_at, now).
bool lease_live(const OnceRecord& r, TimeMs now);

// O1–O5 for one record; the error (errc::internal) names the broken invariant.
Result<void> check_invariants(const OnceRecord& r);

// --- input validation (the HTTP and service layers call these; errors name the field) -------

Result<void> validate_max_attempts(std::int64_t n);        // field max_attempts
Result<void> validate_owner(std::string_view owner);       // field owner
Result<void> validate_fingerprint(std::string_view fp);    // field fingerprint
Result<void> validate_error_text(std::string_view error);  // field error
Result<void> validate_result_json(std::string_view json);  // field result (size only)

// --- decisions ---------------------------------------------------------------------------------

struct BeginCommand {
  std::string owner;
  std::int64_t lease_ms = kDefaultLeaseMs;
  std::optional<std::string> fingerprint;
  std::int64_t max_attempts = kDefaultMaxAttempts;  // used only when the record is created
  std::optional<std::string> request_id;            // O8
};

enum class BeginOutcome { acquired, in_progress, completed, dead };
std::string_view to_string(BeginOutcome o);

struct BeginDecision {
  BeginOutcome outcome = BeginOutcome::acquired;
  // The record after the decision. For `acquired` its token is 0: the store assigns the next
  // value of its durable sequence before saving.
  OnceRecord record;
  bool write = false;               // the record changed and must be saved
  std::int64_t retry_after_ms = 0;  // in_progress: time left on the holder's lease
  bool replayed = false;            // acquired: a replay of the caller's own grant (O8)
};

// Errors: fingerprint_mismatch (422) when both the record and cmd carry a fingerprint and they
// differ — checked in every state, before anything else (a replay included).
Result<BeginDecision> decide_begin(const std::optional<OnceRecord>& existing,
                                   const std::string& key, const BeginCommand& cmd, TimeMs now);

struct Change {
  OnceRecord record;
  bool write = false;  // false: an idempotent repeat of the holder's own conclusion
};

// The holder of `token` reports success. A repeat of the same holder's complete with the same
// result (byte for byte, as serialized) answers the stored record unchanged; with another result
// it is result_mismatch (O4: a completed record never changes). Errors: once_not_found,
// stale_token (details.state), result_mismatch.
Result<Change> decide_complete(const std::optional<OnceRecord>& existing, std::int64_t token,
                               const std::string& result_json, TimeMs now);

// The holder of `token` reports failure: pending (retry and attempts left) or dead. A repeat of
// the same holder's fail answers the stored record unchanged. Errors: once_not_found,
// stale_token.
Result<Change> decide_fail(const std::optional<OnceRecord>& existing, std::int64_t token,
                           const std::string& error, bool retry, TimeMs now);

// The holder of `token` extends its lease to now + lease_ms (also after it lapsed, as long as
// nobody else touched the record). Errors: once_not_found, stale_token.
Result<OnceRecord> decide_renew(const std::optional<OnceRecord>& existing, std::int64_t token,
                                std::int64_t lease_ms, TimeMs now);

// Undoes an acquisition whose answer could not be delivered (the caller went away while it
// waited): only the holder of `token` that has not concluded, and only while nobody else touched
// the record. Attempt 1 came from no record, so the record is removed (nullopt); a later attempt
// k+1 came from attempt k (failed with retry, or lapsed), so the record goes back to pending at
// attempt k — the undelivered attempt is not spent. `write` false: nothing to undo (another
// token holds it, it concluded, or a replay answered it: O9). Errors: none.
struct Abandon {
  std::optional<OnceRecord> record;  // the record to save; nullopt with write: delete it
  bool write = false;
};
Abandon decide_abandon(const std::optional<OnceRecord>& existing, std::int64_t token, TimeMs now);

// The error for a key without a record.
Error once_not_found(const std::string& key);

}  // namespace ichido::core
