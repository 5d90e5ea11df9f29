// The store conformance suite, locks section: invariants L1–L7 of core/lock.h, run against every
// Store implementation with a ManualClock (time moves by hand, nothing sleeps). Exact values and
// exact error codes, so two stores that pass give the same answers to the same commands.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ichido/store.h"
#include "store/memory/memory_store.h"
#include "store/sqlite/sqlite_store.h"
#include "store/testing/conformance_fixture.h"
#include "store/testing/sync_store.h"

namespace ichido::store_testing {
namespace {

constexpr TimeMs kT0 = 1'780'000'000'000;  // 2026-05-28

template <class Factory>
class LockConformance : public ::testing::Test {
 protected:
  static constexpr const char* kNs = "acme";

  void SetUp() override {
    ICHIDO_SKIP_UNUSABLE_STORE(Factory);
    Open();
  }
  void TearDown() override {
    if (store_) store_->close();
  }
  void Open() {
    auto s = factory_.Open(&clock_);
    ASSERT_TRUE(s.ok()) << s.error().message;
    store_ = std::move(*s);
    sync_ = std::make_unique<SyncStore>(*store_);
  }
  void Reopen() {
    store_->close();
    sync_.reset();
    store_.reset();
    Open();
  }

  SyncStore& S() { return *sync_; }
  LockRef Ref(const std::string& name, const std::string& ns = kNs) { return {ns, name}; }

  Result<AcquireLockReply> Acquire(const std::string& name, const std::string& owner,
                                   std::int64_t lease_ms = 1000, const std::string& ns = kNs) {
    return S().acquire_lock({Ref(name, ns), owner, lease_ms});
  }
  core::LockRecord MustAcquire(const std::string& name, const std::string& owner,
                               std::int64_t lease_ms = 1000) {
    auto r = Acquire(name, owner, lease_ms);
    EXPECT_TRUE(r.ok()) << r.error().message;
    if (!r.ok()) return {};
    EXPECT_TRUE(r->acquired) << "held by " << r->record.owner;
    return r->record;
  }

  ManualClock clock_{kT0};
  Factory factory_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<SyncStore> sync_;
};

TYPED_TEST_SUITE(LockConformance, StoreFactories, FactoryName);

TYPED_TEST(LockConformance, AcquireFreeLockGrantsWithLease) {
  auto r = this->Acquire("invoice", "script-A", 30000);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->acquired);
  EXPECT_EQ(r->record.name, "invoice");
  EXPECT_EQ(r->record.owner, "script-A");
  EXPECT_GT(r->record.token, 0);
  EXPECT_EQ(r->record.acquired_at, kT0);
  EXPECT_EQ(r->record.lease_expires_at, kT0 + 30000);
  EXPECT_EQ(r->now, kT0);
  auto g = this->S().get_lock(this->Ref("invoice"));
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(g->holder.has_value());
  EXPECT_EQ(*g->holder, r->record);
}

TYPED_TEST(LockConformance, SecondAcquireIsBusyWithTheHolderAndChangesNothing) {
  auto first = this->MustAcquire("l", "A", 5000);
  this->clock_.advance(100);
  auto second = this->Acquire("l", "B", 5000);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->acquired);
  EXPECT_EQ(second->record, first);  // the holder, unchanged
  EXPECT_EQ(second->now, kT0 + 100);
  auto g = this->S().get_lock(this->Ref("l"));
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(*g->holder, first);
}

TYPED_TEST(LockConformance, TokensStrictlyIncreaseAcrossGrantsAndLocks) {
  std::int64_t last = 0;
  for (int i = 0; i < 20; ++i) {
    const std::string name = (i % 2) ? "a" : "b";
    auto g = this->MustAcquire(name, "o");
    EXPECT_GT(g.token, last);
    last = g.token;
    ASSERT_TRUE(this->S().release_lock({this->Ref(name), g.token}).ok());
  }
}

