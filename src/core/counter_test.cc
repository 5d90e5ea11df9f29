// Tests of the counter rulebook (core/counter): formats, periods, config validation and the pure
// decisions behind create / next / void / set. Time is always an explicit `now`.
#include "core/counter.h"

#include <date/date.h>
#include <date/tz.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <variant>
#include <vector>

namespace ichido::core {
namespace {

using namespace std::chrono_literals;

TimeMs At(int y, unsigned m, unsigned d, int hh = 0, int mm = 0, int ss = 0) {
  const auto tp = date::sys_days{date::year{y} / date::month{m} / date::day{d}} +
                  std::chrono::hours{hh} + std::chrono::minutes{mm} + std::chrono::seconds{ss};
  return std::chrono::duration_cast<std::chrono::milliseconds>(tp.time_since_epoch()).count();
}

// 2026-12-31T15:30:00Z is already 2027-01-01 00:30 in Tokyo (UTC+9).
const TimeMs kNewYearInTokyo = At(2026, 12, 31, 15, 30);

template <class T>
void ExpectError(const Result<T>& r, errc code, const std::string& field = "") {
  ASSERT_FALSE(r.ok()) << "expected " << to_string(code);
  EXPECT_EQ(r.error().code, code) << "got " << to_string(r.error().code) << ": "
                                  << r.error().message;
  EXPECT_EQ(r.error().field, field);
  EXPECT_FALSE(r.error().message.empty());
}

std::int64_t DetailInt(const Error& e, const std::string& k) {
  auto it = e.details.find(k);
  if (it == e.details.end()) {
    ADD_FAILURE() << "no details." << k;
    return -1;
  }
  if (!std::holds_alternative<std::int64_t>(it->second)) {
    ADD_FAILURE() << "details." << k << " is not an integer";
    return -1;
  }
  return std::get<std::int64_t>(it->second);
}

std::string Render(std::string_view format, std::int64_t v, LocalDate d = {2026, 4, 1}) {
  auto pieces = parse_format(format);
  if (!pieces.ok()) {
    ADD_FAILURE() << "format " << format << " rejected: " << pieces.error().message;
    return "";
  }
  return render(*pieces, v, d);
}

void ExpectSameRecord(const IssuedNumber& a, const IssuedNumber& b) {
  EXPECT_EQ(a.value, b.value);
  EXPECT_EQ(a.formatted, b.formatted);
  EXPECT_EQ(a.period, b.period);
  EXPECT_EQ(a.key, b.key);
  EXPECT_EQ(a.note, b.note);
  EXPECT_EQ(a.issued_at, b.issued_at);
  EXPECT_EQ(a.voided_at, b.voided_at);
  EXPECT_EQ(a.void_reason, b.void_reason);
}

// --- formats -------------------------------------------------------------------------------

TEST(Format, RendersLikePrintfForAnyValueWidthAndDate) {
  using K = FormatPiece::Kind;
  std::mt19937_64 rng(15);
  char want[128];
  for (int i = 0; i < 100000; ++i) {
    const int width = static_cast<int>(rng() % 21);
    std::int64_t v = static_cast<std::int64_t>(rng() >> (rng() % 64));
    if (rng() % 4 == 0) v = -v;
    if (i == 0) v = std::numeric_limits<std::int64_t>::min();
    const LocalDate d{static_cast<int>(rng() % 20001) - 10000, static_cast<unsigned>(rng() % 13),
                      static_cast<unsigned>(rng() % 32)};
    std::vector<FormatPiece> pieces{{K::literal, "R-", 0}, {K::seq, "", width}, {K::yyyy, "", 0},
                                    {K::yy, "", 0},        {K::mm, "", 0},      {K::dd, "", 0}};
    std::snprintf(want, sizeof want, "R-%0*lld%04d%02d%02u%02u", width, static_cast<long long>(v),
                  d.year, d.year % 100, d.month, d.day);
    ASSERT_EQ(render(pieces, v, d), want) << v << " width " << width;
    std::snprintf(want, sizeof want, "%04d", d.year);
    ASSERT_EQ(period_label(Period::year, d), want);
    std::snprintf(want, sizeof want, "%04d-%02u", d.year, d.month);
    ASSERT_EQ(period_label(Period::month, d), want);
    std::snprintf(want, sizeof want, "%04d-%02u-%02u", d.year, d.month, d.day);
    ASSERT_EQ(period_label(Period::day, d), want);
    ASSERT_EQ(period_label(Period::none, d), "");
  }
}

TEST(Format, RendersSeqPaddedAndPlain) {
  EXPECT_EQ(Render("R-{seq:4}", 1), "R-0001");
  EXPECT_EQ(Render("R-{seq:4}", 42), "R-0042");
  EXPECT_EQ(Render("{seq}", 7), "7");
  EXPECT_EQ(Render("{seq}", 9007199254740992), "9007199254740992");
  EXPECT_EQ(Render("{seq:1}", 5), "5");
  EXPECT_EQ(Render("{seq:18}", 5), "000000000000000005");
  EXPECT_EQ(Render("{seq:04}", 5), "0005");  // a leading zero in N is still N = 4
}

TEST(Format, ValueWiderThanPadIsNotTruncated) {
  EXPECT_EQ(Render("R-{seq:4}", 12345), "R-12345");
  EXPECT_EQ(Render("{seq:2}", 100), "100");
}

TEST(Format, RendersDatePlaceholders) {
  EXPECT_EQ(Render("{yyyy}-{mm}-{dd}/{seq:3}", 9, {2026, 4, 1}), "2026-04-01/009");
  EXPECT_EQ(Render("INV{yy}{mm}-{seq}", 12, {2027, 11, 30}), "INV2711-12");
  EXPECT_EQ(Render("{yy}-{seq}", 1, {2007, 1, 9}), "07-1");
  EXPECT_EQ(Render("{seq}{seq:3}", 4), "4004");  // several seq placeholders are allowed
}

TEST(Format, DoubledBracesAreLiteral) {
  EXPECT_EQ(Render("{{{seq}}}", 3), "{3}");
  EXPECT_EQ(Render("a{{b}}c-{seq}", 3), "a{b}c-3");
}

TEST(Format, ParsesIntoPieces) {
  auto p = parse_format("R-{seq:4}/{yyyy}");
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->size(), 4u);
  EXPECT_EQ((*p)[0].kind, FormatPiece::Kind::literal);
  EXPECT_EQ((*p)[0].text, "R-");
  EXPECT_EQ((*p)[1].kind, FormatPiece::Kind::seq);
  EXPECT_EQ((*p)[1].width, 4);
  EXPECT_EQ((*p)[2].kind, FormatPiece::Kind::literal);
  EXPECT_EQ((*p)[2].text, "/");
  EXPECT_EQ((*p)[3].kind, FormatPiece::Kind::yyyy);
}

TEST(Format, RejectsBadFormatsWithFieldFormat) {
  for (const char* bad : {
           "R-{yyyy}",    // no {seq}
           "plain text",  // no {seq}
           "",            // no {seq}
           "{{seq}}",     // literal braces, so no {seq}
           "{seq:0}",     // width 0
           "{seq:19}",    // width above 18
           "{seq:100}",   // width above 18 (and three digits)
           "{seq:}",      // no width
           "{seq:x}",     // not a number
           "{seq:-1}",    // not a number
           "{seq: 4}",    // not a number
           "{hh}-{seq}",  // unknown placeholder
           "{}{seq}",     // empty placeholder
           "{SEQ}",       // placeholders are case-sensitive
           "R-{seq",      // unclosed brace
           "R-{",         // unclosed brace
           "R-}{seq}",    // lone closing brace
           "{seq}}",      // lone closing brace after a placeholder
       }) {
    SCOPED_TRACE(bad);
    ExpectError(parse_format(bad), errc::invalid_request, "format");
  }
}

TEST(Format, LengthLimit) {
  const std::string ok = std::string(kMaxFormatBytes - 5, 'x') + "{seq}";
  ASSERT_EQ(ok.size(), kMaxFormatBytes);
  EXPECT_TRUE(parse_format(ok).ok());
  ExpectError(parse_format("x" + ok), errc::invalid_request, "format");
}

void ExpectSamePieces(const std::vector<FormatPiece>& a, const std::vector<FormatPiece>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].kind, b[i].kind) << i;
    EXPECT_EQ(a[i].text, b[i].text) << i;
    EXPECT_EQ(a[i].width, b[i].width) << i;
  }
}

