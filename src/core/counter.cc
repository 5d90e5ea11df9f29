#include "core/counter.h"

#include <date/date.h>
#include <date/tz.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <unordered_map>

#include "core/fields.h"

namespace ichido::core {
namespace {

// Appends `v` as printf's "%0*lld" with `width` would (zeros after a '-'; width 0: none), without
// printf, which shows in the profile of `next`.
void append_padded(std::string& out, long long v, int width) {
  char digits[24];
  int n = 0;
  unsigned long long u = v < 0 ? 0ULL - static_cast<unsigned long long>(v) : v;
  do {
    digits[n++] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u != 0);
  if (v < 0) out += '-';
  for (int pad = width - n - (v < 0 ? 1 : 0); pad > 0; --pad) out += '0';
  while (n > 0) out += digits[--n];
}

}  // namespace

std::string_view to_string(Period p) {
  switch (p) {
    case Period::none:
      return "none";
    case Period::year:
      return "year";
    case Period::month:
      return "month";
    case Period::day:
      return "day";
    case Period::fiscal_year:
      return "fiscal_year";
  }
  return "none";
}

Result<Period> parse_period(std::string_view s) {
  if (s == "none") return Period::none;
  if (s == "year") return Period::year;
  if (s == "month") return Period::month;
  if (s == "day") return Period::day;
  if (s == "fiscal_year") return Period::fiscal_year;
  return invalid_field("period",
                       "The period must be one of none, year, month, day or fiscal_year.");
}

Result<std::vector<FormatPiece>> parse_format(std::string_view f) {
  using K = FormatPiece::Kind;
  if (f.size() > kMaxFormatBytes) {
    return invalid_field("format", "The format must be at most 256 bytes.");
  }
  std::vector<FormatPiece> out;
  std::string literal;
  bool has_seq = false;
  auto flush = [&] {
    if (!literal.empty()) out.push_back({K::literal, std::move(literal), 0});
    literal.clear();
  };
  for (std::size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if (c == '}') {
      if (i + 1 < f.size() && f[i + 1] == '}') {
        literal += '}';
        ++i;
        continue;
      }
      return invalid_field("format", "A '}' in the format must be written '}}'.");
    }
    if (c != '{') {
      literal += c;
      continue;
    }
    if (i + 1 < f.size() && f[i + 1] == '{') {
      literal += '{';
      ++i;
      continue;
    }
    const auto close = f.find('}', i);
    if (close == std::string_view::npos) {
      return invalid_field("format",
                           "A '{' in the format is not closed; write '{{' for a literal brace.");
    }
    const std::string_view tag = f.substr(i + 1, close - i - 1);
    FormatPiece piece;
    // "{name:N}": N as a width from 1 to max_width, else nullopt (checked before any overflow).
    auto width_of = [&](std::string_view name, int max_width) -> std::optional<int> {
      const auto digits = tag.substr(name.size() + 1);
      int w = 0;
      bool ok = !digits.empty() && digits.size() <= 2;
      for (std::size_t k = 0; ok && k < digits.size(); ++k) {
        if (digits[k] < '0' || digits[k] > '9')
          ok = false;
        else
          w = w * 10 + (digits[k] - '0');
      }
      if (!ok || w < 1 || w > max_width) return std::nullopt;
      return w;
    };
    if (tag == "seq") {
      piece.kind = K::seq;
    } else if (tag.size() > 4 && tag.substr(0, 4) == "seq:") {
      const auto w = width_of("seq", kMaxSeqWidth);
      if (!w) {
        return invalid_field("format", "In {seq:N}, N must be a whole number from 1 to 18.");
      }
      piece.kind = K::seq;
      piece.width = *w;
    } else if (tag == "era_year") {
      piece.kind = K::era_year;
    } else if (tag.size() > 9 && tag.substr(0, 9) == "era_year:") {
      const auto w = width_of("era_year", kMaxEraYearWidth);
      if (!w) {
        return invalid_field("format", "In {era_year:N}, N must be a whole number from 1 to 4.");
      }
      piece.kind = K::era_year;
      piece.width = *w;
    } else if (tag == "fy") {
      piece.kind = K::fy;
    } else if (tag == "fy2") {
      piece.kind = K::fy2;
    } else if (tag == "era") {
      piece.kind = K::era;
    } else if (tag == "era_initial") {
      piece.kind = K::era_initial;
    } else if (tag == "yyyy") {
      piece.kind = K::yyyy;
    } else if (tag == "yy") {
      piece.kind = K::yy;
    } else if (tag == "mm") {
      piece.kind = K::mm;
    } else if (tag == "dd") {
      piece.kind = K::dd;
    } else {
      return invalid_field("format", "Unknown placeholder {" + std::string(tag) +
                                         "}; use {seq}, {seq:N}, {yyyy}, {yy}, {mm}, {dd}, {fy}, "
                                         "{fy2}, {era}, {era_initial}, {era_year} or "
                                         "{era_year:N}.");
    }
    has_seq = has_seq || piece.kind == K::seq;
    flush();
    out.push_back(std::move(piece));
    i = close;
  }
  flush();
  if (!has_seq) {
    return invalid_field("format", "The format must contain {seq} or {seq:N}.");
  }
  return out;
}

Result<const std::vector<FormatPiece>*> parse_format_cached(std::string_view format) {
  struct TextHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  // Per thread, so no lock: the writer thread of a store (or each of its threads) has its own.
  thread_local std::unordered_map<std::string, std::vector<FormatPiece>, TextHash, std::equal_to<>>
      cache;
  if (auto it = cache.find(format); it != cache.end()) return &it->second;
  auto parsed = parse_format(format);
  if (!parsed.ok()) return std::move(parsed).error();
  if (cache.size() >= kFormatCacheEntries) cache.clear();
  return &cache.emplace(std::string(format), std::move(*parsed)).first->second;
}

namespace {

// The last date local_date() found, per thread, with the instants [from, until) that have that
// same date in that zone: the writer asks on every `next`, and a zone lookup with its conversion
// costs ≈ 900 instructions (callgrind); the range is exact (one local
// day under one UTC offset), so an answer from it is the one a lookup would give.
struct LocalDateMemo {
  std::string tz;
  TimeMs from = 0;
  TimeMs until = 0;  // from == until: nothing remembered
  LocalDate date;
};
thread_local LocalDateMemo local_date_memo;

}  // namespace

Result<LocalDate> local_date(std::string_view tz, TimeMs now) {
  using namespace std::chrono;
  LocalDateMemo& memo = local_date_memo;
  if (now >= memo.from && now < memo.until && tz == memo.tz) return memo.date;
  const date::time_zone* zone = nullptr;
  if (tz.empty() || tz.size() > 64) {
    return invalid_field("timezone",
                         "The timezone must be an IANA name such as UTC or Asia/Tokyo.");
  }
  try {
    zone = date::locate_zone(tz);
  } catch (const std::exception&) {
    return invalid_field("timezone", "Unknown timezone '" + std::string(tz) +
                                         "'; use an IANA name such as UTC or Asia/Tokyo.");
  }
  const sys_time<milliseconds> tp{milliseconds{now}};
  // What zone->to_local(tp) computes, with the offset's period kept for the memo.
  const date::sys_info info = zone->get_info(tp);
  const milliseconds offset = info.offset;
  const date::local_time<milliseconds> local{tp.time_since_epoch() + offset};
  const auto day = date::floor<date::days>(local);
  const date::year_month_day ymd{day};
  const LocalDate d{int(ymd.year()), unsigned(ymd.month()), unsigned(ymd.day())};
  // The UTC instants of this local day under this offset, within the period of the offset.
  const TimeMs day_from = duration_cast<milliseconds>(day.time_since_epoch() - offset).count();
  const TimeMs day_until = day_from + duration_cast<milliseconds>(date::days{1}).count();
  memo.tz.assign(tz);
  memo.from =
      std::max(day_from, duration_cast<milliseconds>(info.begin.time_since_epoch()).count());
  memo.until =
      std::min(day_until, duration_cast<milliseconds>(info.end.time_since_epoch()).count());
  memo.date = d;
  return d;
}

int fiscal_year_of(const LocalDate& d, int start_month) {
  return static_cast<int>(d.month) >= start_month ? d.year : d.year - 1;
}

JapaneseEra japanese_era(const LocalDate& d) {
  // Each era's first day (the day its name took effect), newest first.
  struct Start {
    int year;
    unsigned month;
    unsigned day;
    std::string_view name;
    std::string_view initial;
  };
  static constexpr Start kEras[] = {
      {2019, 5, 1, "令和", "R"},
      {1989, 1, 8, "平成", "H"},
      {1926, 12, 25, "昭和", "S"},
      {1912, 7, 30, "大正", "T"},
  };
  for (const Start& e : kEras) {
    const bool on_or_after = d.year != e.year
                                 ? d.year > e.year
                                 : (d.month != e.month ? d.month > e.month : d.day >= e.day);
    if (on_or_after) return JapaneseEra{e.name, e.initial, d.year - e.year + 1};
  }
  return JapaneseEra{"明治", "M", d.year - 1867};  // 明治元年 = 1868
}

std::string period_label(Period p, const LocalDate& d, int fiscal_year_start) {
  std::string out;
  if (p == Period::none) return out;
  if (p == Period::fiscal_year) {
    out = "FY";
    append_padded(out, fiscal_year_of(d, fiscal_year_start), 4);
    return out;
  }
  append_padded(out, d.year, 4);
  if (p == Period::year) return out;
  out += '-';
  append_padded(out, d.month, 2);
  if (p == Period::month) return out;
  out += '-';
  append_padded(out, d.day, 2);
  return out;
}

std::string_view period_label_example(Period p) {
  switch (p) {
    case Period::none:
      return "\"\"";
    case Period::year:
      return "2026";
    case Period::month:
      return "2026-04";
    case Period::day:
      return "2026-04-01";
    case Period::fiscal_year:
      return "FY2026";
  }
  return "\"\"";
}

bool is_period_label(Period p, std::string_view s) {
  auto digits = [&](std::size_t from, std::size_t n) {
    for (std::size_t i = from; i < from + n; ++i)
      if (s[i] < '0' || s[i] > '9') return false;
    return true;
  };
  switch (p) {
    case Period::none:
      return s.empty();
    case Period::year:
      return s.size() == 4 && digits(0, 4);
    case Period::month:
      return s.size() == 7 && digits(0, 4) && s[4] == '-' && digits(5, 2);
    case Period::day:
      return s.size() == 10 && digits(0, 4) && s[4] == '-' && digits(5, 2) && s[7] == '-' &&
             digits(8, 2);
    case Period::fiscal_year:
      return s.size() == 6 && s[0] == 'F' && s[1] == 'Y' && digits(2, 4);
  }
  return false;
}

std::string render(const std::vector<FormatPiece>& pieces, std::int64_t value, const LocalDate& d) {
  return render(pieces, value, d, d.year);
}

std::string render(const std::vector<FormatPiece>& pieces, std::int64_t value, const LocalDate& d,
                   int fiscal_year) {
  using K = FormatPiece::Kind;
  std::string out;
  std::optional<JapaneseEra> era;  // looked up once, only for a format that shows it
  auto era_of = [&]() -> const JapaneseEra& {
    if (!era) era = japanese_era(d);
    return *era;
  };
  for (const auto& p : pieces) {
    switch (p.kind) {
      case K::literal:
        out += p.text;
        break;
      case K::seq:
        append_padded(out, value, p.width);
        break;
      case K::yyyy:
        append_padded(out, d.year, 4);
        break;
      case K::yy:
        append_padded(out, d.year % 100, 2);
        break;
      case K::mm:
        append_padded(out, d.month, 2);
        break;
      case K::dd:
        append_padded(out, d.day, 2);
        break;
      case K::fy:
        append_padded(out, fiscal_year, 4);
        break;
      case K::fy2:
        append_padded(out, fiscal_year % 100, 2);
        break;
      case K::era:
        out += era_of().name;
        break;
      case K::era_initial:
        out += era_of().initial;
        break;
      case K::era_year:
        append_padded(out, era_of().year, p.width);
        break;
    }
  }
  return out;
}

Result<void> validate_config(const CounterConfig& c) {
  ICHIDO_TRY(check(field::kStart, c.start));
  ICHIDO_TRY(check(field::kMax, c.max));
  if (c.max <= c.start) {
    return invalid_field("max", "The max must be greater than start (and at most 2^53).");
  }
  ICHIDO_TRY(parse_format(c.format));
  ICHIDO_TRY(local_date(c.timezone, 0));
  if (c.period == Period::fiscal_year) {
    ICHIDO_TRY(check(field::kFiscalYearStart, c.fiscal_year_start));
  } else if (c.fiscal_year_start != 0) {
    return invalid_field("fiscal_year_start",
                         "The fiscal_year_start is only for period fiscal_year; leave it out for "
                         "this period.");
  }
  return {};
}

Result<Today> today(const CounterConfig& c, TimeMs now) {
  auto d = local_date(c.timezone, now);
  if (!d.ok()) return std::move(d).error();
  if (c.period == Period::fiscal_year) {
    const int fy = fiscal_year_of(*d, c.fiscal_year_start);
    return Today{*d, period_label(c.period, *d, c.fiscal_year_start), fy};
  }
  return Today{*d, period_label(c.period, *d), d->year};
}

Result<CreateOutcome> decide_create(const std::optional<CounterConfig>& existing,
                                    const CounterConfig& wanted) {
  ICHIDO_TRY(validate_config(wanted));
  if (!existing) return CreateOutcome::created;
  if (*existing == wanted) return CreateOutcome::already_exists;
  return Error(errc::counter_exists,
               "A counter with this name already exists with a different configuration; "
               "choose another name or use the existing configuration.");
}

Result<NextDecision> decide_next(const CounterConfig& c, const Today& today,
                                 std::int64_t last_value,
                                 const std::optional<IssuedNumber>& existing,
                                 const NextCommand& cmd, TimeMs now) {
  if (existing) return NextDecision{*existing, true};
  if (c.require_key && !cmd.key) {
    return Error(errc::key_required,
                 "This counter requires an idempotency key: send \"key\" with a value unique to "
                 "the item you are numbering.",
                 "key");
  }
  if (last_value >= c.max) {
    return Error(errc::counter_exhausted,
                 "The counter has issued its last allowed number (max); create a new counter or "
                 "raise the limit with a new counter.")
        .with("max", c.max);
  }
  auto pieces = parse_format_cached(c.format);
  if (!pieces.ok()) return std::move(pieces).error();  // unreachable for a validated config
  IssuedNumber rec;
  rec.value = last_value + 1;
  rec.formatted = render(**pieces, rec.value, today.date, today.fiscal_year);
  rec.period = today.period;
  rec.key = cmd.key;
  rec.note = cmd.note;
  rec.issued_at = now;
  return NextDecision{std::move(rec), false};
}

Result<IssuedNumber> decide_void(const CounterConfig& c, const Today& today,
                                 std::optional<std::int64_t> last_value,
                                 const std::optional<IssuedNumber>& existing, std::int64_t value,
                                 const std::string& period, const std::string& reason, TimeMs now) {
  if (existing && existing->voided_at) return *existing;  // idempotent
  if (!last_value || value <= c.start || value > *last_value) {
    return Error(errc::value_not_issued,
                 "That number has not been issued in this period, so it cannot be voided.")
        .with("value", value);
  }
  IssuedNumber rec;
  if (existing) {
    rec = *existing;
  } else {
    // A value skipped by `set`: record it as voided so the trail shows why it is missing.
    auto pieces = parse_format_cached(c.format);
    if (!pieces.ok()) return std::move(pieces).error();
    rec.value = value;
    rec.formatted = render(**pieces, value, today.date, today.fiscal_year);
    rec.period = period;
    rec.issued_at = now;
  }
  rec.voided_at = now;
  rec.void_reason = reason;
  return rec;
}

Result<std::int64_t> decide_set(const CounterConfig& c, std::int64_t last_value,
                                std::optional<std::int64_t> highest_used, std::int64_t expected,
                                std::int64_t new_value) {
  if (expected != last_value) {
    return Error(errc::value_mismatch,
                 "The counter's last value is not the expected one; read it again and retry.")
        .with("last_value", last_value);
  }
  if (new_value < c.start || new_value > c.max) {
    return invalid_field("last_value",
                         "The last_value must be between the counter's start and max.");
  }
  if (highest_used && new_value < *highest_used) {
    return Error(errc::value_below_issued,
                 "The new last value is below a number already issued in this period.")
        .with("highest_issued", *highest_used);
  }
  return new_value;
}

}  // namespace ichido::core
