// Tests of the once-record rulebook (core/once): every edge of the state diagram in once.h, the
// invariants after each, and the exact error codes. Time is always an explicit `now`; tokens are
// assigned by hand the way a store assigns them from its sequence.
#include "core/once.h"

#include <gtest/gtest.h>

#include <string>

namespace ichido::core {
namespace {

constexpr TimeMs kT0 = 1'775'000'000'000;  // some instant in 2026

template <class T>
void ExpectError(const Result<T>& r, errc code, const std::string& field = "") {
  ASSERT_FALSE(r.ok()) << "expected " << to_string(code);
  EXPECT_EQ(r.error().code, code) << "got " << to_string(r.error().code) << ": "
                                  << r.error().message;
  EXPECT_EQ(r.error().field, field);
  EXPECT_FALSE(r.error().message.empty());
}

BeginCommand Cmd(std::string owner = "w1", std::int64_t lease = 60000,
                 std::optional<std::string> fp = std::nullopt, std::int64_t max = 5) {
  return BeginCommand{std::move(owner), lease, std::move(fp), max};
}

// Applies a begin the way a store does: decide, assign the next token on acquisition, check.
struct Sim {
  std::optional<OnceRecord> rec;
  std::int64_t last_token = 100;

  BeginDecision Begin(const BeginCommand& cmd, TimeMs now) {
    auto d = decide_begin(rec, "k", cmd, now);
    EXPECT_TRUE(d.ok()) << d.error().message;
    if (!d.ok()) return {};
    if (d->outcome == BeginOutcome::acquired && !d->replayed) d->record.token = ++last_token;
    if (d->write) {
      EXPECT_TRUE(check_invariants(d->record).ok()) << check_invariants(d->record).error().message;
      rec = d->record;
    } else {
      EXPECT_EQ(d->record, *rec) << "a decision without write must answer the stored record";
    }
    return *d;
  }
  void Apply(const Result<Change>& c) {
    ASSERT_TRUE(c.ok()) << c.error().message;
    ASSERT_TRUE(check_invariants(c->record).ok()) << check_invariants(c->record).error().message;
    if (!c->write) {
      EXPECT_EQ(c->record, *rec);
    }
    rec = c->record;
  }
};

TEST(OnceBegin, FirstBeginAcquiresAttemptOneWithALease) {
  Sim s;
  auto d = s.Begin(Cmd("outlook-A", 30000, "fp1"), kT0);
  EXPECT_EQ(d.outcome, BeginOutcome::acquired);
  EXPECT_TRUE(d.write);
  EXPECT_EQ(s.rec->state, OnceState::processing);
  EXPECT_EQ(s.rec->attempt, 1);
  EXPECT_EQ(s.rec->token, 101);
  EXPECT_EQ(s.rec->owner, "outlook-A");
  EXPECT_EQ(s.rec->fingerprint, "fp1");
  EXPECT_EQ(s.rec->lease_expires_at, kT0 + 30000);
  EXPECT_EQ(s.rec->created_at, kT0);
  EXPECT_FALSE(s.rec->holder_done);
}

TEST(OnceBegin, LiveLeaseAnswersInProgressWithTheTimeLeftAndWritesNothing) {
  Sim s;
  s.Begin(Cmd("A", 10000), kT0);
  auto d = s.Begin(Cmd("B"), kT0 + 2500);
  EXPECT_EQ(d.outcome, BeginOutcome::in_progress);
  EXPECT_FALSE(d.write);
  EXPECT_EQ(d.retry_after_ms, 7500);
  EXPECT_EQ(d.record.owner, "A");
  // The lease is live up to, not including, its expiry instant.
  EXPECT_EQ(s.Begin(Cmd("B"), kT0 + 9999).outcome, BeginOutcome::in_progress);
}

TEST(OnceBegin, LapsedLeaseIsAcquiredWithTheNextAttemptAndALargerToken) {
  Sim s;
  s.Begin(Cmd("A", 10000), kT0);
  auto d = s.Begin(Cmd("B", 20000), kT0 + 10000);
  EXPECT_EQ(d.outcome, BeginOutcome::acquired);
  EXPECT_EQ(s.rec->attempt, 2);
  EXPECT_EQ(s.rec->token, 102);
  EXPECT_EQ(s.rec->owner, "B");
  EXPECT_EQ(s.rec->last_error, "lease expired");
  EXPECT_EQ(s.rec->lease_expires_at, kT0 + 30000);
  EXPECT_EQ(s.rec->created_at, kT0);
}

TEST(OnceBegin, LapsedLeaseOnTheLastAttemptMakesTheRecordDead) {
  Sim s;
  s.Begin(Cmd("A", 1000, std::nullopt, 2), kT0);
  s.Begin(Cmd("B", 1000), kT0 + 1000);  // attempt 2 of 2
  auto d = s.Begin(Cmd("C", 1000), kT0 + 2000);
  EXPECT_EQ(d.outcome, BeginOutcome::dead);
  EXPECT_TRUE(d.write);
  EXPECT_EQ(s.rec->state, OnceState::dead);
  EXPECT_EQ(s.rec->attempt, 2);
  EXPECT_EQ(s.rec->token, 102) << "no acquisition, so no new token";
  EXPECT_EQ(s.rec->last_error, "lease expired");
  EXPECT_EQ(s.rec->finished_at, kT0 + 2000);
  EXPECT_FALSE(s.rec->holder_done);
  // The lapsed holder's late complete lost the race: stale.
  ExpectError(decide_complete(s.rec, 102, "1", kT0 + 2001), errc::stale_token);
  ExpectError(decide_fail(s.rec, 102, "x", true, kT0 + 2001), errc::stale_token);
  // And begin keeps answering dead without writing.
  auto again = s.Begin(Cmd("D"), kT0 + 5000);
  EXPECT_EQ(again.outcome, BeginOutcome::dead);
  EXPECT_FALSE(again.write);
}

BeginCommand WithRequestId(std::string owner, std::string request_id, std::int64_t lease = 10000,
                           std::optional<std::string> fp = std::nullopt) {
  BeginCommand c = Cmd(std::move(owner), lease, std::move(fp));
  c.request_id = std::move(request_id);
  return c;
}

// O8: a retried begin (same owner and request_id) answers the caller's own acquisition again —
// live or lapsed, without a new attempt, token or lease — until someone else takes over.
TEST(OnceBegin, SameOwnerAndRequestIdReplayTheAcquisition) {
  Sim s;
  s.Begin(WithRequestId("A", "r1"), kT0);
  EXPECT_EQ(s.rec->request_id, "r1");
  auto live = s.Begin(WithRequestId("A", "r1", 30000), kT0 + 500);
  EXPECT_EQ(live.outcome, BeginOutcome::acquired);
  EXPECT_TRUE(live.replayed);
  EXPECT_TRUE(live.write) << "O9: the first replay marks the acquisition";
  EXPECT_TRUE(live.record.replayed);
  EXPECT_EQ(live.record.token, 101);
  EXPECT_EQ(live.record.attempt, 1);
  EXPECT_EQ(live.record.lease_expires_at, kT0 + 10000) << "the lease is not changed";
  auto lapsed = s.Begin(WithRequestId("A", "r1"), kT0 + 20000);  // nobody took over
  EXPECT_TRUE(lapsed.replayed);
  EXPECT_FALSE(lapsed.write) << "marked already";
  EXPECT_EQ(lapsed.record.token, 101);
  // Another request_id of the same owner is an ordinary second claim.
  auto other = s.Begin(WithRequestId("A", "r2"), kT0 + 500);
  EXPECT_EQ(other.outcome, BeginOutcome::in_progress);
  EXPECT_FALSE(other.replayed);
  // The same request_id from another owner is not a replay either.
  EXPECT_EQ(s.Begin(WithRequestId("B", "r1"), kT0 + 600).outcome, BeginOutcome::in_progress);
  // Once someone else took over, r1 matches nothing.
  auto taken = s.Begin(WithRequestId("B", "r3"), kT0 + 20000);
  EXPECT_EQ(taken.outcome, BeginOutcome::acquired);
  EXPECT_FALSE(taken.replayed);
  EXPECT_FALSE(taken.record.replayed) << "a new acquisition starts unmarked";
  auto late = s.Begin(WithRequestId("A", "r1"), kT0 + 20001);
  EXPECT_EQ(late.outcome, BeginOutcome::in_progress);
  EXPECT_EQ(late.record.owner, "B");
}

TEST(OnceBegin, AReplayIsNotAnsweredOnceTheRecordConcludedOrForAnotherFingerprint) {
  Sim s;
  s.Begin(WithRequestId("A", "r1", 10000, "fp1"), kT0);
  ExpectError(decide_begin(s.rec, "k", WithRequestId("A", "r1", 10000, "fp2"), kT0 + 1),
              errc::fingerprint_mismatch);
  s.Apply(decide_complete(s.rec, 101, "{}", kT0 + 2));
  auto d = s.Begin(WithRequestId("A", "r1"), kT0 + 3);
  EXPECT_EQ(d.outcome, BeginOutcome::completed);
  EXPECT_FALSE(d.replayed);
}

TEST(OnceBegin, LapsedHolderMayStillConcludeWhileNobodyTouchedTheRecord) {
  Sim s;
  s.Begin(Cmd("A", 1000, std::nullopt, 1), kT0);
  // Long past the lease, on the last attempt: the holder's own complete still wins.
  s.Apply(decide_complete(s.rec, 101, R"({"ok":1})", kT0 + 50000));
  EXPECT_EQ(s.rec->state, OnceState::completed);
  EXPECT_EQ(s.Begin(Cmd("B"), kT0 + 60000).outcome, BeginOutcome::completed);
}

TEST(OnceBegin, LapsedHolderMayRenewAndThenHoldsAgain) {
  Sim s;
  s.Begin(Cmd("A", 1000), kT0);
  auto r = decide_renew(s.rec, 101, 5000, kT0 + 3000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->lease_expires_at, kT0 + 8000);
  s.rec = *r;
  EXPECT_EQ(s.Begin(Cmd("B"), kT0 + 7999).outcome, BeginOutcome::in_progress);
}

TEST(OnceBegin, CompletedAnswersTheStoredResult) {
  Sim s;
  s.Begin(Cmd(), kT0);
  s.Apply(decide_complete(s.rec, 101, R"({"n":7})", kT0 + 5));
  auto d = s.Begin(Cmd("other"), kT0 + 10);
  EXPECT_EQ(d.outcome, BeginOutcome::completed);
  EXPECT_FALSE(d.write);
  EXPECT_EQ(d.record.result, R"({"n":7})");
  EXPECT_EQ(d.record.finished_at, kT0 + 5);
}

TEST(OnceBegin, FingerprintIsCheckedInEveryStateAndSkippedWithoutOne) {
  Sim s;
  s.Begin(Cmd("A", 60000, "v1"), kT0);
  ExpectError(decide_begin(s.rec, "k", Cmd("B", 60000, "v2"), kT0 + 1), errc::fingerprint_mismatch);
  EXPECT_EQ(s.Begin(Cmd("B"), kT0 + 1).outcome, BeginOutcome::in_progress);  // none: no check
  EXPECT_EQ(s.Begin(Cmd("B", 60000, "v1"), kT0 + 1).outcome, BeginOutcome::in_progress);
  s.Apply(decide_fail(s.rec, 101, "boom", true, kT0 + 2));
  ExpectError(decide_begin(s.rec, "k", Cmd("B", 60000, "v2"), kT0 + 3), errc::fingerprint_mismatch);
  s.Begin(Cmd("B", 60000, "v1"), kT0 + 3);
  s.Apply(decide_complete(s.rec, 102, "true", kT0 + 4));
  ExpectError(decide_begin(s.rec, "k", Cmd("C", 60000, "v2"), kT0 + 5), errc::fingerprint_mismatch);
  EXPECT_EQ(s.rec->fingerprint, "v1");
}

TEST(OnceBegin, RecordCreatedWithoutFingerprintNeverChecksOne) {
  Sim s;
  s.Begin(Cmd("A"), kT0);
  EXPECT_EQ(s.Begin(Cmd("B", 60000, "x"), kT0 + 1).outcome, BeginOutcome::in_progress);
  EXPECT_FALSE(s.rec->fingerprint.has_value());
}

TEST(OnceFail, RetryMakesPendingUntilMaxAttemptsThenDead) {
  Sim s;
  for (int attempt = 1; attempt <= 5; ++attempt) {
    auto d = s.Begin(Cmd(), kT0 + attempt * 10);
    ASSERT_EQ(d.outcome, BeginOutcome::acquired);
    EXPECT_EQ(s.rec->attempt, attempt);
    s.Apply(decide_fail(s.rec, s.rec->token, "err " + std::to_string(attempt), true,
                        kT0 + attempt * 10 + 1));
    EXPECT_EQ(s.rec->state, attempt < 5 ? OnceState::pending : OnceState::dead);
  }
  EXPECT_EQ(s.rec->last_error, "err 5");
  EXPECT_TRUE(s.rec->holder_done);
  EXPECT_EQ(s.rec->finished_at, kT0 + 51);
  auto d = s.Begin(Cmd(), kT0 + 100);
  EXPECT_EQ(d.outcome, BeginOutcome::dead);
  EXPECT_EQ(d.record.attempt, 5);
}

TEST(OnceFail, RetryFalseIsDeadAtOnce) {
  Sim s;
  s.Begin(Cmd(), kT0);
  s.Apply(decide_fail(s.rec, 101, "permanent", false, kT0 + 1));
  EXPECT_EQ(s.rec->state, OnceState::dead);
  EXPECT_EQ(s.rec->attempt, 1);
}

TEST(OnceFail, RepeatsOfTheHoldersOwnConclusionAreIdempotent) {
  Sim s;
  s.Begin(Cmd(), kT0);
  s.Apply(decide_fail(s.rec, 101, "e", true, kT0 + 1));
  auto again = decide_fail(s.rec, 101, "e", true, kT0 + 2);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->write);
  EXPECT_EQ(again->record.state, OnceState::pending);
  ExpectError(decide_complete(s.rec, 101, "1", kT0 + 2), errc::stale_token);

