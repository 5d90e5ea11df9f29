// The store conformance suite, once records: every edge of the lifecycle in core/once.h run
// against every Store (memory, SQLite and PostgreSQL), with a ManualClock for leases, exact
// outcomes and exact error codes, and the invariants O1–O5 checked on every record a store answers.
#include "store/testing/conformance_fixture.h"

namespace ichido::store_testing {
namespace {

using core::BeginOutcome;
using core::OnceFilter;
using core::OnceRecord;
using core::OnceState;

template <class Factory>
class OnceConformance : public StoreConformance<Factory> {
 protected:
  OnceRef Key(const std::string& key, const std::string& ns = "acme") { return {ns, key}; }

  Result<BeginOnceReply> Begin(const std::string& key, const std::string& owner = "w",
                               std::int64_t lease_ms = 10000,
                               std::optional<std::string> fingerprint = std::nullopt,
                               std::int64_t max_attempts = core::kDefaultMaxAttempts,
                               const std::string& ns = "acme") {
    auto r = this->S().begin_once(
        {Key(key, ns), core::BeginCommand{owner, lease_ms, std::move(fingerprint), max_attempts}});
    if (r.ok()) Check(r->record);
    return r;
  }
  // A begin that must acquire; returns its token (-1 after a reported failure).
  std::int64_t MustAcquire(const std::string& key, const std::string& owner = "w",
                           std::int64_t lease_ms = 10000) {
    auto r = Begin(key, owner, lease_ms);
    EXPECT_TRUE(r.ok()) << r.error().message;
    if (!r.ok()) return -1;
    EXPECT_EQ(r->outcome, BeginOutcome::acquired) << core::to_string(r->outcome);
    return r->record.token;
  }
  Result<OnceRecord> Complete(const std::string& key, std::int64_t token,
                              const std::string& result) {
    auto r = this->S().complete_once({Key(key), token, result});
    if (r.ok()) Check(*r);
    return r;
  }
  Result<OnceRecord> Fail(const std::string& key, std::int64_t token, const std::string& error,
                          bool retry = true) {
    auto r = this->S().fail_once({Key(key), token, error, retry});
    if (r.ok()) Check(*r);
    return r;
  }
  Result<OnceRecord> Get(const std::string& key) {
    auto r = this->S().get_once(Key(key));
    if (r.ok()) Check(*r);
    return r;
  }
  std::vector<std::string> Listed(OnceFilter f, int limit = 1000, std::string after = "") {
    auto page = this->S().list_once({"acme", f, std::move(after), limit});
    EXPECT_TRUE(page.ok()) << page.error().message;
    std::vector<std::string> keys;
    if (page.ok()) {
      for (const auto& r : page->items) keys.push_back(r.key);
    }
    return keys;
  }
  static void Check(const OnceRecord& r) {
    auto ok = core::check_invariants(r);
    EXPECT_TRUE(ok.ok()) << ok.error().message;
  }
};

TYPED_TEST_SUITE(OnceConformance, StoreFactories, FactoryName);

TYPED_TEST(OnceConformance, FirstBeginAcquiresOthersSeeInProgressThenTheStoredResult) {
  const TimeMs t0 = this->clock_.now_ms();
  auto a = this->Begin("<msg-1@example.com>", "outlook-A", 30000, "fp");
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a->outcome, BeginOutcome::acquired);
  EXPECT_EQ(a->record.attempt, 1);
  EXPECT_GT(a->record.token, 0);
  EXPECT_EQ(a->record.lease_expires_at, t0 + 30000);

  this->clock_.advance(1000);
  auto b = this->Begin("<msg-1@example.com>", "outlook-B", 30000, "fp");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->outcome, BeginOutcome::in_progress);
  EXPECT_EQ(b->record.owner, "outlook-A");
  EXPECT_EQ(b->retry_after_ms, 29000);

