#include "store/table_store.h"

#include <utility>

namespace ichido::store {

std::int64_t job_key(std::string_view kind, std::string_view a, std::string_view b) {
  std::uint64_t h = 14695981039346656037ull;  // FNV-1a 64 offset basis
  auto mix = [&h](std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;  // FNV-1a 64 prime
    }
  };
  mix(kind);
  mix(std::string_view("\0", 1));
  mix(a);
  mix(std::string_view("\0", 1));
  mix(b);
  return static_cast<std::int64_t>(h);
}

namespace {

// A counter command's keys and prefetch (the counter's row).
JobExtras counter_extras(const CounterRef& ref) {
  return JobExtras{
      counter_keys(ref), [ref](Tables& t) { t.prefetch_counter(ref.ns, ref.name); }, {}};
}

Result<CounterRow> load_counter(Tables& t, const CounterRef& ref) {
  auto row = t.find_counter(ref.ns, ref.name);
  if (!row.ok()) return std::move(row).error();
  if (!*row) {
    return Error(errc::counter_not_found,
                 "No counter '" + ref.name + "' in namespace '" + ref.ns +
                     "'; create it first with PUT (counters are never created implicitly).");
  }
  return std::move(**row);
}

Result<core::CounterInfo> info_of(Tables& t, const CounterRow& row, TimeMs now) {
  auto today = core::today(row.config, now);
  if (!today.ok()) return std::move(today).error();
  auto p = t.find_period(row.id, today->period);
  if (!p.ok()) return std::move(p).error();
  core::CounterInfo info;
  info.name = row.name;
  info.config = row.config;
  info.current_period = today->period;
  info.created_at = row.created_at;
  info.last_value = *p ? (*p)->last_value : row.config.start;
  info.issued_count = *p ? (*p)->issued_count : 0;
  info.voided_count = *p ? (*p)->voided_count : 0;
  return info;
}

// Resolves the period a void/issued request names: the current one by default, else a label of
// the counter's period kind.
Result<std::string> resolve_period(const core::CounterConfig& c, const core::Today& today,
                                   const std::optional<std::string>& requested) {
  if (!requested) return today.period;
  if (!core::is_period_label(c.period, *requested)) {
    return invalid_field("period", "The period must look like " +
                                       std::string(core::period_label_example(c.period)) +
                                       " for this counter.");
  }
  return *requested;
}

}  // namespace

void TableStore::create_counter(CreateCounterCmd cmd, Callback<CreateCounterReply> done) {
  JobExtras x = extras([&] { return counter_extras(cmd.ref); });
  AuditNote audit = std::move(cmd.audit);
  write_audited<CreateCounterReply>(
      [cmd = std::move(cmd)](Tables& t, TimeMs now) -> Result<CreateCounterReply> {
        auto existing = t.find_counter(cmd.ref.ns, cmd.ref.name);
        if (!existing.ok()) return std::move(existing).error();
        std::optional<core::CounterConfig> existing_config;
        if (*existing) existing_config = (*existing)->config;
        auto outcome = core::decide_create(existing_config, cmd.config);
        if (!outcome.ok()) return std::move(outcome).error();
        CounterRow row;
        if (*outcome == core::CreateOutcome::created) {
          row = CounterRow{0, cmd.ref.ns, cmd.ref.name, cmd.config, now};
          auto id = t.insert_counter(row);
          if (!id.ok()) return std::move(id).error();
          row.id = *id;
        } else {
          row = std::move(**existing);
        }
        auto info = info_of(t, row, now);
        if (!info.ok()) return std::move(info).error();
        return CreateCounterReply{*outcome == core::CreateOutcome::created, std::move(*info)};
      },
      std::move(audit), std::move(done), std::move(x),
      +[](const CreateCounterReply& r) { return r.created ? 201 : 200; });
}

