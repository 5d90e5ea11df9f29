#include "ichido/clock.h"

#include <date/date.h>

#include <chrono>
#include <cstdio>

namespace ichido {

TimeMs SystemClock::now_ms() const {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

SystemClock& SystemClock::instance() {
  static SystemClock clock;
  return clock;
}

std::string format_rfc3339(TimeMs t) {
  using namespace std::chrono;
  const sys_time<milliseconds> tp{milliseconds{t}};
  const auto day = floor<days>(tp);
  const date::year_month_day ymd{day};
  const date::hh_mm_ss<milliseconds> hms{tp - day};
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02d.%03dZ", int(ymd.year()),
                unsigned(ymd.month()), unsigned(ymd.day()), int(hms.hours().count()),
                int(hms.minutes().count()), int(hms.seconds().count()),
                int(hms.subseconds().count()));
  return buf;
}

}  // namespace ichido