  auto c = this->Complete("<msg-1@example.com>", a->record.token, R"({"ticket":"T-1"})");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->state, OnceState::completed);
  EXPECT_EQ(c->finished_at, t0 + 1000);
  for (int i = 0; i < 3; ++i) {
    auto again = this->Begin("<msg-1@example.com>", "outlook-C");
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->outcome, BeginOutcome::completed);
    EXPECT_EQ(again->record.result, R"({"ticket":"T-1"})");
    EXPECT_EQ(again->record.finished_at, t0 + 1000);
  }
}

TYPED_TEST(OnceConformance, TokensStrictlyIncreaseAcrossKeysAndAcquisitions) {
  std::int64_t last = 0;
  for (int i = 0; i < 5; ++i) {
    const auto t = this->MustAcquire("k" + std::to_string(i));
    EXPECT_GT(t, last);
    last = t;
  }
  ASSERT_TRUE(this->Fail("k0", this->Get("k0")->token, "e").ok());
  const auto again = this->MustAcquire("k0");
  EXPECT_GT(again, last);
}

TYPED_TEST(OnceConformance, LapsedLeaseIsTakenOverAndTheOldHolderIsStale) {
  const auto old_token = this->MustAcquire("job", "A", 1000);
  this->clock_.advance(999);
  auto still = this->Begin("job", "B", 1000);
  ASSERT_TRUE(still.ok());
  EXPECT_EQ(still->outcome, BeginOutcome::in_progress);
  this->clock_.advance(1);
  auto b = this->Begin("job", "B", 1000);
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->outcome, BeginOutcome::acquired);
  EXPECT_EQ(b->record.attempt, 2);
  EXPECT_GT(b->record.token, old_token);
  EXPECT_EQ(b->record.last_error, "lease expired");

  const auto before = this->Get("job");
  ASSERT_TRUE(before.ok());
  ExpectError(this->Complete("job", old_token, "\"late\""), errc::stale_token);
  ExpectError(this->Fail("job", old_token, "late"), errc::stale_token);
  ExpectError(this->S().renew_once({this->Key("job"), old_token, 5000}), errc::stale_token);
  EXPECT_EQ(*this->Get("job"), *before) << "a stale token changes nothing";

  ASSERT_TRUE(this->Complete("job", b->record.token, "\"done\"").ok());
  EXPECT_EQ(this->Get("job")->result, "\"done\"");
}

TYPED_TEST(OnceConformance, LapsedHolderStillCompletesWhenNobodyTookOver) {
  const auto t = this->MustAcquire("job", "A", 1000);
  this->clock_.advance(60000);
  auto c = this->Complete("job", t, "1");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->state, OnceState::completed);
}

TYPED_TEST(OnceConformance, RenewExtendsTheLeaseAlsoAfterItLapsed) {
  const TimeMs t0 = this->clock_.now_ms();
  const auto t = this->MustAcquire("job", "A", 1000);
  this->clock_.advance(5000);
  auto r = this->S().renew_once({this->Key("job"), t, 2000});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->lease_expires_at, t0 + 7000);
  auto b = this->Begin("job", "B");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->outcome, BeginOutcome::in_progress);
  ExpectError(this->S().renew_once({this->Key("nope"), t, 2000}), errc::once_not_found);
}

TYPED_TEST(OnceConformance, FailFiveTimesIsDeadAndResetMakesItAcquirableAgain) {
  std::int64_t last_token = 0;
  for (int attempt = 1; attempt <= 5; ++attempt) {
    auto b = this->Begin("inv-9");
    ASSERT_TRUE(b.ok());
    ASSERT_EQ(b->outcome, BeginOutcome::acquired) << "attempt " << attempt;
    EXPECT_EQ(b->record.attempt, attempt);
    last_token = b->record.token;
    auto f = this->Fail("inv-9", b->record.token, "smtp down " + std::to_string(attempt));
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f->state, attempt < 5 ? OnceState::pending : OnceState::dead);
  }
  auto d = this->Begin("inv-9");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->outcome, BeginOutcome::dead);
  EXPECT_EQ(d->record.attempt, 5);
  EXPECT_EQ(d->record.last_error, "smtp down 5");
  EXPECT_EQ(this->Listed(OnceFilter::dead), std::vector<std::string>{"inv-9"});

  auto reset = this->S().reset_once(this->Key("inv-9"));
  ASSERT_TRUE(reset.ok());
  EXPECT_EQ(reset->state, OnceState::dead);
  ExpectError(this->Get("inv-9"), errc::once_not_found);
  auto again = this->Begin("inv-9");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->outcome, BeginOutcome::acquired);
  EXPECT_EQ(again->record.attempt, 1);
  EXPECT_GT(again->record.token, last_token);
  ExpectError(this->S().reset_once(this->Key("never")), errc::once_not_found);
}