TYPED_TEST(LockConformance, LapsedLeaseIsFreeForTheNextAcquireWithALargerToken) {
  auto first = this->MustAcquire("l", "A", 1000);
  this->clock_.advance(999);
  auto busy = this->Acquire("l", "B");
  ASSERT_TRUE(busy.ok());
  EXPECT_FALSE(busy->acquired);
  this->clock_.advance(1);  // exactly the lease end: free (L3)
  auto g = this->S().get_lock(this->Ref("l"));
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(g->holder.has_value());
  auto second = this->MustAcquire("l", "B", 2000);
  EXPECT_GT(second.token, first.token);
  EXPECT_EQ(second.owner, "B");
  // The old holder is no longer the holder (L4/L5).
  ExpectError(this->S().release_lock({this->Ref("l"), first.token}), errc::not_holder);
  ExpectError(this->S().renew_lock({this->Ref("l"), first.token, 1000}), errc::not_holder);
  auto still = this->S().get_lock(this->Ref("l"));
  ASSERT_TRUE(still.ok());
  EXPECT_EQ(*still->holder, second);
}

TYPED_TEST(LockConformance, ReleaseFreesAndOnlyOnce) {
  auto g = this->MustAcquire("l", "A");
  ExpectError(this->S().release_lock({this->Ref("l"), g.token + 1}), errc::not_holder);
  ASSERT_TRUE(this->S().release_lock({this->Ref("l"), g.token}).ok());
  auto s = this->S().get_lock(this->Ref("l"));
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->holder.has_value());
  ExpectError(this->S().release_lock({this->Ref("l"), g.token}), errc::not_holder);
  ExpectError(this->S().renew_lock({this->Ref("l"), g.token, 1000}), errc::not_holder);
  auto again = this->MustAcquire("l", "B");
  EXPECT_GT(again.token, g.token);
}

TYPED_TEST(LockConformance, ReleaseOfANeverUsedLockIsNotHolder) {
  auto r = this->S().release_lock({this->Ref("never"), 1});
  ExpectError(r, errc::not_holder);
  EXPECT_EQ(std::get<std::int64_t>(r.error().details.at("token")), 1);
}

TYPED_TEST(LockConformance, RenewMovesTheLeaseFromNowKeepingTheToken) {
  auto g = this->MustAcquire("l", "A", 1000);
  this->clock_.advance(800);
  auto r = this->S().renew_lock({this->Ref("l"), g.token, 5000});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->token, g.token);
  EXPECT_EQ(r->lease_expires_at, kT0 + 800 + 5000);
  this->clock_.advance(4000);  // past the original lease: still held thanks to the renewal
  auto busy = this->Acquire("l", "B");
  ASSERT_TRUE(busy.ok());
  EXPECT_FALSE(busy->acquired);
}

TYPED_TEST(LockConformance, RenewRejectsABadLeaseAndChangesNothing) {
  auto g = this->MustAcquire("l", "A", 1000);
  ExpectError(this->S().renew_lock({this->Ref("l"), g.token, 999}), errc::invalid_request,
              "lease_ms");
  ExpectError(this->S().renew_lock({this->Ref("l"), g.token, 3600001}), errc::invalid_request,
              "lease_ms");
  auto s = this->S().get_lock(this->Ref("l"));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s->holder, g);
}

TYPED_TEST(LockConformance, AcquireRejectsABadLeaseAndGrantsNothing) {
  ExpectError(this->Acquire("l", "A", 999), errc::invalid_request, "lease_ms");
  auto s = this->S().get_lock(this->Ref("l"));
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->holder.has_value());
}

TYPED_TEST(LockConformance, LapsedHolderMayReleaseOrRenewWhileNobodyTookOver) {
  auto g = this->MustAcquire("l", "A", 1000);
  this->clock_.advance(5000);
  auto s = this->S().get_lock(this->Ref("l"));
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->holder.has_value());  // GET: held false while lapsed
  auto r = this->S().renew_lock({this->Ref("l"), g.token, 1000});
  ASSERT_TRUE(r.ok()) << r.error().message;  // held again from now
  EXPECT_EQ(r->lease_expires_at, kT0 + 6000);
  auto busy = this->Acquire("l", "B");
  ASSERT_TRUE(busy.ok());
  EXPECT_FALSE(busy->acquired);
  this->clock_.advance(5000);
  ASSERT_TRUE(this->S().release_lock({this->Ref("l"), g.token}).ok());
}

