// The store conformance suite: every counter rule, run against every Store implementation
// (the fixture and the stores under test are in conformance_fixture.h).
#include "store/testing/conformance_fixture.h"

namespace ichido::store_testing {
namespace {

TYPED_TEST_SUITE(StoreConformance, StoreFactories, FactoryName);

// --- create ----------------------------------------------------------------------------------

TYPED_TEST(StoreConformance, CreateReturnsInfoOfTheNewCounter) {
  const auto c = Config(100, 9999, "R-{seq:4}", core::Period::year, "Asia/Tokyo", true);
  auto r = this->S().create_counter({this->Ref("receipts"), c});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->created);
  EXPECT_EQ(r->info.name, "receipts");
  EXPECT_EQ(r->info.config, c);
  EXPECT_EQ(r->info.last_value, 100);
  EXPECT_EQ(r->info.issued_count, 0);
  EXPECT_EQ(r->info.voided_count, 0);
  EXPECT_EQ(r->info.current_period, "2026");
  EXPECT_EQ(r->info.created_at, this->clock_.now_ms());

  auto got = this->S().get_counter(this->Ref("receipts"));
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(Dump(*got), Dump(r->info));
}

TYPED_TEST(StoreConformance, CreateIdenticalIsNotCreatedAgain) {
  const auto c = Config();
  this->MustCreate("receipts", c);
  const TimeMs created_at = this->clock_.now_ms();
  this->clock_.advance(60'000);
  ASSERT_EQ(this->MustNext("receipts"), 1);

  auto again = this->S().create_counter({this->Ref("receipts"), c});
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->info.created_at, created_at);  // the original counter, untouched
  EXPECT_EQ(again->info.last_value, 1);
}

TYPED_TEST(StoreConformance, CreateDifferentIsCounterExists) {
  this->MustCreate("receipts", Config(0, 9999));
  ExpectError(this->S().create_counter({this->Ref("receipts"), Config(0, 99999)}),
              errc::counter_exists);
  ExpectError(this->S().create_counter(
                  {this->Ref("receipts"), Config(0, 9999, "R-{seq:4}", core::Period::none, "UTC",
                                                 /*require_key=*/true)}),
              errc::counter_exists);
  auto got = this->S().get_counter(this->Ref("receipts"));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->config, Config(0, 9999));  // C4: config never changes
}

TYPED_TEST(StoreConformance, CreateInvalidConfigNamesTheField) {
  ExpectError(this->S().create_counter({this->Ref("c"), Config(-1)}), errc::invalid_request,
              "start");
  ExpectError(this->S().create_counter({this->Ref("c"), Config(5, 5)}), errc::invalid_request,
              "max");
  ExpectError(this->S().create_counter({this->Ref("c"), Config(0, core::kMaxJsonInteger + 1)}),
              errc::invalid_request, "max");
  ExpectError(this->S().create_counter({this->Ref("c"), Config(0, 9, "no-seq")}),
              errc::invalid_request, "format");
  ExpectError(this->S().create_counter(
                  {this->Ref("c"), Config(0, 9, "{seq}", core::Period::day, "Asia/Tokio")}),
              errc::invalid_request, "timezone");
  // Nothing was created by any of them.
  ExpectError(this->S().get_counter(this->Ref("c")), errc::counter_not_found);
}

TYPED_TEST(StoreConformance, SameNameInAnotherNamespaceIsAnotherCounter) {
  this->MustCreate("receipts", Config(0, 9999), "team-a");
  this->MustCreate("receipts", Config(500, 9999), "team-b");
  auto a = this->S().next({this->Ref("receipts", "team-a"), {}});
  auto b = this->S().next({this->Ref("receipts", "team-b"), {}});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->record.value, 1);
  EXPECT_EQ(b->record.value, 501);
}

// --- next ------------------------------------------------------------------------------------

TYPED_TEST(StoreConformance, NextIssuesASequenceFromStartPlusOne) {
  this->MustCreate("receipts", Config(100, 9999, "R-{seq:4}"));
  for (std::int64_t want = 101; want <= 105; ++want) {
    auto r = this->Next("receipts", "k" + std::to_string(want), "note " + std::to_string(want));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_FALSE(r->replayed);
    EXPECT_EQ(r->record.value, want);
    EXPECT_EQ(r->record.formatted, "R-0" + std::to_string(want));
    EXPECT_EQ(r->record.period, "");
    EXPECT_EQ(r->record.key, "k" + std::to_string(want));
    EXPECT_EQ(r->record.note, "note " + std::to_string(want));
    EXPECT_EQ(r->record.issued_at, this->clock_.now_ms());
    this->clock_.advance(1000);
  }
  auto info = this->S().get_counter(this->Ref("receipts"));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->last_value, 105);
  EXPECT_EQ(info->issued_count, 5);
  EXPECT_EQ(info->voided_count, 0);
}