TEST(FormatCache, AHitIsTheSameParseAndEveryFormatGetsItsOwnPieces) {
  // More formats than the cache holds, in turns, so entries are dropped and parsed again: every
  // answer must still be the parse of exactly the text asked for.
  const std::size_t n = 3 * kFormatCacheEntries + 7;
  for (int round = 0; round < 3; ++round) {
    for (std::size_t i = 0; i < n; ++i) {
      const std::string f = "F" + std::to_string(i) + "-{seq:" + std::to_string(1 + i % 18) + "}" +
                            (i % 2 ? "/{yyyy}" : "");
      SCOPED_TRACE(f);
      auto cached = parse_format_cached(f);
      ASSERT_TRUE(cached.ok());
      auto fresh = parse_format(f);
      ASSERT_TRUE(fresh.ok());
      ExpectSamePieces(**cached, *fresh);
      auto again = parse_format_cached(f);  // a hit: the very same entry
      ASSERT_TRUE(again.ok());
      EXPECT_EQ(*again, *cached);
    }
  }
}

TEST(FormatCache, ABadFormatIsRefusedEveryTimeAndNotCached) {
  for (int i = 0; i < 3; ++i) {
    ExpectError(parse_format_cached("R-{"), errc::invalid_request, "format");
    ExpectError(parse_format_cached("{hh}-{seq}"), errc::invalid_request, "format");
  }
  auto ok = parse_format_cached("R-{seq}");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((*ok)->size(), 2u);
}

TEST(FormatCache, NextAndVoidOfCountersWithDifferentFormatsNeverMixThem) {
  const TimeMs now = At(2026, 4, 1, 9);
  CounterConfig a;
  a.format = "A-{seq:3}";
  CounterConfig b;
  b.format = "B{yyyy}-{seq}";
  CounterConfig a2 = a;  // the same text, another counter: shares the entry, same answer
  auto ta = today(a, now);
  auto tb = today(b, now);
  ASSERT_TRUE(ta.ok() && tb.ok());
  for (std::int64_t v = 0; v < 5; ++v) {
    auto da = decide_next(a, *ta, v, std::nullopt, NextCommand{}, now);
    auto db = decide_next(b, *tb, v, std::nullopt, NextCommand{}, now);
    auto da2 = decide_next(a2, *ta, v + 100, std::nullopt, NextCommand{}, now);
    ASSERT_TRUE(da.ok() && db.ok() && da2.ok());
    char want_a[16];
    std::snprintf(want_a, sizeof want_a, "A-%03lld", static_cast<long long>(v + 1));
    EXPECT_EQ(da->record.formatted, want_a);
    EXPECT_EQ(db->record.formatted, "B2026-" + std::to_string(v + 1));
    EXPECT_EQ(da2->record.formatted, "A-" + std::to_string(v + 101));
  }
  // A value skipped by `set` and then voided is rendered with its own counter's format too.
  auto vb = decide_void(b, *tb, 9, std::nullopt, 7, tb->period, "skipped", now);
  ASSERT_TRUE(vb.ok());
  EXPECT_EQ(vb->formatted, "B2026-7");
}

