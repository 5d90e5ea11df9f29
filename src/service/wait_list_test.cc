#include "service/wait_list.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <optional>
#include <string>
#include <vector>

namespace ichido::service {
namespace {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;

TEST(WaitList, NotifyOneServesWaitersInArrivalOrder) {
  asio::io_context ioc;
  WaitList list(100, 1000);
  std::vector<int> woken;
  const auto far = clock::now() + std::chrono::hours(1);
  for (int i = 0; i < 3; ++i) {
    asio::co_spawn(
        ioc,
        [&, i]() -> asio::awaitable<void> {
          auto r = co_await list.wait("lock-a", far, list.generation("lock-a"));
          if (r.ok() && *r == WakeReason::notified) woken.push_back(i);
        },
        asio::detached);
  }
  ioc.poll();  // all three are parked now
  ASSERT_EQ(list.waiting("lock-a"), 3u);
  EXPECT_FALSE(list.notify_one("other"));
  for (int n = 1; n <= 3; ++n) {
    ASSERT_TRUE(list.notify_one("lock-a"));
    ioc.poll();
    ASSERT_EQ(woken.size(), static_cast<std::size_t>(n));
  }
  EXPECT_EQ(woken, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(list.total(), 0u);
}

TEST(WaitList, DeadlineInThePastTimesOutAndLeavesTheQueue) {
  asio::io_context ioc;
  WaitList list(100, 1000);
  std::optional<WakeReason> reason;
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        auto r = co_await list.wait("k", clock::now() - std::chrono::milliseconds(1),
                                    list.generation("k"));
        if (r.ok()) reason = *r;
      },
      asio::detached);
  ioc.run();
  ASSERT_TRUE(reason.has_value());
  EXPECT_EQ(*reason, WakeReason::timed_out);
  EXPECT_EQ(list.total(), 0u);
  EXPECT_FALSE(list.notify_one("k"));
}

TEST(WaitList, NotifyAllWakesEveryoneAndLimitsAreEnforced) {
  asio::io_context ioc;
  WaitList list(2, 3);
  int notified = 0;
  std::vector<errc> refused;
  const auto far = clock::now() + std::chrono::hours(1);
  auto spawn = [&](std::string key) {
    asio::co_spawn(
        ioc,
        [&, key]() -> asio::awaitable<void> {
          auto r = co_await list.wait(key, far, list.generation(key));
          if (!r.ok())
            refused.push_back(r.error().code);
          else if (*r == WakeReason::notified)
            ++notified;
        },
        asio::detached);
  };
  spawn("a");
  spawn("a");
  spawn("a");  // over the per-key limit
  spawn("b");
  spawn("c");  // over the total limit
  ioc.poll();
  EXPECT_EQ(refused, (std::vector<errc>{errc::too_many_waiters, errc::too_many_waiters}));
  EXPECT_EQ(list.notify_all("a"), 2u);
  EXPECT_EQ(list.notify_all("b"), 1u);
  ioc.poll();
  EXPECT_EQ(notified, 3);
  EXPECT_EQ(list.total(), 0u);
}

TEST(WaitList, NotificationBetweenReadingTheGenerationAndParkingIsNotLost) {
  asio::io_context ioc;
  WaitList list(100, 1000);
  const auto seen = list.generation("k");
  // The holder finishes after the waiter looked at the record but before it parked.
  EXPECT_EQ(list.notify_all("k"), 0u);
  std::optional<WakeReason> reason;
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        // A bounded deadline, so that a lost notification fails the test (timed_out) instead of
        // hanging it.
        auto r = co_await list.wait("k", clock::now() + std::chrono::seconds(5), seen);
        if (r.ok()) reason = *r;
      },
      asio::detached);
  ioc.run();
  ASSERT_TRUE(reason.has_value());
  EXPECT_EQ(*reason, WakeReason::notified);
  EXPECT_EQ(list.total(), 0u);
}

TEST(WaitList, UnchangedGenerationParksUntilNotified) {
  asio::io_context ioc;
  WaitList list(100, 1000);
  std::optional<WakeReason> reason;
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        auto r =
            co_await list.wait("k", clock::now() + std::chrono::hours(1), list.generation("k"));
        if (r.ok()) reason = *r;
      },
      asio::detached);
  ioc.poll();
  EXPECT_FALSE(reason.has_value());
  EXPECT_EQ(list.waiting("k"), 1u);
  EXPECT_TRUE(list.notify_one("k"));
  ioc.poll();
  ASSERT_TRUE(reason.has_value());
  EXPECT_EQ(*reason, WakeReason::notified);
}

