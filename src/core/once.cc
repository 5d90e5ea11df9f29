#include "core/once.h"

#include "core/fields.h"
#include "core/names.h"

namespace ichido::core {
namespace {

Error stale(const OnceRecord& r) {
  return Error(errc::stale_token,
               "This token no longer holds the record (its lease lapsed and another caller took "
               "over, or its holder already concluded); do not treat your work as recorded.")
      .with("state", std::string(to_string(r.state)));
}

Error broken(const char* invariant, const OnceRecord& r) {
  return Error(errc::internal, std::string("once record '") + r.key + "' breaks invariant " +
                                   invariant + "; nothing was changed.");
}

Result<void> validate_text(std::string_view s, std::size_t max, const char* field) {
  if (s.size() > max) {
    return invalid_field(
        field, std::string("The ") + field + " must be at most " + std::to_string(max) + " bytes.");
  }
  if (!is_valid_utf8(s)) {
    return invalid_field(field, std::string("The ") + field + " must be valid UTF-8.");
  }
  return {};
}

// A new acquisition of `r` by cmd's caller: one more attempt, a new lease, a token to assign.
BeginDecision acquire(OnceRecord r, const BeginCommand& cmd, TimeMs now) {
  r.state = OnceState::processing;
  r.owner = cmd.owner;
  r.request_id = cmd.request_id;
  r.attempt += 1;
  r.token = 0;  // the store assigns the next value of its sequence
  r.lease_expires_at = now + cmd.lease_ms;
  r.holder_done = false;
  r.replayed = false;  // O9
  r.updated_at = now;
  return BeginDecision{BeginOutcome::acquired, std::move(r), true, 0};
}

}  // namespace

std::string_view to_string(OnceState s) {
  switch (s) {
    case OnceState::processing:
      return "processing";
    case OnceState::pending:
      return "pending";
    case OnceState::completed:
      return "completed";
    case OnceState::dead:
      return "dead";
  }
  return "processing";
}

std::string_view to_string(BeginOutcome o) {
  switch (o) {
    case BeginOutcome::acquired:
      return "acquired";
    case BeginOutcome::in_progress:
      return "in_progress";
    case BeginOutcome::completed:
      return "completed";
    case BeginOutcome::dead:
      return "dead";
  }
  return "acquired";
}

Result<OnceFilter> parse_once_filter(std::string_view s) {
  if (s == "processing") return OnceFilter::processing;
  if (s == "expired") return OnceFilter::expired;
  if (s == "pending") return OnceFilter::pending;
  if (s == "completed") return OnceFilter::completed;
  if (s == "dead") return OnceFilter::dead;
  return invalid_field("state",
                       "The state must be one of processing, expired, pending, completed or dead.");
}

OnceFilterTerms filter_terms(OnceFilter f) {
  switch (f) {
    case OnceFilter::all:
      return {std::nullopt, LeaseSide::any};
    case OnceFilter::processing:
      return {OnceState::processing, LeaseSide::live};
    case OnceFilter::expired:
      return {OnceState::processing, LeaseSide::lapsed};
    case OnceFilter::pending:
      return {OnceState::pending, LeaseSide::any};
    case OnceFilter::completed:
      return {OnceState::completed, LeaseSide::any};
    case OnceFilter::dead:
      return {OnceState::dead, LeaseSide::any};
  }
  return {std::nullopt, LeaseSide::any};
}

bool lease_live(const OnceRecord& r, TimeMs now) {
  return r.state == OnceState::processing && lease_live_at(r.lease_expires_at, now);
}

bool matches(OnceFilter f, const OnceRecord& r, TimeMs now) {
  const OnceFilterTerms t = filter_terms(f);
  if (t.state && r.state != *t.state) return false;
  return on_side(t.lease, r.lease_expires_at, now);
}

Result<void> check_invariants(const OnceRecord& r) {
  if (r.token <= 0 || r.attempt < 1 || r.attempt > r.max_attempts) return broken("O1", r);
  switch (r.state) {
    case OnceState::processing:
      if (r.holder_done || r.result || r.finished_at || r.lease_expires_at <= 0) {
        return broken("O2", r);
      }
      break;
    case OnceState::pending:
      if (!r.holder_done || r.attempt >= r.max_attempts || r.result || r.finished_at) {
        return broken("O3", r);
      }
      break;
    case OnceState::completed:
      if (!r.holder_done || !r.result || !r.finished_at) return broken("O4", r);
      break;
    case OnceState::dead:
      if (r.result || !r.finished_at) return broken("O5", r);
      break;
  }
  return {};
}

Result<void> validate_max_attempts(std::int64_t v) { return check(field::kMaxAttempts, v); }

Result<void> validate_owner(std::string_view s) {
  return validate_text(s, kMaxOwnerBytes, "owner");
}

Result<void> validate_fingerprint(std::string_view s) {
  return validate_text(s, kMaxFingerprintBytes, "fingerprint");
}

Result<void> validate_error_text(std::string_view s) {
  return validate_text(s, kMaxErrorBytes, "error");
}

Result<void> validate_result_json(std::string_view json) {
  if (json.size() > kMaxResultBytes) {
    return invalid_field("result",
                         "The result must be at most 32 KiB of JSON; store large outputs "
                         "elsewhere and put a reference in the result.");
  }
  return {};
}

Error once_not_found(const std::string& key) {
  return Error(errc::once_not_found, "No once record for key '" + key +
                                         "'; call begin first (it may also have been "
                                         "reset or purged after its retention).");
}

Result<BeginDecision> decide_begin(const std::optional<OnceRecord>& existing,
                                   const std::string& key, const BeginCommand& cmd, TimeMs now) {
  if (!existing) {
    OnceRecord r;
    r.key = key;
    r.fingerprint = cmd.fingerprint;
    r.max_attempts = cmd.max_attempts;
    r.created_at = now;
    return acquire(std::move(r), cmd, now);
  }
  const OnceRecord& r = *existing;
  if (r.fingerprint && cmd.fingerprint && *r.fingerprint != *cmd.fingerprint) {
    return Error(errc::fingerprint_mismatch,
                 "This key was first begun with a different fingerprint: the same key is being "
                 "used for different content; use a distinct key for each item.")
        .with("state", std::string(to_string(r.state)));
  }
  switch (r.state) {
    case OnceState::completed:
      return BeginDecision{BeginOutcome::completed, r, false, 0};
    case OnceState::dead:
      return BeginDecision{BeginOutcome::dead, r, false, 0};
    case OnceState::pending:
      return acquire(r, cmd, now);
    case OnceState::processing:
      break;
  }
  if (cmd.request_id && r.request_id == cmd.request_id && r.owner == cmd.owner) {
    BeginDecision replay{BeginOutcome::acquired, r, !r.replayed, 0};  // O9: marked once
    replay.record.replayed = true;
    replay.replayed = true;
    return replay;
  }
  if (lease_live(r, now)) {
    return BeginDecision{BeginOutcome::in_progress, r, false, r.lease_expires_at - now};
  }
  // The holder's lease lapsed and nobody concluded: that attempt is spent.
  OnceRecord next = r;
  next.last_error = std::string(kLeaseExpired);
  if (r.attempt >= r.max_attempts) {
    next.state = OnceState::dead;
    next.holder_done = false;
    next.finished_at = now;
    next.updated_at = now;
    return BeginDecision{BeginOutcome::dead, std::move(next), true, 0};
  }
  return acquire(std::move(next), cmd, now);
}

Result<Change> decide_complete(const std::optional<OnceRecord>& existing, std::int64_t token,
                               const std::string& result_json, TimeMs now) {
  if (!existing)
    return Error(errc::once_not_found, "No once record for this key; call begin first.");
  const OnceRecord& r = *existing;
  if (r.token != token) return stale(r);
  if (r.state == OnceState::completed) {
    if (r.result == result_json) return Change{r, false};  // the holder's repeat
    return Error(errc::result_mismatch,
                 "This record is already completed with a different result, which never "
                 "changes; read it with GET .../once?key=K.");
  }
  if (r.state != OnceState::processing) return stale(r);
  OnceRecord next = r;
  next.state = OnceState::completed;
  next.result = result_json;
  next.holder_done = true;
  next.finished_at = now;
  next.updated_at = now;
  return Change{std::move(next), true};
}

Result<Change> decide_fail(const std::optional<OnceRecord>& existing, std::int64_t token,
                           const std::string& error, bool retry, TimeMs now) {
  if (!existing)
    return Error(errc::once_not_found, "No once record for this key; call begin first.");
  const OnceRecord& r = *existing;
  if (r.token != token) return stale(r);
  if (r.holder_done && (r.state == OnceState::pending || r.state == OnceState::dead)) {
    return Change{r, false};  // the holder's repeat
  }
  if (r.state != OnceState::processing) return stale(r);
  OnceRecord next = r;
  next.last_error = error;
  next.holder_done = true;
  next.updated_at = now;
  if (!retry || r.attempt >= r.max_attempts) {
    next.state = OnceState::dead;
    next.finished_at = now;
  } else {
    next.state = OnceState::pending;
  }
  return Change{std::move(next), true};
}

Abandon decide_abandon(const std::optional<OnceRecord>& existing, std::int64_t token, TimeMs now) {
  if (!existing || existing->token != token || existing->state != OnceState::processing ||
      existing->replayed) {  // O9: the client's retry holds it
    return Abandon{existing, false};
  }
  if (existing->attempt <= 1) return Abandon{std::nullopt, true};
  OnceRecord r = *existing;
  r.state = OnceState::pending;
  r.attempt -= 1;
  r.holder_done = true;  // O3: the attempt it returns to has concluded (failed or lapsed)
  r.request_id.reset();
  r.updated_at = now;
  return Abandon{std::move(r), true};
}

Result<OnceRecord> decide_renew(const std::optional<OnceRecord>& existing, std::int64_t token,
                                std::int64_t lease_ms, TimeMs now) {
  if (!existing)
    return Error(errc::once_not_found, "No once record for this key; call begin first.");
  const OnceRecord& r = *existing;
  if (r.token != token || r.state != OnceState::processing) return stale(r);
  OnceRecord next = r;
  next.lease_expires_at = now + lease_ms;
  next.updated_at = now;
  return next;
}

}  // namespace ichido::core