  s.Begin(Cmd(), kT0 + 3);
  s.Apply(decide_complete(s.rec, 102, "1", kT0 + 4));
  auto c = decide_complete(s.rec, 102, "1", kT0 + 5);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->write);
  EXPECT_EQ(c->record.result, "1");
  // Another result is refused: the stored result never changes, and the caller must know.
  ExpectError(decide_complete(s.rec, 102, "2", kT0 + 5), errc::result_mismatch);
  EXPECT_EQ(s.rec->result, "1");
  ExpectError(decide_fail(s.rec, 102, "e", true, kT0 + 5), errc::stale_token);
  ExpectError(decide_renew(s.rec, 102, 1000, kT0 + 5), errc::stale_token);
}

TEST(OnceStale, AnOldTokenCannotCompleteFailOrRenewAfterATakeover) {
  Sim s;
  s.Begin(Cmd("A", 1000), kT0);
  s.Begin(Cmd("B", 1000), kT0 + 1000);
  const OnceRecord before = *s.rec;
  auto c = decide_complete(s.rec, 101, "1", kT0 + 1001);
  ExpectError(c, errc::stale_token);
  EXPECT_EQ(std::get<std::string>(c.error().details.at("state")), "processing");
  ExpectError(decide_fail(s.rec, 101, "e", true, kT0 + 1001), errc::stale_token);
  ExpectError(decide_renew(s.rec, 101, 1000, kT0 + 1001), errc::stale_token);
  ExpectError(decide_complete(s.rec, 999, "1", kT0 + 1001), errc::stale_token);
  EXPECT_EQ(*s.rec, before);
}

