// The Japanese business calendar end to end: the server's --default-timezone, fiscal-year (年度)
// counters and the era placeholders, through the real binary. The boundaries themselves (31
// March / 1 April, 30 April / 1 May 2019, every start month) are tested with an injected clock
// in core/counter_test.cc and in the store conformance suite over every store; here
// FakeClock.* moves the embedded server's clock with libfaketime across the Japanese fiscal
// year's end (not over PostgreSQL, whose nodes take the time from the database).
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <string>

#include "api_client.h"
#include "server_process.h"
#include "test_util.h"

namespace ichido::testing {
namespace {

// The civil date in Tokyo (UTC+9 all year: Japan has no daylight saving time) at this instant.
struct TokyoDate {
  int year = 0;
  int month = 0;
  int day = 0;
};
TokyoDate tokyo_today() {
  const std::time_t now =
      std::chrono::system_clock::to_time_t(std::chrono::system_clock::now()) + 9 * 3600;
  std::tm tm{};
  gmtime_r(&now, &tm);
  return {tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday};
}

// What a counter with period fiscal_year (from April) in Tokyo shows today, computed here from
// the calendar rules as a user states them (not with the server's code): the fiscal year is the
// year it starts in, and every date since 2019-05-01 is in 令和, whose year 1 is 2019.
struct Expected {
  std::string period;
  std::string formatted;  // of "{era}{era_year}年度-{era_initial}{era_year:2}-{fy2}-{seq:3}" for 1
};
Expected expected_today() {
  const TokyoDate d = tokyo_today();
  const int fy = d.month >= 4 ? d.year : d.year - 1;
  const int era_year = d.year - 2018;
  char formatted[64];
  std::snprintf(formatted, sizeof formatted, "令和%d年度-R%02d-%02d-001", era_year, era_year,
                fy % 100);
  return {"FY" + std::to_string(fy), formatted};
}

class Calendar : public ::testing::Test {
 protected:
  TempDir dir_;
};

TEST_F(Calendar, ACounterWithoutATimezoneTakesTheServersDefaultAndGetShowsIt) {
  ServerProcess server(dir_.path() + "/data", {"--default-timezone", "Asia/Tokyo"});
  std::string err;
  ASSERT_TRUE(server.start(&err)) << err;
  ApiClient api(server.url());
  auto made = api.create("receipts", R"({"format":"R{yy}{mm}{dd}-{seq:3}","period":"day"})");
  ASSERT_EQ(made.status, 201) << made.body;
  EXPECT_EQ(made.str("timezone"), "Asia/Tokyo");
  auto got = api.get("receipts");
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.str("timezone"), "Asia/Tokyo");
  const TokyoDate d = tokyo_today();
  char today[16];
  std::snprintf(today, sizeof today, "%04d-%02d-%02d", d.year, d.month, d.day);
  auto n = api.next("receipts", "form-1");
  ASSERT_EQ(n.status, 200) << n.body;
  if (n.str("period") == today) {  // (unless Tokyo's midnight passed in between)
    EXPECT_EQ(n.str("formatted"), "R" + std::string(today + 2, 2) + std::string(today + 5, 2) +
                                      std::string(today + 8, 2) + "-001");
  }
  // The same PUT again is the same counter; an explicit zone is kept as given.
  EXPECT_EQ(api.create("receipts", R"({"format":"R{yy}{mm}{dd}-{seq:3}","period":"day"})").status,
            200);
  EXPECT_EQ(api.create("receipts", R"({"format":"R{yy}{mm}{dd}-{seq:3}","period":"day",
                                       "timezone":"Asia/Tokyo"})")
                .status,
            200);
  auto utc = api.create("utc", R"({"timezone":"UTC"})");
  ASSERT_EQ(utc.status, 201) << utc.body;
  EXPECT_EQ(utc.str("timezone"), "UTC");
  // The namespace settings show the server's default (the dashboard's counter form uses it).
  auto settings = api.send("GET", "/v1/ns/t/settings");
  ASSERT_EQ(settings.status, 200) << settings.body;
  EXPECT_EQ(settings.str("default_timezone"), "Asia/Tokyo");
}

