// The counter rulebook: configuration, number formats, periods and the pure decisions behind
// create / next / void / set. No I/O and no clock: stores load the affected rows, call these
// functions with `now`, and write what they return inside one transaction.
//
// Invariants a store must keep (and the conformance suite checks):
//   C1. Within one counter and period, issued values are unique and each is in [start+1, max].
//   C2. last_value(period) >= every value issued or voided in that period; next issues last+1.
//   C3. A key maps to at most one issued number per counter, forever (across periods and restarts);
//       `next` with a known key replays that record unchanged.
//   C4. A counter's config never changes after creation.
//
// Calendars. Every date rule works on the local date of `now` in the counter's zone (IANA name):
// periods roll over at local midnight. The fiscal year (年度) of a date is named by the calendar
// year in which it starts: with fiscal_year_start 4 (April, the Japanese default), 2027-03-31 is
// in FY2026 and 2027-04-01 in FY2027; with 1 the fiscal year is the calendar year. The Japanese
// era (元号) of a date is the one in force that day: 令和 from 2019-05-01, 平成 from 1989-01-08,
// 昭和 from 1926-12-25, 大正 from 1912-07-30, 明治 before (docs/decisions/190).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/names.h"
#include "ichido/clock.h"
#include "ichido/result.h"

namespace ichido::core {

enum class Period { none, year, month, day, fiscal_year };

std::string_view to_string(Period p);
Result<Period> parse_period(std::string_view s);  // error names field "period"

struct CounterConfig {
  std::int64_t start = 0;              // the last value already used
  std::int64_t max = kMaxJsonInteger;  // the highest value that may be issued
  std::string format = "{seq}";
  Period period = Period::none;
  std::string timezone = "UTC";
  bool require_key = false;
  // The month (1-12) a fiscal year starts in: required with Period::fiscal_year (the API's
  // default is kDefaultFiscalYearStart), and 0 with every other period.
  int fiscal_year_start = 0;