TYPED_TEST(StoreConformance, NextWithTheSameKeyReplaysTheSameAnswer) {
  this->MustCreate("receipts", Config());
  auto first = this->Next("receipts", "form-response-123", "first try");
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_FALSE(first->replayed);
  ASSERT_EQ(this->MustNext("receipts", "other"), 2);

  this->clock_.advance(3'600'000);
  auto again = this->Next("receipts", "form-response-123", "retry after lost answer");
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_TRUE(again->replayed);
  EXPECT_EQ(Dump(again->record), Dump(first->record));  // same value, formatted, note, issued_at

  // The replay consumed no number.
  EXPECT_EQ(this->MustNext("receipts"), 3);
  auto info = this->S().get_counter(this->Ref("receipts"));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->issued_count, 3);
}

TYPED_TEST(StoreConformance, KeysWithMessageIdsAndJapaneseReplay) {
  this->MustCreate("mail", Config());
  const std::vector<std::string> keys = {"<abc/def@example.com>", "請求書-2026年4月-第1号",
                                         "<CAF=x+y_z@mail.gmail.com>"};
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(this->MustNext("mail", keys[i]), static_cast<std::int64_t>(i + 1));
  }
  for (std::size_t i = 0; i < keys.size(); ++i) {
    auto r = this->Next("mail", keys[i]);
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(r->replayed);
    EXPECT_EQ(r->record.value, static_cast<std::int64_t>(i + 1));
    EXPECT_EQ(r->record.key, keys[i]);
  }
}

TYPED_TEST(StoreConformance, KeysArePerCounterNotGlobal) {
  this->MustCreate("invoices", Config());
  this->MustCreate("receipts", Config(1000));
  ASSERT_EQ(this->MustNext("invoices", "order-7"), 1);
  // The same key on another counter is a new number there, not a replay.
  auto r = this->Next("receipts", "order-7");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->replayed);
  EXPECT_EQ(r->record.value, 1001);
}

TYPED_TEST(StoreConformance, RequireKey) {
  this->MustCreate("strict", Config(0, 9999, "{seq}", core::Period::none, "UTC", true));
  ExpectError(this->Next("strict"), errc::key_required, "key");
  EXPECT_EQ(this->MustNext("strict", "k1"), 1);  // the refused call consumed no number
}

TYPED_TEST(StoreConformance, ExhaustedAtMaxButKeysStillReplay) {
  this->MustCreate("small", Config(10, 12));
  ASSERT_EQ(this->MustNext("small", "a"), 11);
  ASSERT_EQ(this->MustNext("small", "b"), 12);
  auto r = this->Next("small", "c");
  ExpectError(r, errc::counter_exhausted);
  EXPECT_EQ(DetailInt(r.error(), "max"), 12);
  ExpectError(this->Next("small"), errc::counter_exhausted);  // no wrap-around, ever

  auto replay = this->Next("small", "a");
  ASSERT_TRUE(replay.ok()) << replay.error().message;
  EXPECT_TRUE(replay->replayed);
  EXPECT_EQ(replay->record.value, 11);
  // "c" was refused, so it was not recorded: it is still unknown.
  auto by_key = this->S().list_issued({this->Ref("small"), "c"});
  ASSERT_TRUE(by_key.ok());
  EXPECT_TRUE(by_key->items.empty());
}

TYPED_TEST(StoreConformance, MissingCounterIsNotFoundEverywhere) {
  this->MustCreate("receipts", Config(), "other-ns");
  ExpectError(this->Next("receipts", "k"), errc::counter_not_found);
  ExpectError(this->S().get_counter(this->Ref("receipts")), errc::counter_not_found);
  ExpectError(this->S().void_number({this->Ref("receipts"), 1, std::nullopt, "x"}),
              errc::counter_not_found);
  ExpectError(this->S().set_last_value({this->Ref("receipts"), 0, 5}), errc::counter_not_found);
  ExpectError(this->Issued("receipts"), errc::counter_not_found);
  // Never created implicitly.
  ExpectError(this->S().get_counter(this->Ref("receipts")), errc::counter_not_found);
}

// --- periods ---------------------------------------------------------------------------------