// An acquisition whose answer could not be delivered is undone without spending the attempt.
TEST(OnceAbandon, UndoesAnUndeliveredAcquisition) {
  Sim s;
  s.Begin(Cmd("A", 10000, std::nullopt, 2), kT0);
  auto first = decide_abandon(s.rec, 101, kT0 + 1);
  EXPECT_TRUE(first.write);
  EXPECT_FALSE(first.record.has_value()) << "attempt 1 came from no record: remove it";

  s.Apply(decide_fail(s.rec, 101, "boom", true, kT0 + 2));  // pending, attempt 1 of 2
  s.Begin(WithRequestId("B", "rb"), kT0 + 3);               // attempt 2, token 102
  auto undo = decide_abandon(s.rec, 102, kT0 + 4);
  ASSERT_TRUE(undo.write);
  ASSERT_TRUE(undo.record.has_value());
  EXPECT_EQ(undo.record->state, OnceState::pending);
  EXPECT_EQ(undo.record->attempt, 1) << "the undelivered attempt is not spent";
  EXPECT_EQ(undo.record->token, 102);
  EXPECT_FALSE(undo.record->request_id.has_value());
  EXPECT_TRUE(check_invariants(*undo.record).ok());
  s.rec = undo.record;
  auto again = s.Begin(Cmd("C"), kT0 + 5);
  EXPECT_EQ(again.outcome, BeginOutcome::acquired);
  EXPECT_EQ(s.rec->attempt, 2) << "max_attempts 2: the item is not dead";

  // Nothing to undo for another token or a concluded record.
  EXPECT_FALSE(decide_abandon(s.rec, 102, kT0 + 6).write);
  s.Apply(decide_complete(s.rec, 103, "1", kT0 + 6));
  EXPECT_FALSE(decide_abandon(s.rec, 103, kT0 + 7).write);
}