TEST_F(Calendar, WithoutTheFlagCountersDefaultToUtc) {
  ServerProcess server(dir_.path() + "/data");
  std::string err;
  ASSERT_TRUE(server.start(&err)) << err;
  ApiClient api(server.url());
  auto made = api.create("c", "{}");
  ASSERT_EQ(made.status, 201) << made.body;
  EXPECT_EQ(made.str("timezone"), "UTC");
  EXPECT_EQ(api.send("GET", "/v1/ns/t/settings").str("default_timezone"), "UTC");
}

TEST_F(Calendar, AnUnknownDefaultTimezoneStopsTheServerBeforeItTouchesTheStore) {
  // (A server that starts would be stopped by timeout: exit 124.)
  auto [code, out] = run_command("timeout 10 " + std::string(ichido_binary()) +
                                 " serve --listen 127.0.0.1:0 --no-auth --data " + dir_.path() +
                                 "/data --default-timezone Asia/Tokio 2>&1");
  EXPECT_EQ(code, 2) << out;  // a usage error
  EXPECT_NE(out.find("--default-timezone"), std::string::npos) << out;
  EXPECT_NE(out.find("Asia/Tokio"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/data")) << out;
}

TEST_F(Calendar, AFiscalYearCounterNumbersByTheJapaneseFiscalYearAndEra) {
  ServerProcess server(dir_.path() + "/data");
  std::string err;
  ASSERT_TRUE(server.start(&err)) << err;
  ApiClient api(server.url());
  const std::string format = "{era}{era_year}年度-{era_initial}{era_year:2}-{fy2}-{seq:3}";
  boost::json::object config{{"format", format},
                             {"period", "fiscal_year"},
                             {"timezone", "Asia/Tokyo"},
                             {"require_key", true}};
  auto made = api.create("invoices", boost::json::serialize(config));
  ASSERT_EQ(made.status, 201) << made.body;
  EXPECT_EQ(made.str("period"), "fiscal_year");
  EXPECT_EQ(made.num("fiscal_year_start"), 4);  // the default: April
  Expected want = expected_today();
  auto n = api.next("invoices", "請求-1");
  ASSERT_EQ(n.status, 200) << n.body;
  if (n.str("period") != want.period) want = expected_today();  // the year turned meanwhile
  EXPECT_EQ(n.str("period"), want.period);
  EXPECT_EQ(n.str("formatted"), want.formatted);
  auto info = api.get("invoices");
  ASSERT_EQ(info.status, 200) << info.body;
  EXPECT_EQ(info.num("fiscal_year_start"), 4);
  EXPECT_EQ(info.str("current_period"), n.str("period"));
  // The period label names the trail and the void.
  auto trail = api.send("GET", api.counter_path("invoices") + "/issued?period=" + want.period);
  ASSERT_EQ(trail.status, 200) << trail.body;
  ASSERT_EQ(trail.at("items").as_array().size(), 1u);
  auto bad_label = api.send("GET", api.counter_path("invoices") + "/issued?period=2026");
  EXPECT_EQ(bad_label.status, 400) << bad_label.body;
  EXPECT_EQ(bad_label.error_field(), "period");
  // Explicit start month: part of the config; the same PUT is 200, another month 409.
  config["fiscal_year_start"] = 4;
  EXPECT_EQ(api.create("invoices", boost::json::serialize(config)).status, 200);
  config["fiscal_year_start"] = 1;
  auto other = api.create("invoices", boost::json::serialize(config));
  EXPECT_EQ(other.status, 409) << other.body;
  EXPECT_EQ(other.error_code(), "counter_exists");
  // Another counter's GET has no fiscal_year_start.
  ASSERT_EQ(api.create("monthly", R"({"period":"month"})").status, 201);
  EXPECT_FALSE(api.get("monthly").json.as_object().contains("fiscal_year_start"));
}

TEST_F(Calendar, AFiscalYearStartWithAnotherPeriodOrOutOfRangeIsRefusedAndCreatesNothing) {
  ServerProcess server(dir_.path() + "/data");
  std::string err;
  ASSERT_TRUE(server.start(&err)) << err;
  ApiClient api(server.url());
  for (const char* body :
       {R"({"period":"month","fiscal_year_start":4})", R"({"fiscal_year_start":4})",
        R"({"period":"fiscal_year","fiscal_year_start":0})",
        R"({"period":"fiscal_year","fiscal_year_start":13})",
        R"({"period":"fiscal_year","fiscal_year_start":"4"})",
        R"({"period":"fiscal_year","fiscal_year_start":4.5})"}) {
    SCOPED_TRACE(body);
    auto r = api.create("c", body);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(r.error_code(), "invalid_request");
    EXPECT_EQ(r.error_field(), "fiscal_year_start");
  }
  auto bad_format = api.create("c", R"({"format":"{era_year:5}-{seq}"})");
  EXPECT_EQ(bad_format.status, 400);
  EXPECT_EQ(bad_format.error_field(), "format");
  auto bad_period = api.create("c", R"({"period":"nendo"})");
  EXPECT_EQ(bad_period.status, 400);
  EXPECT_EQ(bad_period.error_field(), "period");
  EXPECT_EQ(api.get("c").status, 404);
}

// --- the server's clock moved across 31 March (embedded store only) ----------------------------

std::string libfaketime_path() {
  std::error_code ec;
  for (const auto& dir : std::filesystem::directory_iterator("/usr/lib", ec)) {
    const auto candidate = dir.path() / "faketime" / "libfaketimeMT.so.1";
    if (std::filesystem::exists(candidate, ec)) return candidate.string();
  }
  return "";
}

TEST(FakeClock, TheFiscalYearTurnsAtMidnightInTokyoAndAReplayKeepsTheOldYearsAnswer) {
  const std::string libfaketime = libfaketime_path();
  ASSERT_FALSE(libfaketime.empty()) << "no libfaketime: scripts/install-deps postgres installs it";
  TempDir dir;
  ServerProcess server(dir.path() + "/data", {"--default-timezone", "Asia/Tokyo"});
  auto at = [&](const char* utc) {  // the clock starts at `utc` and runs on from there
    server.set_env({{"LD_PRELOAD", libfaketime},
                    {"FAKETIME", std::string("@") + utc},
                    {"TZ", "UTC"},
                    {"FAKETIME_DONT_FAKE_MONOTONIC", "1"}});
  };
  std::string err;
  at("2027-03-31 14:59:00");  // 2027-03-31 23:59:00 in Tokyo: the last seconds of FY2026
  ASSERT_TRUE(server.start(&err)) << err;
  ApiClient api(server.url());
  ASSERT_EQ(api.create("invoices", R"({"format":"INV-{fy}-{seq:4}","period":"fiscal_year",
                                        "start":41})")
                .status,
            201);
  auto before = api.next("invoices", "order-1");
  ASSERT_EQ(before.status, 200) << before.body;
  EXPECT_EQ(before.str("period"), "FY2026") << server.log();
  EXPECT_EQ(before.str("formatted"), "INV-2026-0042");
  EXPECT_EQ(before.str("issued_at").substr(0, 17), "2027-03-31T14:59:");
  ASSERT_EQ(server.stop(), 0);

  at("2027-03-31 15:00:00");  // 2027-04-01 00:00:00 in Tokyo: FY2027 begins
  ASSERT_TRUE(server.start(&err)) << err;
  ApiClient after(server.url());
  auto info = after.get("invoices");
  ASSERT_EQ(info.status, 200) << info.body;
  EXPECT_EQ(info.str("current_period"), "FY2027");
  EXPECT_EQ(info.num("last_value"), 41);  // a new fiscal year starts again at start + 1
  auto first = after.next("invoices", "order-2");
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.str("period"), "FY2027");
  EXPECT_EQ(first.str("formatted"), "INV-2027-0042");
  auto replay = after.next("invoices", "order-1");
  ASSERT_EQ(replay.status, 200) << replay.body;
  EXPECT_TRUE(replay.at("replayed").as_bool());
  EXPECT_EQ(replay.str("period"), "FY2026");
  EXPECT_EQ(replay.str("formatted"), "INV-2026-0042");
  EXPECT_EQ(replay.str("issued_at"), before.str("issued_at"));
}

}  // namespace
}  // namespace ichido::testing