TYPED_TEST(StoreConformance, PeriodRolloverRestartsNumberingAndOldKeysReplay) {
  this->clock_.set(At(2026, 12, 31, 23, 59, 58));
  this->MustCreate("yearly", Config(10, 9999, "{yyyy}-{seq:3}", core::Period::year, "UTC"));
  auto a = this->Next("yearly", "a");
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a->record.value, 11);
  EXPECT_EQ(a->record.formatted, "2026-011");
  EXPECT_EQ(a->record.period, "2026");
  ASSERT_EQ(this->MustNext("yearly", "b"), 12);

  this->clock_.advance(2'000);  // 2027-01-01T00:00:00Z
  auto c = this->Next("yearly", "c");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->record.value, 11);  // restarts at start + 1
  EXPECT_EQ(c->record.formatted, "2027-011");
  EXPECT_EQ(c->record.period, "2027");

  // A key of the old period replays its old-period record (C3: keys are per counter, forever).
  auto replay = this->Next("yearly", "a");
  ASSERT_TRUE(replay.ok()) << replay.error().message;
  EXPECT_TRUE(replay->replayed);
  EXPECT_EQ(Dump(replay->record), Dump(a->record));
  EXPECT_EQ(this->MustNext("yearly", "d"), 12);

  auto info = this->S().get_counter(this->Ref("yearly"));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->current_period, "2027");
  EXPECT_EQ(info->last_value, 12);
  EXPECT_EQ(info->issued_count, 2);

  auto old_page = this->Issued("yearly", 0, 100, "2026");
  ASSERT_TRUE(old_page.ok()) << old_page.error().message;
  EXPECT_EQ(this->Values(*old_page), (std::vector<std::int64_t>{11, 12}));
  EXPECT_EQ(old_page->items[0].key, "a");
  auto current = this->Issued("yearly");  // defaults to the current period
  ASSERT_TRUE(current.ok());
  EXPECT_EQ(this->Values(*current), (std::vector<std::int64_t>{11, 12}));
  EXPECT_EQ(current->items[0].key, "c");
}

TYPED_TEST(StoreConformance, PeriodIsComputedInTheCountersTimezone) {
  this->clock_.set(At(2026, 12, 31, 15, 30));  // 2027-01-01 00:30 in Tokyo
  this->MustCreate("tokyo",
                   Config(0, 9999, "T{yy}{mm}{dd}-{seq}", core::Period::day, "Asia/Tokyo"));
  this->MustCreate("utc", Config(0, 9999, "U{yy}{mm}{dd}-{seq}", core::Period::day, "UTC"));
  auto t = this->Next("tokyo");
  auto u = this->Next("utc");
  ASSERT_TRUE(t.ok() && u.ok());
  EXPECT_EQ(t->record.period, "2027-01-01");
  EXPECT_EQ(t->record.formatted, "T270101-1");
  EXPECT_EQ(u->record.period, "2026-12-31");
  EXPECT_EQ(u->record.formatted, "U261231-1");
}

TYPED_TEST(StoreConformance, MonthPeriodRollsOverAtMidnightLocal) {
  this->clock_.set(At(2026, 4, 30, 14, 59, 59));  // 23:59:59 in Tokyo
  this->MustCreate("monthly", Config(0, 9999, "{seq}", core::Period::month, "Asia/Tokyo"));
  ASSERT_EQ(this->MustNext("monthly"), 1);
  ASSERT_EQ(this->MustNext("monthly"), 2);
  this->clock_.advance(1'000);
  auto r = this->Next("monthly");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->record.value, 1);
  EXPECT_EQ(r->record.period, "2026-05");
}

// --- fiscal years and Japanese eras ----------------------------------------------------------

