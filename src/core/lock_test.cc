#include "core/lock.h"

#include <gtest/gtest.h>

namespace ichido::core {
namespace {

constexpr TimeMs kT0 = 1'780'000'000'000;

LockRecord held_by(std::int64_t token, TimeMs lease_end) {
  return LockRecord{"l", "a", token, kT0, lease_end};
}

TEST(LockRules, AcquireGrantsWhenFree) {
  EXPECT_EQ(decide_acquire(std::nullopt, kT0, "a", std::nullopt), AcquireVerdict::grant);
}

TEST(LockRules, AcquireIsBusyWhileTheLeaseIsLive) {
  auto r = held_by(7, kT0 + 1000);
  EXPECT_EQ(decide_acquire(r, kT0, "b", std::nullopt), AcquireVerdict::busy);
  EXPECT_EQ(decide_acquire(r, kT0 + 999, "b", std::nullopt), AcquireVerdict::busy);
}

TEST(LockRules, LeaseEndIsExclusive) {
  // L3: held exactly while the lease is live (lease_live_at: now < lease_expires_at); at the
  // lease end it is free.
  auto r = held_by(7, kT0 + 1000);
  EXPECT_TRUE(is_held(r, kT0 + 999));
  EXPECT_FALSE(is_held(r, kT0 + 1000));
  EXPECT_FALSE(is_held(r, kT0 + 1001));
  EXPECT_FALSE(is_held(std::nullopt, kT0));
  for (const TimeMs now : {kT0 + 999, kT0 + 1000, kT0 + 1001}) {
    EXPECT_EQ(is_held(r, now), on_side(LeaseSide::live, r.lease_expires_at, now));
    EXPECT_NE(is_held(r, now), on_side(LeaseSide::lapsed, r.lease_expires_at, now));
    EXPECT_TRUE(on_side(LeaseSide::any, r.lease_expires_at, now));
  }
  EXPECT_EQ(decide_acquire(r, kT0 + 999, "b", std::nullopt), AcquireVerdict::busy);
  EXPECT_EQ(decide_acquire(r, kT0 + 1000, "b", std::nullopt), AcquireVerdict::grant);
}

TEST(LockRules, GrantRecordsOwnerTokenAndLease) {
  auto g = make_grant("l", "script-A", 42, 30000, kT0, "req-1");
  EXPECT_EQ(g.name, "l");
  EXPECT_EQ(g.owner, "script-A");
  EXPECT_EQ(g.token, 42);
  EXPECT_EQ(g.acquired_at, kT0);
  EXPECT_EQ(g.lease_expires_at, kT0 + 30000);
  EXPECT_EQ(g.request_id, "req-1");
}

// L8: the same owner and request_id replay the current grant, held or lapsed; anything else is
// an ordinary acquire.
TEST(LockRules, SameOwnerAndRequestIdReplayTheGrantHeldOrLapsed) {
  auto r = held_by(7, kT0 + 1000);
  r.request_id = "req-1";
  EXPECT_EQ(decide_acquire(r, kT0, "a", "req-1"), AcquireVerdict::replay);
  EXPECT_EQ(decide_acquire(r, kT0 + 5000, "a", "req-1"), AcquireVerdict::replay);  // lapsed
  EXPECT_EQ(decide_acquire(r, kT0, "a", "req-2"), AcquireVerdict::busy);
  EXPECT_EQ(decide_acquire(r, kT0, "b", "req-1"), AcquireVerdict::busy);  // another owner
  EXPECT_EQ(decide_acquire(r, kT0, "a", std::nullopt), AcquireVerdict::busy);
  EXPECT_EQ(decide_acquire(r, kT0 + 5000, "a", "req-2"), AcquireVerdict::grant);
  auto without = held_by(7, kT0 + 1000);  // a grant made without request_id matches none
  EXPECT_EQ(decide_acquire(without, kT0, "a", "req-1"), AcquireVerdict::busy);
  EXPECT_EQ(decide_acquire(std::nullopt, kT0, "a", "req-1"), AcquireVerdict::grant);
}

TEST(LockRules, ReleaseNeedsTheCurrentToken) {
  auto r = held_by(7, kT0 + 1000);
  EXPECT_TRUE(decide_release(r, 7).ok());
  auto wrong = decide_release(r, 6);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().code, errc::not_holder);
  EXPECT_EQ(std::get<std::int64_t>(wrong.error().details.at("token")), 6);
  auto none = decide_release(std::nullopt, 7);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, errc::not_holder);
}

TEST(LockRules, LapsedHolderMayStillReleaseAndRenew) {
  auto r = held_by(7, kT0 + 1000);
  EXPECT_TRUE(decide_release(r, 7).ok());
  auto renewed = decide_renew(r, 7, 5000, kT0 + 60000);
  ASSERT_TRUE(renewed.ok());
  EXPECT_EQ(renewed->token, 7);
  EXPECT_EQ(renewed->lease_expires_at, kT0 + 65000);
  EXPECT_TRUE(is_held(*renewed, kT0 + 60000));
}

TEST(LockRules, RenewKeepsTokenAndMovesLeaseFromNow) {
  auto r = held_by(7, kT0 + 1000);
  auto renewed = decide_renew(r, 7, 2000, kT0 + 500);
  ASSERT_TRUE(renewed.ok());
  EXPECT_EQ(renewed->token, 7);
  EXPECT_EQ(renewed->acquired_at, r.acquired_at);
  EXPECT_EQ(renewed->lease_expires_at, kT0 + 2500);
}

TEST(LockRules, RenewWithAnotherTokenIsNotHolder) {
  auto r = held_by(7, kT0 + 1000);
  auto bad = decide_renew(r, 8, 2000, kT0);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, errc::not_holder);
  auto none = decide_renew(std::nullopt, 8, 2000, kT0);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, errc::not_holder);
}

TEST(LockRules, RenewChecksTheLeaseBeforeTheToken) {
  auto bad = decide_renew(std::nullopt, 8, 999, kT0);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, errc::invalid_request);
  EXPECT_EQ(bad.error().field, "lease_ms");
}

TEST(LockRules, LimitsOfLeaseWaitAndOwner) {
  EXPECT_FALSE(validate_lease_ms(999).ok());
  EXPECT_TRUE(validate_lease_ms(1000).ok());
  EXPECT_TRUE(validate_lease_ms(3600000).ok());
  EXPECT_EQ(validate_lease_ms(3600001).error().field, "lease_ms");
  EXPECT_TRUE(validate_wait_ms(0).ok());
  EXPECT_TRUE(validate_wait_ms(300000).ok());
  EXPECT_EQ(validate_wait_ms(300001).error().field, "wait_ms");
  EXPECT_EQ(validate_wait_ms(-1).error().field, "wait_ms");
  EXPECT_TRUE(validate_lock_owner("").ok());
  EXPECT_TRUE(validate_lock_owner("経理-スクリプト").ok());
  EXPECT_EQ(validate_lock_owner(std::string(257, 'a')).error().field, "owner");
  EXPECT_EQ(validate_lock_owner(std::string("a\0b", 3)).error().field, "owner");
  EXPECT_EQ(validate_lock_owner("\xff").error().field, "owner");
}

}  // namespace
}  // namespace ichido::core