// O9: an acquisition a replay answered is not undone: the client's retry holds it.
TEST(OnceAbandon, LeavesAnAcquisitionAReplayAnswered) {
  Sim s;
  s.Begin(WithRequestId("A", "ra"), kT0);  // token 101
  s.Begin(WithRequestId("A", "ra"), kT0 + 1);
  ASSERT_TRUE(s.rec->replayed);
  auto undo = decide_abandon(s.rec, 101, kT0 + 2);
  EXPECT_FALSE(undo.write);
  EXPECT_EQ(undo.record, s.rec);
}

TEST(OnceStale, MissingRecordIsNotFound) {
  ExpectError(decide_complete(std::nullopt, 1, "1", kT0), errc::once_not_found);
  ExpectError(decide_fail(std::nullopt, 1, "e", true, kT0), errc::once_not_found);
  ExpectError(decide_renew(std::nullopt, 1, 1000, kT0), errc::once_not_found);
}

TEST(OnceFilterTest, ProcessingMeansLiveLeasesAndExpiredMeansLapsed) {
  Sim s;
  s.Begin(Cmd("A", 1000), kT0);
  EXPECT_TRUE(matches(OnceFilter::processing, *s.rec, kT0 + 999));
  EXPECT_FALSE(matches(OnceFilter::expired, *s.rec, kT0 + 999));
  EXPECT_FALSE(matches(OnceFilter::processing, *s.rec, kT0 + 1000));
  EXPECT_TRUE(matches(OnceFilter::expired, *s.rec, kT0 + 1000));
  EXPECT_TRUE(matches(OnceFilter::all, *s.rec, kT0));
  ExpectError(parse_once_filter("done"), errc::invalid_request, "state");
  ASSERT_TRUE(parse_once_filter("expired").ok());
}