TYPED_TEST(StoreConformance, AFiscalYearCounterStartsOverOnThe1stOfAprilInItsZone) {
  this->clock_.set(At(2027, 3, 31, 14, 59, 58));  // 2027-03-31 23:59:58 in Tokyo: FY2026
  const auto c = FiscalConfig("INV{fy}-{seq:4}", 4, "Asia/Tokyo", true);
  auto created = this->S().create_counter({this->Ref("invoices"), c});
  ASSERT_TRUE(created.ok()) << created.error().message;
  EXPECT_EQ(created->info.config, c);
  EXPECT_EQ(created->info.current_period, "FY2026");
  ASSERT_EQ(this->MustNext("invoices", "a"), 1);
  this->clock_.advance(1'000);  // 23:59:59
  auto b = this->Next("invoices", "b");
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(b->record.value, 2);
  EXPECT_EQ(b->record.formatted, "INV2026-0002");
  EXPECT_EQ(b->record.period, "FY2026");

  this->clock_.advance(1'000);  // 2027-04-01 00:00:00 in Tokyo = 2027-03-31T15:00:00Z
  auto c1 = this->Next("invoices", "c");
  ASSERT_TRUE(c1.ok()) << c1.error().message;
  EXPECT_EQ(c1->record.value, 1);
  EXPECT_EQ(c1->record.formatted, "INV2027-0001");
  EXPECT_EQ(c1->record.period, "FY2027");

  // The key issued in FY2026 is answered FY2026's number, unchanged, in FY2027.
  auto again = this->Next("invoices", "b");
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_TRUE(again->replayed);
  EXPECT_EQ(Dump(again->record), Dump(b->record));

  auto info = this->S().get_counter(this->Ref("invoices"));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->current_period, "FY2027");
  EXPECT_EQ(info->last_value, 1);
  EXPECT_EQ(info->config.fiscal_year_start, 4);

  // The last fiscal year's trail and a void in it are named by its label.
  auto old_year = this->Issued("invoices", 0, 100, "FY2026");
  ASSERT_TRUE(old_year.ok()) << old_year.error().message;
  EXPECT_EQ(this->Values(*old_year), (std::vector<std::int64_t>{1, 2}));
  auto voided = this->S().void_number({this->Ref("invoices"), 1, "FY2026", "cancelled"});
  ASSERT_TRUE(voided.ok()) << voided.error().message;
  EXPECT_EQ(voided->formatted, "INV2026-0001");
  ExpectError(this->Issued("invoices", 0, 100, "2026"), errc::invalid_request, "period");
  ExpectError(this->S().void_number({this->Ref("invoices"), 1, "2026-04", "x"}),
              errc::invalid_request, "period");
}

TYPED_TEST(StoreConformance, AFiscalYearStartingInOctoberTurnsOnThe1stOfOctober) {
  this->clock_.set(At(2026, 9, 30, 14, 59, 59));  // 2026-09-30 23:59:59 in Tokyo: FY2025
  this->MustCreate("oct", FiscalConfig("{fy2}-{seq}", 10));
  this->MustCreate("jan", FiscalConfig("{fy2}-{seq}", 1));
  auto a = this->Next("oct");
  auto j = this->Next("jan");
  ASSERT_TRUE(a.ok() && j.ok());
  EXPECT_EQ(a->record.period, "FY2025");
  EXPECT_EQ(a->record.formatted, "25-1");
  EXPECT_EQ(j->record.period, "FY2026");  // from January: the calendar year
  this->clock_.advance(1'000);
  a = this->Next("oct");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->record.period, "FY2026");
  EXPECT_EQ(a->record.formatted, "26-1");
  auto got = this->S().get_counter(this->Ref("oct"));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->config.fiscal_year_start, 10);
}

TYPED_TEST(StoreConformance, AFiscalYearStartIsRefusedForOtherPeriodsAndChangesNothing) {
  auto bad = Config(0, 9999, "{seq}", core::Period::year);
  bad.fiscal_year_start = 4;
  ExpectError(this->S().create_counter({this->Ref("c"), bad}), errc::invalid_request,
              "fiscal_year_start");
  auto out_of_range = FiscalConfig("{seq}", 13);
  ExpectError(this->S().create_counter({this->Ref("c"), out_of_range}), errc::invalid_request,
              "fiscal_year_start");
  ExpectError(this->S().get_counter(this->Ref("c")), errc::counter_not_found);
  // Another start month is another configuration.
  this->MustCreate("fy", FiscalConfig("{seq}", 4));
  ExpectError(this->S().create_counter({this->Ref("fy"), FiscalConfig("{seq}", 1)}),
              errc::counter_exists);
  auto same = this->S().create_counter({this->Ref("fy"), FiscalConfig("{seq}", 4)});
  ASSERT_TRUE(same.ok());
  EXPECT_FALSE(same->created);
}