// --- periods -------------------------------------------------------------------------------

TEST(Period, ParseAndName) {
  for (auto p : {Period::none, Period::year, Period::month, Period::day, Period::fiscal_year}) {
    auto parsed = parse_period(to_string(p));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, p);
  }
  ExpectError(parse_period("week"), errc::invalid_request, "period");
  ExpectError(parse_period(""), errc::invalid_request, "period");
  ExpectError(parse_period("Year"), errc::invalid_request, "period");
  ExpectError(parse_period("fiscal"), errc::invalid_request, "period");
  EXPECT_EQ(to_string(Period::fiscal_year), "fiscal_year");
}

TEST(Period, SameInstantIsNewYearInTokyoButNotInUtc) {
  auto tokyo = local_date("Asia/Tokyo", kNewYearInTokyo);
  ASSERT_TRUE(tokyo.ok());
  EXPECT_EQ(period_label(Period::year, *tokyo), "2027");
  EXPECT_EQ(period_label(Period::month, *tokyo), "2027-01");
  EXPECT_EQ(period_label(Period::day, *tokyo), "2027-01-01");
  EXPECT_EQ(period_label(Period::none, *tokyo), "");

  auto utc = local_date("UTC", kNewYearInTokyo);
  ASSERT_TRUE(utc.ok());
  EXPECT_EQ(period_label(Period::year, *utc), "2026");
  EXPECT_EQ(period_label(Period::month, *utc), "2026-12");
  EXPECT_EQ(period_label(Period::day, *utc), "2026-12-31");
  EXPECT_EQ(period_label(Period::none, *utc), "");
}

TEST(Period, TodayUsesTheCountersZoneAndKind) {
  CounterConfig c;
  c.period = Period::month;
  c.timezone = "Asia/Tokyo";
  auto t = today(c, kNewYearInTokyo);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->period, "2027-01");
  EXPECT_EQ(t->date.year, 2027);
  EXPECT_EQ(t->date.month, 1u);
  EXPECT_EQ(t->date.day, 1u);

  c.timezone = "UTC";
  t = today(c, kNewYearInTokyo);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->period, "2026-12");
  EXPECT_EQ(t->date.day, 31u);

  // A zone west of UTC: still the previous day.
  c.timezone = "America/New_York";
  c.period = Period::day;
  t = today(c, At(2027, 1, 1, 3, 0));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->period, "2026-12-31");
}

TEST(Period, BoundaryInstants) {
  auto d = local_date("Asia/Tokyo", At(2026, 12, 31, 14, 59, 59));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(period_label(Period::day, *d), "2026-12-31");
  d = local_date("Asia/Tokyo", At(2026, 12, 31, 15, 0, 0));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(period_label(Period::day, *d), "2027-01-01");
  d = local_date("UTC", At(2028, 2, 29, 23, 59, 59));  // leap day
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(period_label(Period::day, *d), "2028-02-29");
}

// local_date() remembers its last answer with the instants that share it (a memo per thread);
// whatever the order of the questions, it answers what the zone database says. Instants every
// 15 minutes ± 1 ms over three days around every offset change of 2005–2035 in zones with
// unusual ones (DST starting at midnight in São Paulo, 30-minute DST on Lord Howe, Apia skipping
// 30 December 2011, negative DST in Dublin, 45- and 30-minute offsets), asked in time order
// (the memo answers most) and then shuffled across zones.
TEST(Period, LocalDateIsTheZoneDatabasesForEveryInstant) {
  using std::chrono::milliseconds;
  const char* zones[] = {"UTC",           "Asia/Tokyo",          "America/New_York",
                         "Europe/London", "Australia/Lord_Howe", "America/Sao_Paulo",
                         "Pacific/Apia",  "Asia/Kathmandu",      "America/St_Johns",
                         "Europe/Dublin"};
  const auto reference = [](const char* tz, TimeMs now) {
    const auto local =
        date::locate_zone(tz)->to_local(date::sys_time<milliseconds>{milliseconds{now}});
    const date::year_month_day ymd{date::floor<date::days>(local)};
    return LocalDate{int(ymd.year()), unsigned(ymd.month()), unsigned(ymd.day())};
  };
  constexpr TimeMs kQuarter = 15 * 60 * 1000;
  constexpr TimeMs kDay = 24 * 60 * 60 * 1000;
  std::vector<std::pair<const char*, TimeMs>> questions;
  for (const char* tz : zones) {
    const auto* zone = date::locate_zone(tz);
    std::vector<TimeMs> changes = {At(2005, 1, 1), At(2020, 6, 15, 12)};  // UTC has none
    for (auto t = date::sys_seconds{std::chrono::seconds{At(2005, 1, 1) / 1000}};
         t < date::sys_seconds{std::chrono::seconds{At(2035, 1, 1) / 1000}};) {
      t = zone->get_info(t).end;
      changes.push_back(std::chrono::duration_cast<milliseconds>(t.time_since_epoch()).count());
    }
    for (const TimeMs change : changes) {
      for (TimeMs q = change / kQuarter * kQuarter - kDay; q <= change + 2 * kDay; q += kQuarter) {
        for (const TimeMs at : {q - 1, q, q + 1}) questions.emplace_back(tz, at);
      }
    }
  }
  int mismatches = 0;
  const auto ask = [&](const char* tz, TimeMs at) {
    const auto got = local_date(tz, at);
    ASSERT_TRUE(got.ok()) << tz;
    const LocalDate want = reference(tz, at);
    if (got->year != want.year || got->month != want.month || got->day != want.day) {
      if (++mismatches <= 5) {
        ADD_FAILURE() << tz << " at " << at << ": " << got->year << "-" << got->month << "-"
                      << got->day << ", the database says " << want.year << "-" << want.month << "-"
                      << want.day;
      }
    }
  };
  for (const auto& [tz, at] : questions) ask(tz, at);
  std::mt19937_64 rng(15);
  std::shuffle(questions.begin(), questions.end(), rng);
  for (const auto& [tz, at] : questions) ask(tz, at);
  EXPECT_EQ(mismatches, 0) << "of " << 2 * questions.size() << " questions";
  EXPECT_GT(questions.size(), 100000u);
}