TYPED_TEST(LockConformance, ForceReleaseEndsTheLeaseAndTheOldTokenStopsWorking) {
  auto g = this->MustAcquire("l", "A", 60000);
  auto f = this->S().force_release_lock(this->Ref("l"));
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->released);
  ASSERT_TRUE(f->previous.has_value());
  EXPECT_EQ(*f->previous, g);
  ExpectError(this->S().renew_lock({this->Ref("l"), g.token, 1000}), errc::not_holder);
  ExpectError(this->S().release_lock({this->Ref("l"), g.token}), errc::not_holder);
  auto again = this->S().force_release_lock(this->Ref("l"));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->released);  // idempotent
  auto b = this->MustAcquire("l", "B");
  EXPECT_GT(b.token, g.token);
}

TYPED_TEST(LockConformance, ListShowsLiveLeasesOfTheNamespaceByName) {
  this->MustAcquire("zeta", "A", 5000);
  this->MustAcquire("alpha", "B", 1000);
  auto other = this->Acquire("alpha", "C", 1000, "other-ns");
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->acquired);  // same name, another namespace: another lock
  auto l = this->S().list_locks(this->kNs);
  ASSERT_TRUE(l.ok());
  ASSERT_EQ(l->size(), 2u);
  EXPECT_EQ((*l)[0].holder->name, "alpha");
  EXPECT_EQ((*l)[1].holder->name, "zeta");
  this->clock_.advance(1000);  // alpha lapses
  l = this->S().list_locks(this->kNs);
  ASSERT_TRUE(l.ok());
  ASSERT_EQ(l->size(), 1u);
  EXPECT_EQ((*l)[0].holder->name, "zeta");
  auto none = this->S().list_locks("empty");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// Whether a lock is held at time `now` is core::is_held's to say (L3: a lease ending at now has
// lapsed). Every store's GET, listing and held count (the overview, the dashboard) must agree with
// it for locks whose leases end just before, at and just after now; and an acquire at the lease
// end takes exactly the locks that are not held.
TYPED_TEST(LockConformance, GetListAndHeldCountAgreeWithTheRulebookAroundTheLeaseEnd) {
  const TimeMs t0 = this->clock_.now_ms();
  const TimeMs end = t0 + 60000;
  const std::pair<const char*, TimeMs> sides[] = {
      {"before", end - 1}, {"at", end}, {"after", end + 1}};
  std::vector<core::LockRecord> granted;
  for (const auto& [side, lease_end] : sides) {
    granted.push_back(this->MustAcquire(side, "w", lease_end - t0));
    ASSERT_EQ(granted.back().lease_expires_at, lease_end);
  }
  using V = std::vector<std::string>;
  for (const TimeMs now : {end - 1, end, end + 1}) {
    SCOPED_TRACE("now = the middle lease end " + std::to_string(now - end) + " ms");
    this->clock_.set(now);
    V want;
    for (const auto& g : granted) {
      const bool held = core::is_held(g, now);
      if (held) want.push_back(g.name);
      auto s = this->S().get_lock(this->Ref(g.name));
      ASSERT_TRUE(s.ok()) << s.error().message;
      EXPECT_EQ(s->holder.has_value(), held) << g.name;
      if (held && s->holder) {
        EXPECT_EQ(*s->holder, g);
      }
    }
    std::sort(want.begin(), want.end());
    auto l = this->S().list_locks(this->kNs);
    ASSERT_TRUE(l.ok()) << l.error().message;
    V listed;
    for (const auto& x : *l) {
      ASSERT_TRUE(x.holder.has_value());
      listed.push_back(x.holder->name);
    }
    EXPECT_EQ(listed, want);
    if (now == end) {  // the boundary itself, spelled out
      EXPECT_EQ(listed, V{"after"});
    }

    auto sum = this->S().summarize_namespaces(std::string(this->kNs), 1000);
    ASSERT_TRUE(sum.ok()) << sum.error().message;
    ASSERT_EQ(sum->size(), 1u);
    EXPECT_EQ((*sum)[0].locks_held, static_cast<std::int64_t>(want.size()));
  }
  this->clock_.set(end);
  for (const auto& g : granted) {
    auto r = this->Acquire(g.name, "next");
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->acquired, !core::is_held(g, end)) << g.name;
  }
}