TYPED_TEST(StoreConformance, EraPlaceholdersChangeToReiwaOnThe1stOfMay2019InTheCountersZone) {
  this->clock_.set(At(2019, 4, 30, 14, 59, 59));  // 2019-04-30 23:59:59 in Tokyo
  this->MustCreate("tokyo", Config(0, 9999, "{era}{era_year}-{era_initial}{era_year:2}-{seq}",
                                   core::Period::none, "Asia/Tokyo"));
  this->MustCreate("utc",
                   Config(0, 9999, "{era_initial}{era_year:2}-{seq}", core::Period::none, "UTC"));
  auto t = this->Next("tokyo");
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->record.formatted, "平成31-H31-1");
  this->clock_.advance(1'000);  // 2019-05-01 00:00:00 in Tokyo, still 30 April in UTC
  t = this->Next("tokyo");
  auto u = this->Next("utc");
  ASSERT_TRUE(t.ok() && u.ok());
  EXPECT_EQ(t->record.formatted, "令和1-R01-2");
  EXPECT_EQ(u->record.formatted, "H31-1");
  auto trail = this->Issued("tokyo");
  ASSERT_TRUE(trail.ok());
  ASSERT_EQ(trail->items.size(), 2u);
  EXPECT_EQ(trail->items[0].formatted, "平成31-H31-1");  // stored as issued, bytes intact
  EXPECT_EQ(trail->items[1].formatted, "令和1-R01-2");
}

// Only stores that keep data across a reopen run this part.
template <class F>
class DurableCounterConformance : public StoreConformance<F> {};
using DurableFactories = ::testing::Types<SqliteFactory, PgFactory>;
TYPED_TEST_SUITE(DurableCounterConformance, DurableFactories, FactoryName);

TYPED_TEST(DurableCounterConformance, AFiscalYearCounterKeepsItsStartMonthAcrossReopen) {
  this->clock_.set(At(2027, 3, 31, 15));  // 2027-04-01 00:00 in Tokyo
  this->MustCreate("fy-apr", FiscalConfig("{fy}-{seq}", 4));
  this->MustCreate("fy-oct", FiscalConfig("{fy}-{seq}", 10, "UTC"));
  this->MustCreate("plain", Config(0, 9999, "{seq}", core::Period::month, "Asia/Tokyo"));
  ASSERT_EQ(this->MustNext("fy-apr", "k"), 1);
  const std::string before = this->Snapshot();
  ASSERT_NO_FATAL_FAILURE(this->Reopen());
  EXPECT_EQ(this->Snapshot(), before);
  auto apr = this->S().get_counter(this->Ref("fy-apr"));
  auto oct = this->S().get_counter(this->Ref("fy-oct"));
  auto plain = this->S().get_counter(this->Ref("plain"));
  ASSERT_TRUE(apr.ok() && oct.ok() && plain.ok());
  EXPECT_EQ(apr->config, FiscalConfig("{fy}-{seq}", 4));
  EXPECT_EQ(oct->config, FiscalConfig("{fy}-{seq}", 10, "UTC"));
  EXPECT_EQ(oct->current_period, "FY2026");
  EXPECT_EQ(plain->config.fiscal_year_start, 0);
  auto replay = this->Next("fy-apr", "k");
  ASSERT_TRUE(replay.ok());
  EXPECT_TRUE(replay->replayed);
  EXPECT_EQ(replay->record.formatted, "2027-1");
  EXPECT_EQ(this->MustNext("fy-apr"), 2);
}

// --- list_counters ---------------------------------------------------------------------------

TYPED_TEST(StoreConformance, ListCountersIsSortedByNameWithinTheNamespace) {
  for (const char* n : {"b", "a-2", "C", "a", "_x"}) this->MustCreate(n, Config());
  this->MustCreate("zzz", Config(), "elsewhere");
  ASSERT_EQ(this->MustNext("a-2"), 1);
  ASSERT_EQ(this->MustNext("a-2"), 2);

  auto list = this->S().list_counters(StoreConformance<TypeParam>::kNs);
  ASSERT_TRUE(list.ok()) << list.error().message;
  std::vector<std::string> names;
  for (const auto& i : *list) names.push_back(i.name);
  EXPECT_EQ(names, (std::vector<std::string>{"C", "_x", "a", "a-2", "b"}));  // byte order
  EXPECT_EQ((*list)[3].last_value, 2);
  EXPECT_EQ((*list)[3].issued_count, 2);

  auto other = this->S().list_counters("elsewhere");
  ASSERT_TRUE(other.ok());
  ASSERT_EQ(other->size(), 1u);
  EXPECT_EQ((*other)[0].name, "zzz");

  auto empty = this->S().list_counters("nobody");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

// --- list_issued -----------------------------------------------------------------------------

TYPED_TEST(StoreConformance, ListIssuedPagesInValueOrder) {
  this->MustCreate("p", Config());
  for (int i = 1; i <= 5; ++i) ASSERT_EQ(this->MustNext("p", "k" + std::to_string(i)), i);

  auto page = this->Issued("p", 0, 2);
  ASSERT_TRUE(page.ok()) << page.error().message;
  EXPECT_EQ(this->Values(*page), (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(page->next_after, std::optional<std::int64_t>(2));

  page = this->Issued("p", 2, 2);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(this->Values(*page), (std::vector<std::int64_t>{3, 4}));
  EXPECT_EQ(page->next_after, std::optional<std::int64_t>(4));

  page = this->Issued("p", 4, 2);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(this->Values(*page), (std::vector<std::int64_t>{5}));
  EXPECT_FALSE(page->next_after.has_value());

  // Exactly `limit` items left: no next_after, because nothing follows.
  page = this->Issued("p", 0, 5);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->items.size(), 5u);
  EXPECT_FALSE(page->next_after.has_value());
  page = this->Issued("p", 0, 4);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->next_after, std::optional<std::int64_t>(4));
  page = this->Issued("p", 5, 10);
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->items.empty());
  EXPECT_FALSE(page->next_after.has_value());

  page = this->Issued("p", 0, 1000);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->items.size(), 5u);
  EXPECT_EQ(page->items[2].key, "k3");
  EXPECT_EQ(page->items[2].formatted, "R-0003");
}