void TableStore::next(NextCmd cmd, Callback<NextReply> done) {
  JobExtras x = extras([&] {
    JobExtras e = counter_extras(cmd.ref);
    e.prefetch = [ref = cmd.ref, key = cmd.next.key](Tables& t) {
      t.prefetch_counter(ref.ns, ref.name);
      if (key) t.prefetch_issued_by_key(ref.ns, ref.name, *key);
    };
    return e;
  });
  write<NextReply>(
      [cmd = std::move(cmd)](Tables& t, TimeMs now) -> Result<NextReply> {
        auto row = load_counter(t, cmd.ref);
        if (!row.ok()) return std::move(row).error();
        auto today = core::today(row->config, now);
        if (!today.ok()) return std::move(today).error();
        auto period = t.find_period(row->id, today->period);
        if (!period.ok()) return std::move(period).error();
        PeriodRow p = period->value_or(PeriodRow{row->config.start, 0, 0});
        // The rules decide as for a new key first; the number already issued to the key is
        // looked up only when the insert finds the key taken or the rules refuse a new number
        // (a known key is answered even by an exhausted counter). A new key then costs one
        // search of the key index, not two.
        const auto replay = [&]() -> Result<std::optional<NextReply>> {
          auto found = t.find_issued_by_key(row->id, *cmd.next.key);
          if (!found.ok()) return std::move(found).error();
          if (!*found) return std::optional<NextReply>();
          auto d = core::decide_next(row->config, *today, p.last_value, *found, cmd.next, now);
          if (!d.ok()) return std::move(d).error();
          return std::optional<NextReply>(NextReply{std::move(d->record), d->replayed});
        };
        auto d = core::decide_next(row->config, *today, p.last_value, std::nullopt, cmd.next, now);
        if (!d.ok()) {
          if (cmd.next.key) {
            auto r = replay();
            if (!r.ok()) return std::move(r).error();
            if (*r) return std::move(**r);
          }
          return std::move(d).error();
        }
        if (cmd.next.key) {
          auto inserted = t.insert_issued_unless_key(row->id, d->record);
          if (!inserted.ok()) return std::move(inserted).error();
          if (!*inserted) {
            auto r = replay();
            if (!r.ok()) return std::move(r).error();
            if (!*r) {
              return Error(errc::internal,
                           "The key's number was neither new nor found; nothing was issued.");
            }
            return std::move(**r);
          }
        } else {
          ICHIDO_TRY(t.save_issued(row->id, d->record));
        }
        p.last_value = d->record.value;
        p.issued_count += 1;
        ICHIDO_TRY(t.save_period(row->id, today->period, p));
        return NextReply{std::move(d->record), false};
      },
      std::move(done), std::move(x));
}

void TableStore::void_number(VoidCmd cmd, Callback<core::IssuedNumber> done) {
  JobExtras x = extras([&] { return counter_extras(cmd.ref); });
  AuditNote audit = std::move(cmd.audit);
  write_audited<core::IssuedNumber>(
      [cmd = std::move(cmd)](Tables& t, TimeMs now) -> Result<core::IssuedNumber> {
        auto row = load_counter(t, cmd.ref);
        if (!row.ok()) return std::move(row).error();
        auto today = core::today(row->config, now);
        if (!today.ok()) return std::move(today).error();
        auto period = resolve_period(row->config, *today, cmd.period);
        if (!period.ok()) return std::move(period).error();
        auto p = t.find_period(row->id, *period);
        if (!p.ok()) return std::move(p).error();
        auto existing = t.find_issued(row->id, *period, cmd.value);
        if (!existing.ok()) return std::move(existing).error();
        std::optional<std::int64_t> last;
        if (*p) last = (*p)->last_value;
        const bool was_voided = *existing && (*existing)->voided_at.has_value();
        auto rec = core::decide_void(row->config, *today, last, *existing, cmd.value, *period,
                                     cmd.reason, now);
        if (!rec.ok()) return std::move(rec).error();
        if (!was_voided) {
          ICHIDO_TRY(t.save_issued(row->id, *rec));
          PeriodRow np = **p;
          np.voided_count += 1;
          ICHIDO_TRY(t.save_period(row->id, *period, np));
        }
        return std::move(*rec);
      },
      std::move(audit), std::move(done), std::move(x));
}