TYPED_TEST(OnceConformance, FailWithoutRetryIsDeadAtOnceAndMaxAttemptsIsKept) {
  auto b = this->Begin("a", "w", 10000, std::nullopt, 2);
  ASSERT_TRUE(b.ok());
  auto f = this->Fail("a", b->record.token, "bad input", false);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->state, OnceState::dead);
  EXPECT_EQ(f->max_attempts, 2);
  // A repeat of the same fail (its answer was lost) answers the same record.
  auto repeat = this->Fail("a", b->record.token, "bad input", false);
  ASSERT_TRUE(repeat.ok());
  EXPECT_EQ(*repeat, *f);
}

TYPED_TEST(OnceConformance, LapsedLeaseOnTheLastAttemptIsDeadWhenNextTouched) {
  auto a = this->Begin("x", "A", 1000, std::nullopt, 1);
  ASSERT_TRUE(a.ok());
  this->clock_.advance(1000);
  EXPECT_EQ(this->Listed(OnceFilter::expired), std::vector<std::string>{"x"});
  auto b = this->Begin("x", "B");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->outcome, BeginOutcome::dead);
  EXPECT_EQ(b->record.last_error, "lease expired");
  EXPECT_EQ(this->Get("x")->state, OnceState::dead) << "the decision was saved";
  ExpectError(this->Complete("x", a->record.token, "1"), errc::stale_token);
}

TYPED_TEST(OnceConformance, FingerprintMismatchIs422AndChangesNothing) {
  auto a = this->Begin("k", "A", 10000, "sha256:aaa");
  ASSERT_TRUE(a.ok());
  const auto before = this->Get("k");
  auto m = this->Begin("k", "B", 10000, "sha256:bbb");
  ExpectError(m, errc::fingerprint_mismatch);
  EXPECT_EQ(*this->Get("k"), *before);
  ASSERT_TRUE(this->Complete("k", a->record.token, "1").ok());
  const auto done = this->Get("k");
  ExpectError(this->Begin("k", "B", 10000, "sha256:bbb"), errc::fingerprint_mismatch);
  EXPECT_EQ(*this->Get("k"), *done);
  auto same = this->Begin("k", "B", 10000, "sha256:aaa");
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->outcome, BeginOutcome::completed);
}

TYPED_TEST(OnceConformance, CompleteRepeatIsIdempotentAndNeverOverwritesTheResult) {
  const auto t = this->MustAcquire("k");
  auto c1 = this->Complete("k", t, R"({"v":1})");
  ASSERT_TRUE(c1.ok());
  this->clock_.advance(10);
  auto c2 = this->Complete("k", t, R"({"v":1})");
  ASSERT_TRUE(c2.ok());
  EXPECT_EQ(*c2, *c1);
  ExpectError(this->Complete("k", t, R"({"v":2})"), errc::result_mismatch);
  auto stored = this->Get("k");
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(*stored, *c1);
  ExpectError(this->Complete("missing", t, "1"), errc::once_not_found);
}