TYPED_TEST(StoreConformance, ListIssuedByKey) {
  this->MustCreate("p", Config());
  this->clock_.advance(5);
  auto issued = this->Next("p", "<m1@example.com>", "hello");
  ASSERT_TRUE(issued.ok());
  ASSERT_EQ(this->MustNext("p", "k2"), 2);

  auto page = this->S().list_issued({this->Ref("p"), std::string("<m1@example.com>")});
  ASSERT_TRUE(page.ok()) << page.error().message;
  ASSERT_EQ(page->items.size(), 1u);
  EXPECT_EQ(Dump(page->items[0]), Dump(issued->record));
  EXPECT_FALSE(page->next_after.has_value());

  page = this->S().list_issued({this->Ref("p"), std::string("unknown")});
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->items.empty());
}

TYPED_TEST(StoreConformance, ListIssuedRejectsBadPeriodAndLimit) {
  this->MustCreate("y", Config(0, 9999, "{seq}", core::Period::year));
  ExpectError(this->Issued("y", 0, 10, "2026-04"), errc::invalid_request, "period");
  ExpectError(this->Issued("y", 0, 10, ""), errc::invalid_request, "period");
  ASSERT_EQ(this->MustNext("y"), 1);
  ExpectError(this->Issued("y", 0, 0), errc::invalid_request, "limit");
  ExpectError(this->Issued("y", 0, -1), errc::invalid_request, "limit");
  ExpectError(this->Issued("y", 0, 1001), errc::invalid_request, "limit");
  auto page = this->Issued("y", 0, 1, "2026");
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(this->Values(*page), (std::vector<std::int64_t>{1}));
  page = this->Issued("y", 0, 10, "2025");  // a well-formed period with nothing in it
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->items.empty());
}

// --- void ------------------------------------------------------------------------------------

TYPED_TEST(StoreConformance, VoidIsIdempotentAndCounted) {
  this->MustCreate("v", Config());
  for (int i = 1; i <= 3; ++i) ASSERT_EQ(this->MustNext("v", "k" + std::to_string(i)), i);

  this->clock_.advance(1000);
  const TimeMs void_time = this->clock_.now_ms();
  auto v = this->S().void_number({this->Ref("v"), 2, std::nullopt, "typo on the form"});
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_EQ(v->value, 2);
  EXPECT_EQ(v->key, "k2");
  EXPECT_EQ(v->voided_at, std::optional<TimeMs>(void_time));
  EXPECT_EQ(v->void_reason, "typo on the form");

  this->clock_.advance(1000);
  auto again = this->S().void_number({this->Ref("v"), 2, std::string(""), "another reason"});
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(Dump(*again), Dump(*v));  // the first void stands

  auto info = this->S().get_counter(this->Ref("v"));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->issued_count, 3);
  EXPECT_EQ(info->voided_count, 1);  // not 2: the second void changed nothing
  EXPECT_EQ(info->last_value, 3);

  auto page = this->Issued("v");
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->items.size(), 3u);
  EXPECT_EQ(Dump(page->items[1]), Dump(*v));
  EXPECT_FALSE(page->items[0].voided_at.has_value());

  // A voided number is never issued again; numbering continues after the last value.
  EXPECT_EQ(this->MustNext("v"), 4);
  // Its key still replays (voided) rather than issuing a new number.
  auto replay = this->Next("v", "k2");
  ASSERT_TRUE(replay.ok());
  EXPECT_TRUE(replay->replayed);
  EXPECT_EQ(replay->record.voided_at, std::optional<TimeMs>(void_time));
}