TEST(Period, UnknownTimezoneNamesFieldTimezone) {
  ExpectError(local_date("Mars/Olympus_Mons", 0), errc::invalid_request, "timezone");
  ExpectError(local_date("", 0), errc::invalid_request, "timezone");
  ExpectError(local_date(std::string(65, 'A'), 0), errc::invalid_request, "timezone");
  CounterConfig c;
  c.timezone = "Asia/Tokio";
  ExpectError(today(c, 0), errc::invalid_request, "timezone");
}

TEST(Period, IsPeriodLabel) {
  EXPECT_TRUE(is_period_label(Period::none, ""));
  EXPECT_FALSE(is_period_label(Period::none, "2026"));
  EXPECT_TRUE(is_period_label(Period::year, "2026"));
  EXPECT_FALSE(is_period_label(Period::year, "26"));
  EXPECT_FALSE(is_period_label(Period::year, "2026-01"));
  EXPECT_FALSE(is_period_label(Period::year, "20x6"));
  EXPECT_TRUE(is_period_label(Period::month, "2026-04"));
  EXPECT_FALSE(is_period_label(Period::month, "2026/04"));
  EXPECT_FALSE(is_period_label(Period::month, "2026-4"));
  EXPECT_TRUE(is_period_label(Period::day, "2026-04-01"));
  EXPECT_FALSE(is_period_label(Period::day, "2026-04-1x"));
  EXPECT_FALSE(is_period_label(Period::day, "2026-04"));
  EXPECT_TRUE(is_period_label(Period::fiscal_year, "FY2026"));
  EXPECT_FALSE(is_period_label(Period::fiscal_year, "2026"));
  EXPECT_FALSE(is_period_label(Period::fiscal_year, "fy2026"));
  EXPECT_FALSE(is_period_label(Period::fiscal_year, "FY26"));
  EXPECT_FALSE(is_period_label(Period::fiscal_year, "FY2026-04"));
  EXPECT_FALSE(is_period_label(Period::year, "FY2026"));
  // The examples the messages give are labels of their kind.
  for (Period p : {Period::none, Period::year, Period::month, Period::day, Period::fiscal_year}) {
    const std::string_view example = period_label_example(p);
    EXPECT_TRUE(is_period_label(p, p == Period::none ? "" : example)) << example;
  }
}

// --- fiscal years (年度) ----------------------------------------------------------------------

// The counter's fiscal year and label at `now`.
Today FiscalToday(int start_month, std::string zone, TimeMs now) {
  CounterConfig c;
  c.period = Period::fiscal_year;
  c.fiscal_year_start = start_month;
  c.timezone = std::move(zone);
  return today(c, now).value();
}

TEST(FiscalYear, TheJapaneseFiscalYearTurnsAtMidnightOfThe1stOfAprilInTheCountersZone) {
  // 2027-03-31T23:59:59+09:00 and 2027-04-01T00:00:00+09:00 (= 2027-03-31T15:00:00Z).
  const TimeMs last_second = At(2027, 3, 31, 14, 59, 59);
  const TimeMs first_instant = At(2027, 3, 31, 15, 0, 0);
  Today t = FiscalToday(4, "Asia/Tokyo", last_second);
  EXPECT_EQ(t.period, "FY2026");
  EXPECT_EQ(t.fiscal_year, 2026);
  t = FiscalToday(4, "Asia/Tokyo", first_instant - 1);  // the last millisecond
  EXPECT_EQ(t.period, "FY2026");
  t = FiscalToday(4, "Asia/Tokyo", first_instant);
  EXPECT_EQ(t.period, "FY2027");
  EXPECT_EQ(t.fiscal_year, 2027);
  EXPECT_EQ(t.date.month, 4u);
  EXPECT_EQ(t.date.day, 1u);
  // The same instant is still 31 March in UTC: FY2026 there until 2027-04-01T00:00Z.
  EXPECT_EQ(FiscalToday(4, "UTC", first_instant).period, "FY2026");
  EXPECT_EQ(FiscalToday(4, "UTC", At(2027, 3, 31, 23, 59, 59)).period, "FY2026");
  EXPECT_EQ(FiscalToday(4, "UTC", At(2027, 4, 1)).period, "FY2027");
  // The fiscal year that starts in April 2026 runs to the end of March 2027.
  EXPECT_EQ(FiscalToday(4, "Asia/Tokyo", At(2026, 3, 31, 15)).period, "FY2026");
  EXPECT_EQ(FiscalToday(4, "Asia/Tokyo", At(2026, 12, 31, 15)).period, "FY2026");  // 1 Jan 2027
}