TYPED_TEST(LockConformance, ConcurrentAcquiresGrantExactlyOne) {
  constexpr int kThreads = 16;
  std::vector<std::thread> threads;
  std::vector<int> won(kThreads, 0);
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([this, i, &won] {
      auto r = this->Acquire("hot", "t" + std::to_string(i), 60000);
      if (r.ok() && r->acquired) won[i] = 1;
    });
  }
  for (auto& t : threads) t.join();
  int total = 0;
  for (int w : won) total += w;
  EXPECT_EQ(total, 1);
}

// L8: a retried acquire with the holder's owner and request_id answers the same grant again —
// held, or lapsed and not taken over — and writes nothing; replay_only never grants.
TYPED_TEST(LockConformance, RequestIdReplaysTheGrantUntilSomeoneElseTakesOver) {
  auto acquire = [&](const std::string& owner, std::optional<std::string> rid,
                     bool replay_only = false) {
    auto r = this->S().acquire_lock({this->Ref("l"), owner, 5000, std::move(rid), replay_only});
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? *r : AcquireLockReply{};
  };
  auto first = acquire("A", "r1");
  ASSERT_TRUE(first.acquired);
  EXPECT_FALSE(first.replayed);
  EXPECT_EQ(first.record.request_id, "r1");
  this->clock_.advance(1000);
  auto again = acquire("A", "r1");
  EXPECT_TRUE(again.acquired);
  EXPECT_TRUE(again.replayed);
  EXPECT_TRUE(again.record.replayed) << "L9: the grant is marked";
  again.record.replayed = false;
  EXPECT_EQ(again.record, first.record) << "same token, lease unchanged";
  EXPECT_TRUE(acquire("A", "r1", /*replay_only=*/true).replayed);
  // Another request_id of the same owner, or another owner, is an ordinary (busy) acquire.
  EXPECT_FALSE(acquire("A", "r2").acquired);
  EXPECT_FALSE(acquire("B", "r1").acquired);
  EXPECT_FALSE(acquire("A", std::nullopt).acquired);
  // Lapsed and not taken over: still replayed, with the (past) lease end.
  this->clock_.advance(10000);
  auto lapsed = acquire("A", "r1");
  EXPECT_TRUE(lapsed.replayed);
  EXPECT_EQ(lapsed.record.token, first.record.token);
  EXPECT_EQ(lapsed.record.lease_expires_at, first.record.lease_expires_at);
  // replay_only on a lapsed lock with another request_id grants nothing.
  auto probe = acquire("B", "r9", /*replay_only=*/true);
  EXPECT_FALSE(probe.acquired);
  EXPECT_EQ(probe.record.token, 0) << "no live holder to report";
  auto s = this->S().get_lock(this->Ref("l"));
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->holder.has_value());
  // Taken over: r1 matches nothing any more.
  auto b = acquire("B", "r2");
  ASSERT_TRUE(b.acquired);
  EXPECT_FALSE(b.replayed);
  EXPECT_GT(b.record.token, first.record.token);
  auto late = acquire("A", "r1");
  EXPECT_FALSE(late.acquired);
  EXPECT_EQ(late.record.owner, "B");
}