TYPED_TEST(StoreConformance, VoidOfAnUnissuedValueIsRefused) {
  this->MustCreate("v", Config(10));
  ExpectError(this->S().void_number({this->Ref("v"), 11, std::nullopt, "x"}),
              errc::value_not_issued);  // nothing issued yet
  ASSERT_EQ(this->MustNext("v"), 11);
  auto r = this->S().void_number({this->Ref("v"), 12, std::nullopt, "x"});
  ExpectError(r, errc::value_not_issued);
  EXPECT_EQ(DetailInt(r.error(), "value"), 12);
  ExpectError(this->S().void_number({this->Ref("v"), 10, std::nullopt, "x"}),
              errc::value_not_issued);  // start itself was used before ichido
  ExpectError(this->S().void_number({this->Ref("v"), 11, std::string("2026"), "x"}),
              errc::invalid_request, "period");  // not a label of a period=none counter
}

TYPED_TEST(StoreConformance, VoidInAnEarlierPeriod) {
  this->clock_.set(At(2026, 12, 31, 12, 0));
  this->MustCreate("y", Config(0, 9999, "{yyyy}/{seq}", core::Period::year));
  ASSERT_EQ(this->MustNext("y"), 1);
  ASSERT_EQ(this->MustNext("y"), 2);
  this->clock_.set(At(2027, 1, 2, 12, 0));
  ASSERT_EQ(this->MustNext("y"), 1);

  auto v = this->S().void_number({this->Ref("y"), 2, std::string("2026"), "late correction"});
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_EQ(v->period, "2026");
  EXPECT_EQ(v->formatted, "2026/2");
  // Value 2 was never issued in the current period 2027.
  ExpectError(this->S().void_number({this->Ref("y"), 2, std::nullopt, "x"}),
              errc::value_not_issued);
  ExpectError(this->S().void_number({this->Ref("y"), 1, std::string("2025"), "x"}),
              errc::value_not_issued);
  ExpectError(this->S().void_number({this->Ref("y"), 1, std::string("27"), "x"}),
              errc::invalid_request, "period");

  auto page = this->Issued("y", 0, 10, "2026");
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->items.size(), 2u);
  EXPECT_TRUE(page->items[1].voided_at.has_value());
  auto info = this->S().get_counter(this->Ref("y"));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->voided_count, 0);  // counts are of the current period
}

// --- set -------------------------------------------------------------------------------------

TYPED_TEST(StoreConformance, SetIsCompareAndSetAndNextContinuesFromIt) {
  this->MustCreate("s", Config(0, 500));
  for (int i = 1; i <= 3; ++i) ASSERT_EQ(this->MustNext("s"), i);

  auto r = this->S().set_last_value({this->Ref("s"), 2, 100});
  ExpectError(r, errc::value_mismatch);
  EXPECT_EQ(DetailInt(r.error(), "last_value"), 3);

  r = this->S().set_last_value({this->Ref("s"), 3, 2});
  ExpectError(r, errc::value_below_issued);
  EXPECT_EQ(DetailInt(r.error(), "highest_issued"), 3);

  ExpectError(this->S().set_last_value({this->Ref("s"), 3, 501}), errc::invalid_request,
              "last_value");

  r = this->S().set_last_value({this->Ref("s"), 3, 100});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->last_value, 100);
  EXPECT_EQ(r->issued_count, 3);
  EXPECT_EQ(this->MustNext("s"), 101);

  // Lowering is allowed down to the highest number used, and numbering follows.
  r = this->S().set_last_value({this->Ref("s"), 101, 101});
  ASSERT_TRUE(r.ok()) << r.error().message;
  ExpectError(this->S().set_last_value({this->Ref("s"), 101, 100}), errc::value_below_issued);
}

TYPED_TEST(StoreConformance, SetOnAFreshPeriodStartsFromStart) {
  this->MustCreate("s", Config(40, 500));
  ExpectError(this->S().set_last_value({this->Ref("s"), 0, 50}), errc::value_mismatch);
  auto r = this->S().set_last_value({this->Ref("s"), 40, 50});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->last_value, 50);
  // A number skipped by set may be voided, so the trail says why it is missing; from then on
  // the last value may not go below it.
  auto v = this->S().void_number({this->Ref("s"), 45, std::nullopt, "skipped"});
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_EQ(v->value, 45);
  EXPECT_TRUE(v->voided_at.has_value());
  EXPECT_FALSE(v->key.has_value());
  r = this->S().set_last_value({this->Ref("s"), 50, 44});
  ExpectError(r, errc::value_below_issued);
  EXPECT_EQ(DetailInt(r.error(), "highest_issued"), 45);
  r = this->S().set_last_value({this->Ref("s"), 50, 45});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(this->MustNext("s"), 46);
}