TEST(FiscalYear, StartingInJanuaryIsTheCalendarYear) {
  EXPECT_EQ(FiscalToday(1, "Asia/Tokyo", At(2026, 12, 31, 14, 59, 59)).period, "FY2026");
  EXPECT_EQ(FiscalToday(1, "Asia/Tokyo", At(2026, 12, 31, 15)).period, "FY2027");
  for (unsigned m = 1; m <= 12; ++m) {
    EXPECT_EQ(fiscal_year_of(LocalDate{2026, m, 15}, 1), 2026) << m;
  }
}

TEST(FiscalYear, EveryStartMonthTurnsOnItsFirstDayAndEndsTheDayBefore) {
  for (int start = 1; start <= 12; ++start) {
    SCOPED_TRACE(start);
    // The fiscal year that starts on the 1st of `start` in 2026 …
    const LocalDate first{2026, static_cast<unsigned>(start), 1};
    EXPECT_EQ(fiscal_year_of(first, start), 2026);
    EXPECT_EQ(period_label(Period::fiscal_year, first, start), "FY2026");
    // … the day before belongs to the one that started a year earlier (its year-end) …
    const LocalDate eve = start == 1 ? LocalDate{2025, 12, 31}
                                     : LocalDate{2026, static_cast<unsigned>(start - 1), 28};
    EXPECT_EQ(fiscal_year_of(eve, start), 2025);
    EXPECT_EQ(period_label(Period::fiscal_year, eve, start), "FY2025");
    // … and it ends on the last day of the month before `start` a year later.
    const LocalDate last = start == 1 ? LocalDate{2026, 12, 31}
                                      : LocalDate{2027, static_cast<unsigned>(start - 1), 28};
    EXPECT_EQ(fiscal_year_of(last, start), 2026);
  }
  // October (a fiscal year starting in autumn), at the instant in Tokyo.
  EXPECT_EQ(FiscalToday(10, "Asia/Tokyo", At(2026, 9, 30, 14, 59, 59)).period, "FY2025");
  EXPECT_EQ(FiscalToday(10, "Asia/Tokyo", At(2026, 9, 30, 15)).period, "FY2026");
  // December: the fiscal year that starts in December 2026 is almost all of 2027.
  EXPECT_EQ(FiscalToday(12, "Asia/Tokyo", At(2026, 11, 30, 14, 59, 59)).period, "FY2025");
  EXPECT_EQ(FiscalToday(12, "Asia/Tokyo", At(2026, 11, 30, 15)).period, "FY2026");
  EXPECT_EQ(FiscalToday(12, "Asia/Tokyo", At(2027, 11, 30, 14, 59, 59)).period, "FY2026");
  // A leap year's 29 February is in the fiscal year that started the April before.
  EXPECT_EQ(fiscal_year_of(LocalDate{2028, 2, 29}, 4), 2027);
  EXPECT_EQ(fiscal_year_of(LocalDate{2028, 2, 29}, 3), 2027);
  EXPECT_EQ(fiscal_year_of(LocalDate{2028, 3, 1}, 3), 2028);
}

TEST(FiscalYear, FyPlaceholdersShowTheFiscalYearOnlyForAFiscalYearCounter) {
  CounterConfig c{0, 9999, "{fy}/{fy2}-{seq:3}", Period::fiscal_year, "Asia/Tokyo", false, 4};
  ASSERT_TRUE(validate_config(c).ok());
  const TimeMs march = At(2027, 3, 15, 3);  // 2027-03-15 12:00 in Tokyo: FY2026
  Today t = today(c, march).value();
  auto d = decide_next(c, t, 0, std::nullopt, NextCommand{}, march);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->record.formatted, "2026/26-001");
  EXPECT_EQ(d->record.period, "FY2026");
  // With any other period {fy} is the year of the issue date.
  for (Period p : {Period::none, Period::year, Period::month, Period::day}) {
    SCOPED_TRACE(to_string(p));
    c.period = p;
    c.fiscal_year_start = 0;
    t = today(c, march).value();
    EXPECT_EQ(t.fiscal_year, 2027);
    d = decide_next(c, t, 0, std::nullopt, NextCommand{}, march);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->record.formatted, "2027/27-001");
  }
  // {fy2} keeps two digits: FY2009 is "09", FY2000 "00".
  EXPECT_EQ(render(parse_format("{fy2}{seq}").value(), 1, LocalDate{2010, 3, 1}, 2009), "091");
  EXPECT_EQ(render(parse_format("{fy2}{seq}").value(), 1, LocalDate{2000, 4, 1}, 2000), "001");
}

TEST(FiscalYear, ConfigNeedsAStartMonthForFiscalYearAndNoneForOtherPeriods) {
  CounterConfig c{0, 9999, "{seq}", Period::fiscal_year, "UTC", false, 4};
  EXPECT_TRUE(validate_config(c).ok());
  for (int bad : {0, 13, -1, 100}) {
    SCOPED_TRACE(bad);
    c.fiscal_year_start = bad;
    ExpectError(validate_config(c), errc::invalid_request, "fiscal_year_start");
  }
  for (Period p : {Period::none, Period::year, Period::month, Period::day}) {
    SCOPED_TRACE(to_string(p));
    c.period = p;
    c.fiscal_year_start = 4;
    ExpectError(validate_config(c), errc::invalid_request, "fiscal_year_start");
    c.fiscal_year_start = 0;
    EXPECT_TRUE(validate_config(c).ok());
  }
  // The start month is part of the config: another month is another counter.
  const CounterConfig april{0, 9999, "{seq}", Period::fiscal_year, "UTC", false, 4};
  CounterConfig january = april;
  january.fiscal_year_start = 1;
  ExpectError(decide_create(april, january), errc::counter_exists);
  EXPECT_EQ(decide_create(april, april).value(), CreateOutcome::already_exists);
}