// The boundary, stated once in lease_live_at: a lease ending at now has lapsed. Every filter
// against a record of every state whose lease ends just before, at and just after now.
TEST(OnceFilterTest, EveryFilterInEveryStateOnBothSidesOfTheLeaseEnd) {
  EXPECT_TRUE(lease_live_at(kT0 + 1, kT0));
  EXPECT_FALSE(lease_live_at(kT0, kT0));
  EXPECT_FALSE(lease_live_at(kT0 - 1, kT0));
  const OnceState states[] = {OnceState::processing, OnceState::pending, OnceState::completed,
                              OnceState::dead};
  for (const OnceState st : states) {
    for (const TimeMs lease_end : {kT0 - 1, kT0, kT0 + 1}) {
      SCOPED_TRACE(std::string(to_string(st)) +
                   ", lease end - now = " + std::to_string(lease_end - kT0));
      OnceRecord r;
      r.state = st;
      r.lease_expires_at = lease_end;
      const bool processing = st == OnceState::processing;
      EXPECT_TRUE(matches(OnceFilter::all, r, kT0));
      EXPECT_EQ(matches(OnceFilter::processing, r, kT0), processing && lease_end > kT0);
      EXPECT_EQ(matches(OnceFilter::expired, r, kT0), processing && lease_end <= kT0);
      EXPECT_EQ(lease_live(r, kT0), matches(OnceFilter::processing, r, kT0));
      EXPECT_EQ(matches(OnceFilter::pending, r, kT0), st == OnceState::pending);
      EXPECT_EQ(matches(OnceFilter::completed, r, kT0), st == OnceState::completed);
      EXPECT_EQ(matches(OnceFilter::dead, r, kT0), st == OnceState::dead);
      // Each record shows under exactly one state.
      int shown = 0;
      for (const OnceFilter f : kOnceFilters) shown += f != OnceFilter::all && matches(f, r, kT0);
      EXPECT_EQ(shown, 1);
    }
  }
}