TYPED_TEST(StoreConformance, SetUpToMaxThenExhausted) {
  this->MustCreate("s", Config(0, 10));
  ASSERT_TRUE(this->S().set_last_value({this->Ref("s"), 0, 10}).ok());
  ExpectError(this->Next("s"), errc::counter_exhausted);
}

// --- an error changes nothing ----------------------------------------------------------------

TYPED_TEST(StoreConformance, AFailingCommandChangesNothing) {
  this->MustCreate("a", Config(0, 3, "{seq}", core::Period::none, "UTC", true));
  this->MustCreate("b", Config(0, 99));
  ASSERT_EQ(this->MustNext("a", "k1"), 1);
  ASSERT_EQ(this->MustNext("a", "k2"), 2);
  ASSERT_TRUE(this->S().void_number({this->Ref("a"), 1, std::nullopt, "r"}).ok());
  const std::string before = this->Snapshot();
  ASSERT_NE(before.find("last=2 issued=2 voided=1"), std::string::npos) << before;

  this->clock_.advance(10'000);  // a write at a new time would show in issued_at / voided_at
  ExpectError(this->S().create_counter({this->Ref("a"), Config(0, 4)}), errc::counter_exists);
  ExpectError(this->S().create_counter({this->Ref("c"), Config(-5)}), errc::invalid_request,
              "start");
  ExpectError(this->Next("a"), errc::key_required, "key");
  ExpectError(this->S().void_number({this->Ref("a"), 3, std::nullopt, "r"}),
              errc::value_not_issued);
  ExpectError(this->S().void_number({this->Ref("a"), 2, std::string("x"), "r"}),
              errc::invalid_request, "period");
  ExpectError(this->S().set_last_value({this->Ref("a"), 1, 3}), errc::value_mismatch);
  ExpectError(this->S().set_last_value({this->Ref("a"), 2, 1}), errc::value_below_issued);
  ExpectError(this->S().set_last_value({this->Ref("a"), 2, 4}), errc::invalid_request,
              "last_value");
  ExpectError(this->Next("missing", "k9"), errc::counter_not_found);
  EXPECT_EQ(this->Snapshot(), before);

  // Exhaustion refuses without recording the refused key.
  ASSERT_EQ(this->MustNext("a", "k3"), 3);
  const std::string full = this->Snapshot();
  ExpectError(this->Next("a", "k4"), errc::counter_exhausted);
  EXPECT_EQ(this->Snapshot(), full);
  auto by_key = this->S().list_issued({this->Ref("a"), std::string("k4")});
  ASSERT_TRUE(by_key.ok());
  EXPECT_TRUE(by_key->items.empty());
}

// --- lifecycle -------------------------------------------------------------------------------

TYPED_TEST(StoreConformance, AfterCloseEverythingIsStoreUnavailable) {
  this->MustCreate("c", Config());
  ASSERT_TRUE(this->store_->check_ready().ok());
  this->store_->close();
  this->store_->close();  // idempotent
  ExpectError(this->Next("c"), errc::store_unavailable);
  ExpectError(this->S().create_counter({this->Ref("d"), Config()}), errc::store_unavailable);
  ExpectError(this->S().get_counter(this->Ref("c")), errc::store_unavailable);
  ExpectError(this->S().list_counters(StoreConformance<TypeParam>::kNs), errc::store_unavailable);
  auto ready = this->store_->check_ready();
  ASSERT_FALSE(ready.ok());
  EXPECT_EQ(ready.error().code, errc::store_unavailable);
}

TYPED_TEST(StoreConformance, StatsCountCommittedCommands) {
  const StoreStats before = this->store_->stats();
  this->MustCreate("c", Config());
  for (int i = 0; i < 5; ++i) ASSERT_GT(this->MustNext("c"), 0);
  const StoreStats after = this->store_->stats();
  EXPECT_EQ(after.committed_commands - before.committed_commands, 6u);
  EXPECT_GE(after.commits - before.commits, 1u);
  EXPECT_LE(after.commits - before.commits, 6u);
  EXPECT_EQ(after.failed_commits, before.failed_commits);
}

}  // namespace
}  // namespace ichido::store_testing