TEST(FiscalYear, AReplayAfterTheYearTurnedKeepsTheOldFiscalYearsAnswer) {
  const CounterConfig c{0, 9999, "R{fy2}-{seq:4}", Period::fiscal_year, "Asia/Tokyo", true, 4};
  const TimeMs before = At(2027, 3, 31, 14, 59, 59);
  const TimeMs after = At(2027, 3, 31, 15, 0, 0);
  auto first =
      decide_next(c, today(c, before).value(), 41, std::nullopt, NextCommand{"form-9", ""}, before);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->record.formatted, "R26-0042");
  EXPECT_EQ(first->record.period, "FY2026");
  // Replayed in FY2027 (whose own numbering starts again): the FY2026 answer, unchanged.
  auto again =
      decide_next(c, today(c, after).value(), 0, first->record, NextCommand{"form-9", ""}, after);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->replayed);
  ExpectSameRecord(again->record, first->record);
  auto fresh =
      decide_next(c, today(c, after).value(), 0, std::nullopt, NextCommand{"form-10", ""}, after);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->record.formatted, "R27-0001");
  EXPECT_EQ(fresh->record.period, "FY2027");
}

// --- Japanese eras (元号) ---------------------------------------------------------------------

std::string EraOf(int y, unsigned m, unsigned d) {
  const JapaneseEra e = japanese_era(LocalDate{y, m, d});
  return std::string(e.name) + "/" + std::string(e.initial) + "/" + std::to_string(e.year);
}

TEST(JapaneseEra, EachEraBeginsOnItsFirstDayAndTheDayBeforeIsThePreviousOnesLast) {
  EXPECT_EQ(EraOf(2026, 4, 1), "令和/R/8");
  EXPECT_EQ(EraOf(2019, 5, 1), "令和/R/1");
  EXPECT_EQ(EraOf(2019, 4, 30), "平成/H/31");
  EXPECT_EQ(EraOf(2019, 1, 1), "平成/H/31");
  EXPECT_EQ(EraOf(1989, 1, 8), "平成/H/1");
  EXPECT_EQ(EraOf(1989, 1, 7), "昭和/S/64");
  EXPECT_EQ(EraOf(1970, 1, 1), "昭和/S/45");
  EXPECT_EQ(EraOf(1926, 12, 25), "昭和/S/1");
  EXPECT_EQ(EraOf(1926, 12, 24), "大正/T/15");
  EXPECT_EQ(EraOf(1912, 7, 30), "大正/T/1");
  EXPECT_EQ(EraOf(1912, 7, 29), "明治/M/45");
  EXPECT_EQ(EraOf(1873, 1, 1), "明治/M/6");
  EXPECT_EQ(EraOf(2100, 1, 1), "令和/R/82");  // no later era is known
}

TEST(JapaneseEra, TheChangeToReiwaIsAtMidnightOfThe1stOfMayInTheCountersZone) {
  const CounterConfig c{
      0,    9999, "{era}{era_year}年-{era_initial}{era_year:2}-{seq}", Period::none, "Asia/Tokyo",
      false};
  auto formatted = [&](const CounterConfig& cfg, TimeMs at) {
    return decide_next(cfg, today(cfg, at).value(), 0, std::nullopt, NextCommand{}, at)
        .value()
        .record.formatted;
  };
  // 2019-04-30T23:59:59+09:00, then 2019-05-01T00:00:00+09:00 (= 2019-04-30T15:00:00Z).
  EXPECT_EQ(formatted(c, At(2019, 4, 30, 14, 59, 59)), "平成31年-H31-1");
  EXPECT_EQ(formatted(c, At(2019, 4, 30, 15)), "令和1年-R01-1");
  CounterConfig utc = c;
  utc.timezone = "UTC";
  EXPECT_EQ(formatted(utc, At(2019, 4, 30, 15)), "平成31年-H31-1");  // still 30 April in UTC
  EXPECT_EQ(formatted(utc, At(2019, 5, 1)), "令和1年-R01-1");
}

TEST(JapaneseEra, EraPlaceholdersParseAndRender) {
  const LocalDate d{2026, 4, 1};
  EXPECT_EQ(Render("{era}{era_year}年度-{seq:3}", 7, d), "令和8年度-007");
  EXPECT_EQ(Render("{era_initial}{era_year:2}-{seq}", 12, d), "R08-12");
  EXPECT_EQ(Render("{era_year:1}/{era_year:4}/{seq}", 1, d), "8/0008/1");
  EXPECT_EQ(Render("{era_year:2}{seq}", 1, LocalDate{2037, 1, 1}), "191");  // width is a minimum
  auto p = parse_format("{fy}{fy2}{era}{era_initial}{era_year}{era_year:3}{seq}");
  ASSERT_TRUE(p.ok());
  using K = FormatPiece::Kind;
  std::vector<K> kinds;
  for (const auto& piece : *p) kinds.push_back(piece.kind);
  EXPECT_EQ(kinds, (std::vector<K>{K::fy, K::fy2, K::era, K::era_initial, K::era_year, K::era_year,
                                   K::seq}));
  EXPECT_EQ((*p)[4].width, 0);
  EXPECT_EQ((*p)[5].width, 3);
  for (const char* bad : {"{era_year:0}{seq}", "{era_year:5}{seq}", "{era_year:}{seq}",
                          "{era_year:x}{seq}", "{era_year:100}{seq}", "{ERA}{seq}",
                          "{era_name}{seq}", "{fy4}{seq}", "{fy:2}{seq}", "{era}{fy}"}) {
    SCOPED_TRACE(bad);
    ExpectError(parse_format(bad), errc::invalid_request, "format");
  }
}