  bool operator==(const CounterConfig&) const = default;
};

inline constexpr std::size_t kMaxFormatBytes = 256;
inline constexpr std::size_t kMaxNoteBytes = 1024;
inline constexpr std::size_t kMaxReasonBytes = 1024;
inline constexpr int kMaxSeqWidth = 18;
inline constexpr int kMaxEraYearWidth = 4;
inline constexpr int kDefaultFiscalYearStart = 4;  // April: the Japanese 年度

// One parsed piece of a format string.
struct FormatPiece {
  enum class Kind { literal, seq, yyyy, yy, mm, dd, fy, fy2, era, era_initial, era_year };
  Kind kind = Kind::literal;
  std::string text;  // literal text
  int width = 0;     // {seq:N} / {era_year:N} zero-pad width, 0 for plain {seq} / {era_year}
};

// Parses "R-{seq:4}". Recognised: {seq}, {seq:N} (N = 1..18), {yyyy}, {yy}, {mm}, {dd}, {fy},
// {fy2}, {era}, {era_initial}, {era_year}, {era_year:N} (N = 1..4); "{{" and "}}" are literal
// braces. At least one {seq} is required. Errors name field "format".
Result<std::vector<FormatPiece>> parse_format(std::string_view format);

// parse_format through a small per-thread cache keyed by the format text: what `next` and `void`
// use, so a counter's format is not parsed again for every number. parse_format is a pure function
// of the text, so an entry can never be stale; a format that does not parse is not cached (its
// error is returned every time). At most kFormatCacheEntries formats are kept per thread; when a
// new one does not fit, the cache is emptied first. The returned pointer is valid until the next
// call on the same thread. Thread-safety: safe from any thread (each thread has its own cache).
inline constexpr std::size_t kFormatCacheEntries = 64;
Result<const std::vector<FormatPiece>*> parse_format_cached(std::string_view format);

// A calendar date in the counter's time zone.
struct LocalDate {
  int year = 1970;
  unsigned month = 1;
  unsigned day = 1;
};

// The local date at `now` in IANA zone `tz`. Unknown zone: invalid_request, field "timezone".
Result<LocalDate> local_date(std::string_view tz, TimeMs now);

// The fiscal year of `d` when fiscal years start on the 1st of month `start_month` (1-12): the
// calendar year in which that fiscal year starts (d.year when d.month >= start_month, else
// d.year - 1).
int fiscal_year_of(const LocalDate& d, int start_month);

// The Japanese era of date `d` (Gregorian, local): its name (令和), initial (R) and year within
// the era (8 for 2026; the first year is 1, never 元). The table is in the header comment.
struct JapaneseEra {
  std::string_view name;
  std::string_view initial;
  int year = 0;
};
JapaneseEra japanese_era(const LocalDate& d);

// "" for none, "2026" for year, "2026-04" for month, "2026-04-01" for day, "FY2026" for
// fiscal_year (the fiscal year of `d` with fiscal years starting in month `fiscal_year_start`).
std::string period_label(Period p, const LocalDate& d,
                         int fiscal_year_start = kDefaultFiscalYearStart);

// A label of period kind `p` for messages: "\"\"", "2026", "2026-04", "2026-04-01", "FY2026".
std::string_view period_label_example(Period p);

// True when `label` is a syntactically valid label for period kind `p`.
bool is_period_label(Period p, std::string_view label);

// Renders a parsed format for `value` issued on local date `d`; {fy} and {fy2} show
// `fiscal_year`. The three-argument form is for a counter without fiscal years ({fy} = d.year).
std::string render(const std::vector<FormatPiece>& pieces, std::int64_t value, const LocalDate& d,
                   int fiscal_year);
std::string render(const std::vector<FormatPiece>& pieces, std::int64_t value, const LocalDate& d);

// Checks every config field; the error names the offending field.
Result<void> validate_config(const CounterConfig& c);

// Where a counter stands "today": the local date, the current period's label and the fiscal
// year format placeholders show ({fy}: the fiscal year for Period::fiscal_year, else the year).
struct Today {
  LocalDate date;
  std::string period;
  int fiscal_year = 0;
};
Result<Today> today(const CounterConfig& c, TimeMs now);

// One issued (or voided) number: a row of the audit trail.
struct IssuedNumber {
  std::int64_t value = 0;
  std::string formatted;
  std::string period;
  std::optional<std::string> key;
  std::string note;
  TimeMs issued_at = 0;
  std::optional<TimeMs> voided_at;
  std::string void_reason;
};

// What GET returns for a counter: config plus where the current period stands.
struct CounterInfo {
  std::string name;
  CounterConfig config;
  std::int64_t last_value = 0;    // in the current period
  std::int64_t issued_count = 0;  // numbers issued by `next` in the current period
  std::int64_t voided_count = 0;  // numbers voided in the current period (issued ones voided
                                  // later, and values skipped by `set` then voided)
  std::string current_period;
  TimeMs created_at = 0;
};

// --- decisions -----------------------------------------------------------------------------

enum class CreateOutcome { created, already_exists };

// PUT semantics: created when absent, already_exists when identical, 409 counter_exists otherwise.
Result<CreateOutcome> decide_create(const std::optional<CounterConfig>& existing,
                                    const CounterConfig& wanted);

struct NextCommand {
  std::optional<std::string> key;
  std::string note;
};

struct NextDecision {
  IssuedNumber record;
  bool replayed = false;  // true: `record` is the stored one, write nothing
};

// `existing`: the record already issued to cmd.key (any period), if any.
// `last_value`: the current period's last value (config.start when the period has no row yet).
// Errors: key_required, counter_exhausted (details.max).
Result<NextDecision> decide_next(const CounterConfig& c, const Today& today,
                                 std::int64_t last_value,
                                 const std::optional<IssuedNumber>& existing,
                                 const NextCommand& cmd, TimeMs now);

// Voiding `value` in a period whose last value is `last_value` (nullopt: the period never issued).
// `existing`: the audit row of that value, if any. Returns the row to store (unchanged when already
// voided: voiding is idempotent). Errors: value_not_issued when value is outside start+1..last.
Result<IssuedNumber> decide_void(const CounterConfig& c, const Today& today,
                                 std::optional<std::int64_t> last_value,
                                 const std::optional<IssuedNumber>& existing, std::int64_t value,
                                 const std::string& period, const std::string& reason, TimeMs now);

// Compare-and-set of the current period's last value. `highest_used`: the largest value issued or
// voided in the current period (nullopt when none). Returns the new last value.
// Errors: value_mismatch (details.last_value), value_below_issued (details.highest_issued),
// invalid_request field last_value when outside start..max.
Result<std::int64_t> decide_set(const CounterConfig& c, std::int64_t last_value,
                                std::optional<std::int64_t> highest_used, std::int64_t expected,
                                std::int64_t new_value);

}  // namespace ichido::core