TYPED_TEST(OnceConformance, ListsByStateInKeyOrderWithPaging) {
  const auto t_done = this->MustAcquire("c-done");
  ASSERT_TRUE(this->Complete("c-done", t_done, "1").ok());
  const auto t_pending = this->MustAcquire("b-pending");
  ASSERT_TRUE(this->Fail("b-pending", t_pending, "e").ok());
  const auto t_dead = this->MustAcquire("e-dead");
  ASSERT_TRUE(this->Fail("e-dead", t_dead, "e", false).ok());
  this->MustAcquire("a-short", "w", 1000);
  this->MustAcquire("d-long", "w", 60000);
  this->clock_.advance(1000);

  using V = std::vector<std::string>;
  EXPECT_EQ(this->Listed(OnceFilter::processing), V{"d-long"});
  EXPECT_EQ(this->Listed(OnceFilter::expired), V{"a-short"});
  EXPECT_EQ(this->Listed(OnceFilter::pending), V{"b-pending"});
  EXPECT_EQ(this->Listed(OnceFilter::completed), V{"c-done"});
  EXPECT_EQ(this->Listed(OnceFilter::dead), V{"e-dead"});
  EXPECT_EQ(this->Listed(OnceFilter::all),
            (V{"a-short", "b-pending", "c-done", "d-long", "e-dead"}));

  auto p1 = this->S().list_once({"acme", OnceFilter::all, "", 2});
  ASSERT_TRUE(p1.ok());
  ASSERT_EQ(p1->items.size(), 2u);
  ASSERT_TRUE(p1->next_after.has_value());
  EXPECT_EQ(*p1->next_after, "b-pending");
  EXPECT_EQ(this->Listed(OnceFilter::all, 2, *p1->next_after), (V{"c-done", "d-long"}));
  auto last = this->S().list_once({"acme", OnceFilter::all, "d-long", 2});
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->items.size(), 1u);
  EXPECT_FALSE(last->next_after.has_value());
  ExpectError(this->S().list_once({"acme", OnceFilter::all, "", 0}), errc::invalid_request,
              "limit");
  ExpectError(this->S().list_once({"acme", OnceFilter::all, "", 1001}), errc::invalid_request,
              "limit");
}

// What a record is at time `now` is core::matches' to say (a lease ending at now has lapsed:
// expired). Every store's listing by state and its counts by state (the overview, the /metrics
// gauges) must select the same records, for records of every state whose lease ends just before,
// at and just after now.
TYPED_TEST(OnceConformance, ListingsAndCountsByStateAgreeWithTheRulebookAroundTheLeaseEnd) {
  const TimeMs t0 = this->clock_.now_ms();
  const TimeMs end = t0 + 60000;
  const std::pair<const char*, TimeMs> sides[] = {
      {"before", end - 1}, {"at", end}, {"after", end + 1}};
  for (const auto& [side, lease_end] : sides) {
    const std::string s = side;
    const std::int64_t lease_ms = lease_end - t0;
    this->MustAcquire("processing-" + s, "w", lease_ms);
    ASSERT_TRUE(
        this->Fail("pending-" + s, this->MustAcquire("pending-" + s, "w", lease_ms), "e").ok());
    ASSERT_TRUE(
        this->Complete("completed-" + s, this->MustAcquire("completed-" + s, "w", lease_ms), "1")
            .ok());
    ASSERT_TRUE(
        this->Fail("dead-" + s, this->MustAcquire("dead-" + s, "w", lease_ms), "e", false).ok());
  }
  const std::pair<OnceFilter, const char*> filters[] = {{OnceFilter::all, "all"},
                                                        {OnceFilter::processing, "processing"},
                                                        {OnceFilter::expired, "expired"},
                                                        {OnceFilter::pending, "pending"},
                                                        {OnceFilter::completed, "completed"},
                                                        {OnceFilter::dead, "dead"}};
  using V = std::vector<std::string>;
  for (const TimeMs now : {end - 1, end, end + 1}) {
    SCOPED_TRACE("now = the middle lease end " + std::to_string(now - end) + " ms");
    this->clock_.set(now);
    auto page = this->S().list_once({"acme", OnceFilter::all, "", 1000});
    ASSERT_TRUE(page.ok()) << page.error().message;
    ASSERT_EQ(page->items.size(), 12u);
    for (const auto& r : page->items) this->Check(r);

    for (const auto& [f, name] : filters) {
      V want;
      for (const auto& r : page->items) {
        if (core::matches(f, r, now)) want.push_back(r.key);
      }
      EXPECT_EQ(this->Listed(f), want) << "state=" << name;
    }
    if (now == end) {  // the boundary itself, spelled out
      EXPECT_EQ(this->Listed(OnceFilter::processing), V{"processing-after"});
      EXPECT_EQ(this->Listed(OnceFilter::expired), (V{"processing-at", "processing-before"}));
    }

    OnceCounts want;
    for (const auto& r : page->items) {
      want.processing += core::matches(OnceFilter::processing, r, now);
      want.pending += core::matches(OnceFilter::pending, r, now);
      want.completed += core::matches(OnceFilter::completed, r, now);
      want.dead += core::matches(OnceFilter::dead, r, now);
      if (core::matches(OnceFilter::expired, r, now)) {
        ++want.expired;
        if (!want.oldest_expired_lease || r.lease_expires_at < *want.oldest_expired_lease) {
          want.oldest_expired_lease = r.lease_expires_at;
        }
      }
    }
    auto sum = this->S().summarize_namespaces(std::string("acme"), 1000);
    ASSERT_TRUE(sum.ok()) << sum.error().message;
    ASSERT_EQ(sum->size(), 1u);
    const OnceCounts& got = (*sum)[0].once;
    EXPECT_EQ(got.processing, want.processing);
    EXPECT_EQ(got.expired, want.expired);
    EXPECT_EQ(got.pending, want.pending);
    EXPECT_EQ(got.completed, want.completed);
    EXPECT_EQ(got.dead, want.dead);
    EXPECT_EQ(got.oldest_expired_lease, want.oldest_expired_lease);
    EXPECT_FALSE(got.capped);
  }
}