// --- validate_config -----------------------------------------------------------------------

TEST(ValidateConfig, DefaultsAndTypicalConfigAreValid) {
  EXPECT_TRUE(validate_config(CounterConfig{}).ok());
  CounterConfig c{0, 9999, "R-{seq:4}", Period::year, "Asia/Tokyo", true};
  EXPECT_TRUE(validate_config(c).ok());
  c.start = kMaxJsonInteger - 1;
  c.max = kMaxJsonInteger;
  EXPECT_TRUE(validate_config(c).ok());
}

TEST(ValidateConfig, EachBadFieldIsNamed) {
  CounterConfig c;
  c.start = -1;
  ExpectError(validate_config(c), errc::invalid_request, "start");

  c = CounterConfig{};
  c.start = 10;
  c.max = 10;
  ExpectError(validate_config(c), errc::invalid_request, "max");
  c.max = 9;
  ExpectError(validate_config(c), errc::invalid_request, "max");

  c = CounterConfig{};
  c.max = kMaxJsonInteger + 1;
  ExpectError(validate_config(c), errc::invalid_request, "max");

  c = CounterConfig{};
  c.format = "R-{yyyy}";
  ExpectError(validate_config(c), errc::invalid_request, "format");

  c = CounterConfig{};
  c.timezone = "Nowhere/Special";
  ExpectError(validate_config(c), errc::invalid_request, "timezone");
}

// --- decide_create -------------------------------------------------------------------------

TEST(DecideCreate, CreatedIdenticalOrConflict) {
  const CounterConfig c{0, 9999, "R-{seq:4}", Period::year, "UTC", false};
  auto r = decide_create(std::nullopt, c);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, CreateOutcome::created);

  r = decide_create(c, c);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, CreateOutcome::already_exists);

  CounterConfig other = c;
  other.require_key = true;
  ExpectError(decide_create(c, other), errc::counter_exists);
  other = c;
  other.timezone = "Asia/Tokyo";
  ExpectError(decide_create(c, other), errc::counter_exists);
  other = c;
  other.max = 99999;
  ExpectError(decide_create(c, other), errc::counter_exists);
}

TEST(DecideCreate, InvalidConfigIsRejectedBeforeComparing) {
  CounterConfig bad;
  bad.format = "{nope}";
  ExpectError(decide_create(std::nullopt, bad), errc::invalid_request, "format");
  ExpectError(decide_create(CounterConfig{}, bad), errc::invalid_request, "format");
}

// --- decide_next ---------------------------------------------------------------------------

class DecideNextTest : public testing::Test {
 protected:
  CounterConfig config_{0, 3, "R-{yyyy}-{seq:4}", Period::year, "Asia/Tokyo", false};
  TimeMs now_ = kNewYearInTokyo;
  Today today_ = today(config_, now_).value();
};

TEST_F(DecideNextTest, IssuesLastPlusOne) {
  NextCommand cmd{"form-1", "first"};
  auto d = decide_next(config_, today_, 0, std::nullopt, cmd, now_);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->replayed);
  EXPECT_EQ(d->record.value, 1);
  EXPECT_EQ(d->record.formatted, "R-2027-0001");
  EXPECT_EQ(d->record.period, "2027");
  EXPECT_EQ(d->record.key, std::optional<std::string>("form-1"));
  EXPECT_EQ(d->record.note, "first");
  EXPECT_EQ(d->record.issued_at, now_);
  EXPECT_FALSE(d->record.voided_at.has_value());

  d = decide_next(config_, today_, 2, std::nullopt, NextCommand{}, now_);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->record.value, 3);
  EXPECT_FALSE(d->record.key.has_value());
}

TEST_F(DecideNextTest, ExhaustedAtMaxWithDetailsMax) {
  auto d = decide_next(config_, today_, 3, std::nullopt, NextCommand{"k", ""}, now_);
  ExpectError(d, errc::counter_exhausted);
  EXPECT_EQ(DetailInt(d.error(), "max"), 3);
}

TEST_F(DecideNextTest, KeyRequired) {
  config_.require_key = true;
  auto d = decide_next(config_, today_, 0, std::nullopt, NextCommand{std::nullopt, "n"}, now_);
  ExpectError(d, errc::key_required, "key");
  d = decide_next(config_, today_, 0, std::nullopt, NextCommand{"k", ""}, now_);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->record.value, 1);
}

TEST_F(DecideNextTest, ReplayReturnsStoredRecordEvenAfterExhaustion) {
  IssuedNumber stored;
  stored.value = 2;
  stored.formatted = "R-2026-0002";
  stored.period = "2026";  // issued in an earlier period
  stored.key = "form-2";
  stored.note = "original note";
  stored.issued_at = At(2026, 6, 1);
  // The counter is exhausted now (last = max) and the new note differs: the stored record wins.
  auto d = decide_next(config_, today_, 3, stored, NextCommand{"form-2", "other note"}, now_);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->replayed);
  ExpectSameRecord(d->record, stored);
}

