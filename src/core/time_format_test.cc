// format_rfc3339 (base/clock.cc) writes its digits by hand; it must agree with the printf
// formatting it replaced on every kind of instant, and keep the fallback for odd years.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "ichido/clock.h"

namespace ichido {
namespace {

std::string by_printf(TimeMs t) {
  const std::time_t secs = static_cast<std::time_t>((t >= 0 ? t : t - 999) / 1000);
  const int ms = static_cast<int>(((t % 1000) + 1000) % 1000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  return buf;
}

TEST(FormatRfc3339, KnownInstants) {
  EXPECT_EQ(format_rfc3339(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(format_rfc3339(1796066649724), "2026-11-30T19:24:09.724Z");
  EXPECT_EQ(format_rfc3339(951782400000 - 1), "2000-02-28T23:59:59.999Z");
  EXPECT_EQ(format_rfc3339(951868800000), "2000-03-01T00:00:00.000Z");
  EXPECT_EQ(format_rfc3339(253402300799999), "9999-12-31T23:59:59.999Z");
  EXPECT_EQ(format_rfc3339(-1), "1969-12-31T23:59:59.999Z");
}

TEST(FormatRfc3339, AgreesWithGmtimeOnRandomInstants) {
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<TimeMs> any(-62135596800000, 253402300799999);  // 0001..9999
  for (int i = 0; i < 200000; ++i) {
    const TimeMs t = any(rng);
    ASSERT_EQ(format_rfc3339(t), by_printf(t)) << t;
  }
}

// The date of the last day formatted is kept per thread: instants that stay in one day, cross
// midnight, come back to an earlier day, or leave the years it keeps, in every order.
TEST(FormatRfc3339, AgreesWithGmtimeWhenInstantsShareADayOrAlternate) {
  std::mt19937_64 rng(7);
  const TimeMs midnight = 1796083200000;  // 2026-12-01T00:00:00.000Z
  const TimeMs days[] = {midnight - 86'400'000,
                         midnight,
                         midnight + 86'400'000,
                         0,
                         253402214400000 /* 9999-12-31 */,
                         -86'400'000,
                         253402300800000};
  for (int i = 0; i < 200000; ++i) {
    const TimeMs day = days[rng() % 7 < 4 ? (i / 1000) % 3 : rng() % 7];
    const TimeMs t = day + static_cast<TimeMs>(rng() % 86'400'000);
    ASSERT_EQ(format_rfc3339(t), by_printf(t)) << t;
  }
  for (TimeMs t = midnight - 3; t < midnight + 3; ++t) ASSERT_EQ(format_rfc3339(t), by_printf(t));
}

TEST(FormatRfc3339, TheBufferFormWritesTheSameTextOutsideFourDigitYearsToo) {
  char buf[kRfc3339Max];
  for (TimeMs t : {TimeMs{0}, TimeMs{1796066649724}, TimeMs{-1}, TimeMs{253402300800000},
                   TimeMs{-62135596800001}}) {
    EXPECT_EQ(format_rfc3339(t, buf), format_rfc3339(t)) << t;
    EXPECT_EQ(format_rfc3339(t, buf), by_printf(t)) << t;
  }
}

}  // namespace
}  // namespace ichido