TYPED_TEST(OnceConformance, NamespacesAndKeysAreKeptApartByteForByte) {
  const std::string mail = "<CAF=x/y+z@mail.example.co.jp>";
  const std::string jp = "請求書-2026-04-001";
  ASSERT_TRUE(this->Begin(mail, "A", 10000, std::nullopt, 5, "team-a").ok());
  auto other_ns = this->Begin(mail, "B", 10000, std::nullopt, 5, "team-b");
  ASSERT_TRUE(other_ns.ok());
  EXPECT_EQ(other_ns->outcome, BeginOutcome::acquired);
  auto j = this->Begin(jp);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->outcome, BeginOutcome::acquired);
  EXPECT_EQ(this->Get(jp)->key, jp);
  EXPECT_EQ(this->Listed(OnceFilter::all), std::vector<std::string>{jp});
}

TYPED_TEST(OnceConformance, ResultIsStoredVerbatimUpTo32KiB) {
  const auto t = this->MustAcquire("big");
  const std::string big = "\"" + std::string(core::kMaxResultBytes - 2, 'x') + "\"";
  ASSERT_TRUE(this->Complete("big", t, big).ok());
  EXPECT_EQ(this->Get("big")->result, big);
}

TYPED_TEST(OnceConformance, PurgeRemovesOnlyFinishedRecordsOlderThanTheCutoffInBatches) {
  for (int i = 0; i < 5; ++i) {
    const std::string k = "old-" + std::to_string(i);
    ASSERT_TRUE(this->Complete(k, this->MustAcquire(k), "1").ok());
  }
  const auto td = this->MustAcquire("old-dead");
  ASSERT_TRUE(this->Fail("old-dead", td, "e", false).ok());
  this->MustAcquire("old-processing", "w", 1000);  // lapsed, but not finished: kept
  const auto tp = this->MustAcquire("old-pending");
  ASSERT_TRUE(this->Fail("old-pending", tp, "e").ok());
  this->clock_.advance(10000);
  const TimeMs cutoff = this->clock_.now_ms();
  ASSERT_TRUE(this->Complete("new", this->MustAcquire("new"), "1").ok());

  auto p1 = this->S().purge_once({cutoff, 4});
  ASSERT_TRUE(p1.ok());
  EXPECT_EQ(*p1, 4);
  auto p2 = this->S().purge_once({cutoff, 4});
  ASSERT_TRUE(p2.ok());
  EXPECT_EQ(*p2, 2);
  auto p3 = this->S().purge_once({cutoff, 4});
  ASSERT_TRUE(p3.ok());
  EXPECT_EQ(*p3, 0);
  EXPECT_EQ(this->Listed(OnceFilter::all),
            (std::vector<std::string>{"new", "old-pending", "old-processing"}));
}