TEST_F(DecideNextTest, ReplayOfVoidedRecordStillReplays) {
  IssuedNumber stored;
  stored.value = 1;
  stored.formatted = "R-2027-0001";
  stored.period = "2027";
  stored.key = "k";
  stored.issued_at = now_;
  stored.voided_at = now_ + 5;
  stored.void_reason = "typo";
  auto d = decide_next(config_, today_, 1, stored, NextCommand{"k", ""}, now_ + 10);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->replayed);
  ExpectSameRecord(d->record, stored);
}

// --- decide_void ---------------------------------------------------------------------------

class DecideVoidTest : public testing::Test {
 protected:
  CounterConfig config_{10, 100, "V{seq:3}", Period::none, "UTC", false};
  TimeMs now_ = At(2026, 4, 1, 9, 0);
  Today today_ = today(config_, now_).value();

  IssuedNumber Issued(std::int64_t v) {
    IssuedNumber r;
    r.value = v;
    r.formatted = "V0" + std::to_string(v);
    r.period = "";
    r.key = "key-" + std::to_string(v);
    r.note = "note";
    r.issued_at = now_ - 1000;
    return r;
  }
};

TEST_F(DecideVoidTest, VoidsAnIssuedNumber) {
  const IssuedNumber orig = Issued(12);
  auto r = decide_void(config_, today_, 15, orig, 12, "", "customer cancelled", now_);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->value, 12);
  EXPECT_EQ(r->formatted, orig.formatted);
  EXPECT_EQ(r->key, orig.key);
  EXPECT_EQ(r->issued_at, orig.issued_at);
  EXPECT_EQ(r->voided_at, std::optional<TimeMs>(now_));
  EXPECT_EQ(r->void_reason, "customer cancelled");
}

TEST_F(DecideVoidTest, IdempotentKeepsFirstVoid) {
  IssuedNumber voided = Issued(12);
  voided.voided_at = now_ - 500;
  voided.void_reason = "first reason";
  auto r = decide_void(config_, today_, 15, voided, 12, "", "second reason", now_);
  ASSERT_TRUE(r.ok());
  ExpectSameRecord(*r, voided);
}

TEST_F(DecideVoidTest, UnissuedValueIsValueNotIssued) {
  // The period never issued anything.
  auto r = decide_void(config_, today_, std::nullopt, std::nullopt, 11, "", "x", now_);
  ExpectError(r, errc::value_not_issued);
  EXPECT_EQ(DetailInt(r.error(), "value"), 11);
  // Above the last value.
  r = decide_void(config_, today_, 15, std::nullopt, 16, "", "x", now_);
  ExpectError(r, errc::value_not_issued);
  EXPECT_EQ(DetailInt(r.error(), "value"), 16);
  // At or below start: those were used before ichido.
  ExpectError(decide_void(config_, today_, 15, std::nullopt, 10, "", "x", now_),
              errc::value_not_issued);
  ExpectError(decide_void(config_, today_, 15, std::nullopt, 0, "", "x", now_),
              errc::value_not_issued);
  ExpectError(decide_void(config_, today_, 15, std::nullopt, -1, "", "x", now_),
              errc::value_not_issued);
}

TEST_F(DecideVoidTest, ValueSkippedBySetIsRecordedAsVoided) {
  auto r = decide_void(config_, today_, 50, std::nullopt, 30, "", "skipped", now_);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->value, 30);
  EXPECT_EQ(r->formatted, "V030");
  EXPECT_FALSE(r->key.has_value());
  EXPECT_EQ(r->voided_at, std::optional<TimeMs>(now_));
  EXPECT_EQ(r->void_reason, "skipped");
}

// --- decide_set ----------------------------------------------------------------------------

TEST(DecideSet, CompareAndSet) {
  const CounterConfig c{10, 100, "{seq}", Period::none, "UTC", false};
  auto r = decide_set(c, 41, 41, 41, 60);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 60);
  // Lowering is allowed down to the highest number used.
  r = decide_set(c, 60, 41, 60, 41);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 41);
  // Up to max and down to start (when nothing was issued).
  r = decide_set(c, 10, std::nullopt, 10, 100);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 100);
  r = decide_set(c, 20, std::nullopt, 20, 10);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 10);
}

TEST(DecideSet, MismatchReportsTheActualLastValue) {
  const CounterConfig c{0, 100, "{seq}", Period::none, "UTC", false};
  auto r = decide_set(c, 41, 41, 40, 60);
  ExpectError(r, errc::value_mismatch);
  EXPECT_EQ(DetailInt(r.error(), "last_value"), 41);
}

TEST(DecideSet, BelowIssued) {
  const CounterConfig c{0, 100, "{seq}", Period::none, "UTC", false};
  auto r = decide_set(c, 41, 41, 41, 40);
  ExpectError(r, errc::value_below_issued);
  EXPECT_EQ(DetailInt(r.error(), "highest_issued"), 41);
}

TEST(DecideSet, OutsideStartToMaxNamesLastValue) {
  const CounterConfig c{10, 100, "{seq}", Period::none, "UTC", false};
  ExpectError(decide_set(c, 10, std::nullopt, 10, 9), errc::invalid_request, "last_value");
  ExpectError(decide_set(c, 10, std::nullopt, 10, 101), errc::invalid_request, "last_value");
}

}  // namespace
}  // namespace ichido::core

// Found by format_fuzz: a huge {seq:N} width overflowed int while being parsed.
TEST(FormatRegression, HugeWidthIsRejectedWithoutOverflow) {
  auto r = ichido::core::parse_format("A{yy}{seq:1111111111111}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().field, "format");
}