// L9: a release made for a client that went away (the service's W5/D3) keeps a grant that a
// replay answered meanwhile — the client's retry holds it; otherwise it releases as usual.
TYPED_TEST(LockConformance, AReleaseForAGoneClientKeepsAGrantItsRetryWasAnswered) {
  auto acquire = [&](const std::string& rid) {
    auto r = this->S().acquire_lock({this->Ref("l"), "A", 5000, rid});
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? *r : AcquireLockReply{};
  };
  auto held = [&] {
    auto s = this->S().get_lock(this->Ref("l"));
    EXPECT_TRUE(s.ok());
    return s.ok() && s->holder ? s->holder->token : 0;
  };
  // Nobody was answered the grant: the release for the gone client ends it.
  auto unanswered = acquire("r1");
  ASSERT_TRUE(unanswered.acquired);
  ASSERT_TRUE(this->S().release_lock({this->Ref("l"), unanswered.record.token, true}).ok());
  EXPECT_EQ(held(), 0);
  // The retry was answered the grant first: the release for the gone client changes nothing.
  auto granted = acquire("r2");
  ASSERT_TRUE(granted.acquired);
  auto retry = acquire("r2");
  ASSERT_TRUE(retry.replayed);
  ASSERT_TRUE(this->S().release_lock({this->Ref("l"), granted.record.token, true}).ok());
  EXPECT_EQ(held(), granted.record.token) << "the retry was told it holds this grant";
  auto busy = this->Acquire("l", "B");
  ASSERT_TRUE(busy.ok());
  EXPECT_FALSE(busy->acquired);
  // The holder's own release ends it as always, and the next grant starts unmarked.
  ASSERT_TRUE(this->S().release_lock({this->Ref("l"), granted.record.token}).ok());
  EXPECT_EQ(held(), 0);
  auto next = acquire("r2");
  ASSERT_TRUE(next.acquired);
  EXPECT_FALSE(next.replayed);
  EXPECT_FALSE(next.record.replayed);
  ASSERT_TRUE(this->S().release_lock({this->Ref("l"), next.record.token, true}).ok());
  EXPECT_EQ(held(), 0);
  // Another token is still not_holder for a release for a gone client.
  ExpectError(this->S().release_lock({this->Ref("l"), next.record.token, true}), errc::not_holder);
}

// Only stores that keep data across a reopen run this part.
template <class F>
class DurableLockConformance : public LockConformance<F> {};
using DurableFactories = ::testing::Types<SqliteFactory, PgFactory>;
TYPED_TEST_SUITE(DurableLockConformance, DurableFactories, FactoryName);

TYPED_TEST(DurableLockConformance, HeldLockAndTokenSequenceSurviveReopen) {
  auto g = this->MustAcquire("l", "A", 10000);
  this->Reopen();
  auto s = this->S().get_lock(this->Ref("l"));
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s->holder.has_value());
  EXPECT_EQ(*s->holder, g);
  auto busy = this->Acquire("l", "B");
  ASSERT_TRUE(busy.ok());
  EXPECT_FALSE(busy->acquired);
  this->clock_.advance(10000);
  auto b = this->MustAcquire("l", "B");
  EXPECT_GT(b.token, g.token);
  ASSERT_TRUE(this->S().release_lock({this->Ref("l"), b.token}).ok());
  this->Reopen();
  auto c = this->MustAcquire("other", "C");
  EXPECT_GT(c.token, b.token);
}

TYPED_TEST(DurableLockConformance, ARequestIdSurvivesReopen) {
  auto g = this->S().acquire_lock({this->Ref("l"), "A", 10000, "r1"});
  ASSERT_TRUE(g.ok() && g->acquired);
  this->Reopen();
  auto again = this->S().acquire_lock({this->Ref("l"), "A", 10000, "r1"});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->replayed);
  EXPECT_TRUE(again->record.replayed);
  again->record.replayed = false;
  EXPECT_EQ(again->record, g->record);
  // The mark (L9) is durable too.
  this->Reopen();
  ASSERT_TRUE(this->S().release_lock({this->Ref("l"), g->record.token, true}).ok());
  auto s = this->S().get_lock(this->Ref("l"));
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->holder.has_value()) << "a replayed grant survives a release for a gone client";
}

}  // namespace
}  // namespace ichido::store_testing