// O8 through a store: the retried begin answers the same acquisition and writes only its mark
// (O9).
TYPED_TEST(OnceConformance, RequestIdReplaysTheAcquisitionUntilSomeoneElseTakesOver) {
  auto begin = [&](const std::string& owner, std::optional<std::string> rid) {
    core::BeginCommand c{owner, 5000, std::nullopt, 2};
    c.request_id = std::move(rid);
    auto r = this->S().begin_once({this->Key("k"), c});
    EXPECT_TRUE(r.ok()) << r.error().message;
    if (r.ok()) this->Check(r->record);
    return r.ok() ? *r : BeginOnceReply{};
  };
  auto first = begin("A", "r1");
  ASSERT_EQ(first.outcome, BeginOutcome::acquired);
  EXPECT_FALSE(first.replayed);
  this->clock_.advance(1000);
  auto again = begin("A", "r1");
  EXPECT_EQ(again.outcome, BeginOutcome::acquired);
  EXPECT_TRUE(again.replayed);
  EXPECT_TRUE(again.record.replayed) << "O9: the acquisition is marked";
  first.record.replayed = true;
  EXPECT_EQ(again.record, first.record) << "no new attempt, token or lease";
  EXPECT_EQ(begin("A", "r2").outcome, BeginOutcome::in_progress);
  EXPECT_EQ(begin("B", "r1").outcome, BeginOutcome::in_progress);
  this->clock_.advance(10000);  // lapsed, nobody took over
  auto lapsed = begin("A", "r1");
  EXPECT_TRUE(lapsed.replayed);
  EXPECT_EQ(lapsed.record.attempt, 1);
  auto stored = this->Get("k");
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(*stored, first.record) << "replays wrote nothing but the mark";
  auto b = begin("B", "r2");
  EXPECT_EQ(b.outcome, BeginOutcome::acquired);
  EXPECT_FALSE(b.replayed);
  EXPECT_EQ(b.record.attempt, 2);
  EXPECT_EQ(b.record.request_id, "r2");
  EXPECT_FALSE(b.record.replayed) << "a new acquisition starts unmarked";
  EXPECT_EQ(begin("A", "r1").outcome, BeginOutcome::in_progress);
}

// O9: the undo of an acquisition whose client went away leaves it alone when the client's retry
// (same request_id) was answered it meanwhile: the retry holds it and may complete it.
TYPED_TEST(OnceConformance, AbandonLeavesAnAcquisitionItsRetryWasAnswered) {
  auto begin = [&](const std::string& rid) {
    core::BeginCommand c{"A", 5000, std::nullopt, 3};
    c.request_id = rid;
    auto r = this->S().begin_once({this->Key("k"), c});
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? *r : BeginOnceReply{};
  };
  auto first = begin("r1");
  ASSERT_EQ(first.outcome, BeginOutcome::acquired);
  auto retry = begin("r1");
  ASSERT_TRUE(retry.replayed);
  auto undone = this->S().abandon_once({this->Key("k"), first.record.token});
  ASSERT_TRUE(undone.ok());
  EXPECT_FALSE(*undone) << "the retry was told it holds this acquisition";
  auto kept = this->Get("k");
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->state, OnceState::processing);
  EXPECT_EQ(kept->token, first.record.token);
  ASSERT_TRUE(this->Fail("k", first.record.token, "boom").ok());  // retry: pending
  // The next acquisition starts unmarked: its undo works as before.
  auto second = begin("r2");
  ASSERT_EQ(second.outcome, BeginOutcome::acquired);
  EXPECT_EQ(second.record.attempt, 2);
  auto undone2 = this->S().abandon_once({this->Key("k"), second.record.token});
  ASSERT_TRUE(undone2.ok());
  EXPECT_TRUE(*undone2);
  auto back = this->Get("k");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->state, OnceState::pending);
  EXPECT_EQ(back->attempt, 1);
}

