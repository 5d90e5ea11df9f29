#include "ichido/clock.h"

#include <date/date.h>

#include <chrono>
#include <cstdio>
#include <cstring>

namespace ichido {

TimeMs SystemClock::now_ms() const {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

SystemClock& SystemClock::instance() {
  static SystemClock clock;
  return clock;
}

namespace {

char* two(char* p, unsigned v) {
  p[0] = static_cast<char>('0' + v / 10);
  p[1] = static_cast<char>('0' + v % 10);
  return p + 2;
}

}  // namespace

// Every answer with a time in it comes through here: digits by hand, not snprintf (which was
// ~4 % of a counter `next`'s instructions with the request log's own use of it).
std::string format_rfc3339(TimeMs t) {
  char buf[kRfc3339Max];
  return std::string(format_rfc3339(t, buf));
}

namespace {

// Any instant, through the calendar.
std::string_view format_by_calendar(TimeMs t, char (&buf)[kRfc3339Max]) {
  using namespace std::chrono;
  const sys_time<milliseconds> tp{milliseconds{t}};
  const auto day = floor<days>(tp);
  const date::year_month_day ymd{day};
  const date::hh_mm_ss<milliseconds> hms{tp - day};
  const int year = int(ymd.year());
  if (year < 0 || year > 9999) {  // outside RFC 3339's four digits: as before, by printf
    std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02d.%03dZ", year,
                  unsigned(ymd.month()), unsigned(ymd.day()), int(hms.hours().count()),
                  int(hms.minutes().count()), int(hms.seconds().count()),
                  int(hms.subseconds().count()));
    return buf;  // (NUL-terminated by snprintf)
  }
  char* p = two(buf, static_cast<unsigned>(year / 100));
  p = two(p, static_cast<unsigned>(year % 100));
  *p++ = '-';
  p = two(p, unsigned(ymd.month()));
  *p++ = '-';
  p = two(p, unsigned(ymd.day()));
  *p++ = 'T';
  p = two(p, static_cast<unsigned>(hms.hours().count()));
  *p++ = ':';
  p = two(p, static_cast<unsigned>(hms.minutes().count()));
  *p++ = ':';
  p = two(p, static_cast<unsigned>(hms.seconds().count()));
  *p++ = '.';
  const auto ms = static_cast<unsigned>(hms.subseconds().count());
  *p++ = static_cast<char>('0' + ms / 100);
  p = two(p, ms % 100);
  *p++ = 'Z';
  return std::string_view(buf, static_cast<std::size_t>(p - buf));
}

}  // namespace

// The date part ("2026-12-04T") is kept per thread for the last day formatted: the times in
// answers and log lines are nearly all of one day, and the calendar is the costly part. Only
// for days from 1970 to 9999; any other instant goes through the calendar each time.
std::string_view format_rfc3339(TimeMs t, char (&buf)[kRfc3339Max]) {
  constexpr TimeMs kDayMs = 86'400'000;
  constexpr std::size_t kDateBytes = 11;
  thread_local TimeMs cached_day = -1;  // days since 1970-01-01; -1: none yet
  thread_local char cached_date[kDateBytes];
  if (t < 0) return format_by_calendar(t, buf);
  const TimeMs day = t / kDayMs;
  if (day != cached_day) {
    const auto text = format_by_calendar(day * kDayMs, buf);
    if (text.size() != 24) return format_by_calendar(t, buf);  // a year past 9999
    std::memcpy(cached_date, text.data(), kDateBytes);
    cached_day = day;
  }
  std::memcpy(buf, cached_date, kDateBytes);
  auto in_day = static_cast<unsigned>(t - day * kDayMs);
  const unsigned ms = in_day % 1000;
  in_day /= 1000;
  char* p = two(buf + kDateBytes, in_day / 3600);
  *p++ = ':';
  p = two(p, in_day / 60 % 60);
  *p++ = ':';
  p = two(p, in_day % 60);
  *p++ = '.';
  *p++ = static_cast<char>('0' + ms / 100);
  p = two(p, ms % 100);
  *p++ = 'Z';
  return std::string_view(buf, static_cast<std::size_t>(p - buf));
}

}  // namespace ichido