void TableStore::set_last_value(SetCmd cmd, Callback<core::CounterInfo> done) {
  JobExtras x = extras([&] { return counter_extras(cmd.ref); });
  AuditNote audit = std::move(cmd.audit);
  write_audited<core::CounterInfo>(
      [cmd = std::move(cmd)](Tables& t, TimeMs now) -> Result<core::CounterInfo> {
        auto row = load_counter(t, cmd.ref);
        if (!row.ok()) return std::move(row).error();
        auto today = core::today(row->config, now);
        if (!today.ok()) return std::move(today).error();
        auto period = t.find_period(row->id, today->period);
        if (!period.ok()) return std::move(period).error();
        PeriodRow p = period->value_or(PeriodRow{row->config.start, 0, 0});
        auto highest = t.highest_issued(row->id, today->period);
        if (!highest.ok()) return std::move(highest).error();
        auto v = core::decide_set(row->config, p.last_value, *highest, cmd.expected_last_value,
                                  cmd.last_value);
        if (!v.ok()) return std::move(v).error();
        p.last_value = *v;
        ICHIDO_TRY(t.save_period(row->id, today->period, p));
        return info_of(t, *row, now);
      },
      std::move(audit), std::move(done), std::move(x));
}

void TableStore::get_counter(CounterRef ref, Callback<core::CounterInfo> done) {
  read<core::CounterInfo>(
      [ref = std::move(ref)](Tables& t, TimeMs now) -> Result<core::CounterInfo> {
        auto row = load_counter(t, ref);
        if (!row.ok()) return std::move(row).error();
        return info_of(t, *row, now);
      },
      std::move(done));
}

void TableStore::list_counters(std::string ns, Callback<std::vector<core::CounterInfo>> done) {
  read<std::vector<core::CounterInfo>>(
      [ns = std::move(ns)](Tables& t, TimeMs now) -> Result<std::vector<core::CounterInfo>> {
        auto rows = t.list_counters(ns);
        if (!rows.ok()) return std::move(rows).error();
        std::vector<core::CounterInfo> out;
        out.reserve(rows->size());
        for (const auto& r : *rows) {
          auto info = info_of(t, r, now);
          if (!info.ok()) return std::move(info).error();
          out.push_back(std::move(*info));
        }
        return out;
      },
      std::move(done));
}

void TableStore::list_issued(IssuedQuery q, Callback<IssuedPage> done) {
  read<IssuedPage>(
      [q = std::move(q)](Tables& t, TimeMs now) -> Result<IssuedPage> {
        // Checked before paging: limit 0 would page with back() of an empty vector and a
        // negative limit would resize to a huge size.
        if (q.limit < 1 || q.limit > kMaxIssuedLimit) {
          return invalid_field("limit", "The limit must be a whole number from 1 to 1000.");
        }
        auto row = load_counter(t, q.ref);
        if (!row.ok()) return std::move(row).error();
        IssuedPage page;
        if (q.key) {
          auto rec = t.find_issued_by_key(row->id, *q.key);
          if (!rec.ok()) return std::move(rec).error();
          if (*rec) page.items.push_back(std::move(**rec));
          return page;
        }
        auto today = core::today(row->config, now);
        if (!today.ok()) return std::move(today).error();
        auto period = resolve_period(row->config, *today, q.period);
        if (!period.ok()) return std::move(period).error();
        auto items = t.list_issued(row->id, *period, q.after, q.limit + 1);
        if (!items.ok()) return std::move(items).error();
        page.items = std::move(*items);
        if (static_cast<int>(page.items.size()) > q.limit) {
          page.items.resize(q.limit);
          page.next_after = page.items.back().value;
        }
        return page;
      },
      std::move(done));
}

}  // namespace ichido::store