TYPED_TEST(OnceConformance, AbandonUndoesAnUndeliveredAcquisitionWithoutSpendingIt) {
  auto begin = [&](const std::string& owner) {
    auto r = this->S().begin_once({this->Key("k"), core::BeginCommand{owner, 5000, "fp", 2}});
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : BeginOnceReply{};
  };
  auto a = begin("A");
  auto undone = this->S().abandon_once({this->Key("k"), a.record.token});
  ASSERT_TRUE(undone.ok());
  EXPECT_TRUE(*undone);
  ExpectError(this->Get("k"), errc::once_not_found);  // as if never begun
  auto b = begin("B");
  ASSERT_EQ(b.record.attempt, 1);
  ASSERT_TRUE(this->Fail("k", b.record.token, "boom").ok());
  auto c = begin("C");
  ASSERT_EQ(c.record.attempt, 2);
  ASSERT_TRUE(*this->S().abandon_once({this->Key("k"), c.record.token}));
  auto back = this->Get("k");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->state, OnceState::pending);
  EXPECT_EQ(back->attempt, 1);
  auto d = begin("D");
  EXPECT_EQ(d.outcome, BeginOutcome::acquired) << "max_attempts 2: not dead";
  EXPECT_EQ(d.record.attempt, 2);
  EXPECT_GT(d.record.token, c.record.token);
  auto stale = this->S().abandon_once({this->Key("k"), c.record.token});
  ASSERT_TRUE(stale.ok());
  EXPECT_FALSE(*stale) << "another token holds it now: nothing undone";
}

// What only a durable store promises: records and the token sequence survive a reopen.
TEST(OnceSqliteDurability, RecordsAndTokensSurviveReopen) {
  ManualClock clock(At(2026, 4, 1));
  SqliteFactory factory;
  std::int64_t token = 0;
  {
    auto s = factory.Open(&clock);
    ASSERT_TRUE(s.ok()) << s.error().message;
    SyncStore sync(**s);
    auto b = sync.begin_once({{"ns", "k"}, core::BeginCommand{"A", 5000, "fp", 3}});
    ASSERT_TRUE(b.ok());
    token = b->record.token;
    ASSERT_TRUE(sync.complete_once({{"ns", "k"}, token, R"({"x":[1,2]})"}).ok());
    ASSERT_TRUE(sync.begin_once({{"ns", "k2"}, core::BeginCommand{"A", 5000, {}, 3}}).ok());
    (*s)->close();
  }
  auto s = factory.Open(&clock);
  ASSERT_TRUE(s.ok()) << s.error().message;
  SyncStore sync(**s);
  auto r = sync.get_once({"ns", "k"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, OnceState::completed);
  EXPECT_EQ(r->result, R"({"x":[1,2]})");
  EXPECT_EQ(r->fingerprint, "fp");
  EXPECT_EQ(r->max_attempts, 3);
  auto b = sync.begin_once({{"ns", "k3"}, core::BeginCommand{"A", 5000, {}, 3, "r3"}});
  ASSERT_TRUE(b.ok());
  EXPECT_GT(b->record.token, token + 1) << "the sequence continues after a restart";
  (*s)->close();
  auto reopened = factory.Open(&clock);
  ASSERT_TRUE(reopened.ok()) << reopened.error().message;
  SyncStore again(**reopened);
  auto replay = again.begin_once({{"ns", "k3"}, core::BeginCommand{"A", 5000, {}, 3, "r3"}});
  ASSERT_TRUE(replay.ok());
  EXPECT_TRUE(replay->replayed) << "the request_id is durable with the acquisition";
  EXPECT_EQ(replay->record.token, b->record.token);
  (*reopened)->close();
}

}  // namespace
}  // namespace ichido::store_testing