// Another node's change whose exact key is unknown (decision 075): the oldest waiter of each
// matching key wakes, and one that waits again with `front` keeps its place.
TEST(WaitList, NotifyFrontOfEachWakesTheOldestOfEachMatchingKeyAndFrontKeepsThePlace) {
  asio::io_context ioc;
  WaitList list(100, 1000);
  std::vector<std::string> woken;
  const auto far = clock::now() + std::chrono::hours(1);
  auto spawn = [&](std::string key, std::string who) {
    asio::co_spawn(
        ioc,
        [&, key, who]() -> asio::awaitable<void> {
          auto r = co_await list.wait(key, far, list.generation(key));
          if (!r.ok() || *r != WakeReason::notified) co_return;
          woken.push_back(who);
          // It found nothing for it: it waits again, in its old place.
          r = co_await list.wait(key, far, list.generation(key), /*front=*/true);
          if (r.ok() && *r == WakeReason::notified) woken.push_back(who + " again");
        },
        asio::detached);
  };
  spawn(std::string("ns1\0a", 5), "a1");
  spawn(std::string("ns1\0a", 5), "a2");
  spawn(std::string("ns1\0b", 5), "b1");
  spawn(std::string("ns2\0a", 5), "c1");
  ioc.poll();
  const std::uint64_t gen_before = list.generation("anything");
  EXPECT_EQ(list.notify_front_of_each(std::string("ns1\0", 4)), 2u);
  EXPECT_NE(list.generation("anything"), gen_before);  // every generation moved
  ioc.poll();
  std::sort(woken.begin(), woken.end());
  EXPECT_EQ(woken, (std::vector<std::string>{"a1", "b1"}));
  EXPECT_EQ(list.total(), 4u);  // a1 and b1 parked again
  woken.clear();
  ASSERT_TRUE(list.notify_one(std::string("ns1\0a", 5)));
  ioc.poll();
  EXPECT_EQ(woken, (std::vector<std::string>{"a1 again"}));  // still first in line
  woken.clear();
  EXPECT_EQ(list.notify_front_of_each(""), 3u);  // a2, b1, c1
  ioc.poll();
  EXPECT_EQ(woken.size(), 3u);
  list.shutdown();
  ioc.poll();
}

// shorten(): waiters parked past the new deadline wake at it (timed_out), keeping their places
// until then; one parked until earlier is left alone; a waiter whose client goes away after its
// deadline moved is still told `cancelled`.
TEST(WaitList, ShortenMovesLaterDeadlinesEarlierOnly) {
  asio::io_context ioc;
  WaitList list(100, 1000);
  std::vector<std::optional<WakeReason>> reasons(3);
  asio::cancellation_signal gone;
  const auto far = clock::now() + std::chrono::hours(1);
  const auto near = clock::now() + std::chrono::hours(1) - std::chrono::minutes(1);
  for (int i = 0; i < 3; ++i) {
    auto body = [&, i]() -> asio::awaitable<void> {
      auto r = co_await list.wait("k", i == 1 ? near : far, list.generation("k"));
      if (r.ok()) reasons[i] = *r;
    };
    if (i == 2) {
      asio::co_spawn(ioc, body, asio::bind_cancellation_slot(gone.slot(), asio::detached));
    } else {
      asio::co_spawn(ioc, body, asio::detached);
    }
  }
  ioc.poll();
  ASSERT_EQ(list.waiting("k"), 3u);
  // Moved, but still in the future: nobody wakes, and the places are kept.
  EXPECT_EQ(list.shorten("k", far - std::chrono::seconds(1)), 2u);  // not the one parked nearer
  ioc.poll();
  EXPECT_EQ(list.waiting("k"), 3u);
  EXPECT_FALSE(reasons[0] || reasons[1] || reasons[2]);
  gone.emit(asio::cancellation_type::terminal);
  ioc.poll();
  EXPECT_EQ(reasons[2], WakeReason::cancelled);
  // Moved to the past: both left wake now, timed out.
  EXPECT_EQ(list.shorten("k", clock::now() - std::chrono::milliseconds(1)), 2u);
  ioc.poll();
  EXPECT_EQ(reasons[0], WakeReason::timed_out);
  EXPECT_EQ(reasons[1], WakeReason::timed_out);
  EXPECT_EQ(list.total(), 0u);
}

}  // namespace
}  // namespace ichido::service