TEST(OnceInvariants, CheckRejectsImpossibleRecords) {
  OnceRecord r;
  r.key = "k";
  r.token = 1;
  r.attempt = 1;
  r.lease_expires_at = kT0;
  EXPECT_TRUE(check_invariants(r).ok());
  OnceRecord bad = r;
  bad.attempt = 6;
  EXPECT_FALSE(check_invariants(bad).ok());
  bad = r;
  bad.token = 0;
  EXPECT_FALSE(check_invariants(bad).ok());
  bad = r;
  bad.result = "1";
  EXPECT_FALSE(check_invariants(bad).ok());
  bad = r;
  bad.state = OnceState::completed;
  EXPECT_FALSE(check_invariants(bad).ok()) << "completed needs a result and finished_at";
  bad = r;
  bad.state = OnceState::pending;
  bad.holder_done = true;
  bad.attempt = 5;
  EXPECT_FALSE(check_invariants(bad).ok()) << "pending with no attempts left";
}

TEST(OnceValidation, LimitsNameTheirFields) {
  ExpectError(validate_lease_ms(999), errc::invalid_request, "lease_ms");
  ExpectError(validate_lease_ms(3600001), errc::invalid_request, "lease_ms");
  EXPECT_TRUE(validate_lease_ms(1000).ok());
  EXPECT_TRUE(validate_lease_ms(3600000).ok());
  ExpectError(validate_wait_ms(300001), errc::invalid_request, "wait_ms");
  EXPECT_TRUE(validate_wait_ms(0).ok());
  ExpectError(validate_max_attempts(0), errc::invalid_request, "max_attempts");
  ExpectError(validate_owner(std::string(257, 'a')), errc::invalid_request, "owner");
  ExpectError(validate_owner("\xff"), errc::invalid_request, "owner");
  ExpectError(validate_fingerprint(std::string(513, 'a')), errc::invalid_request, "fingerprint");
  ExpectError(validate_error_text(std::string(4097, 'a')), errc::invalid_request, "error");
  EXPECT_TRUE(validate_result_json(std::string(32 * 1024, '1')).ok());
  ExpectError(validate_result_json(std::string(32 * 1024 + 1, '1')), errc::invalid_request,
              "result");
}

}  // namespace
}  // namespace ichido::core
