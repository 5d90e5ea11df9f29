// The once-record commands of TableStore, written once on Tables + the core rulebook
// (core/once.h): load the record, ask core, draw a token when the decision acquires, check the
// invariants of what will be saved, save it — all inside the backend's durable transaction. A
// begin asks core first what a new key gets and inserts that unless the key is taken
// (Tables::insert_once_unless_found, decision 130).
#include <utility>

#include "store/table_store.h"

namespace ichido::store {
namespace {

using core::OnceRecord;

Result<std::optional<OnceRecord>> load(Tables& t, const OnceRef& ref) {
  return t.find_once(ref.ns, ref.key);
}

// Saves a record the rulebook produced, refusing one that breaks an invariant (a bug: the
// command fails with errc::internal and its transaction is rolled back, nothing changes).
Result<void> save_checked(Tables& t, const std::string& ns, const OnceRecord& rec) {
  ICHIDO_TRY(core::check_invariants(rec));
  return t.save_once(ns, rec);
}

// A once command's keys and prefetch (the record's row), and its announcement when `wakes`: the
// command may end the record's "in progress" for waiters on other nodes.
JobExtras once_extras(const OnceRef& ref, bool wakes) {
  JobExtras e{once_keys(ref), [ref](Tables& t) { t.prefetch_once(ref.ns, ref.key); }, {}};
  if (wakes) e.announce.push_back(announce_once(ref));
  return e;
}

}  // namespace

void TableStore::begin_once(BeginOnceCmd cmd, Callback<BeginOnceReply> done) {
  JobExtras x = extras([&] {
    JobExtras e = once_extras(cmd.ref, /*wakes=*/false);
    e.prefetch = [ref = cmd.ref](Tables& t) {
      t.prefetch_once(ref.ns, ref.key);
      t.prefetch_token();
    };
    return e;
  });
  write<BeginOnceReply>(
      [cmd = std::move(cmd)](Tables& t, TimeMs now) -> Result<BeginOnceReply> {
        // Most begins are of a key nobody has begun: what the rulebook gives such a key (a new
        // record, acquired) is inserted unless a record is found, and only a found one is
        // decided on. (Were that decision ever not to acquire, the record is read first.)
        auto fresh = core::decide_begin(std::nullopt, cmd.ref.key, cmd.begin, now);
        Result<std::optional<OnceRecord>> existing = std::optional<OnceRecord>();
        if (fresh.ok() && fresh->outcome == core::BeginOutcome::acquired && fresh->write) {
          existing = t.insert_once_unless_found(cmd.ref.ns, fresh->record);
          if (existing.ok() && !*existing) {
            return BeginOnceReply{fresh->outcome, std::move(fresh->record), fresh->retry_after_ms,
                                  fresh->replayed};
          }
        } else {
          existing = load(t, cmd.ref);
        }
        if (!existing.ok()) return std::move(existing).error();
        auto d = core::decide_begin(*existing, cmd.ref.key, cmd.begin, now);
        if (!d.ok()) return std::move(d).error();
        if (d->outcome == core::BeginOutcome::acquired && !d->replayed) {
          auto token = t.next_token();
          if (!token.ok()) return std::move(token).error();
          d->record.token = *token;
        }
        if (d->write) ICHIDO_TRY(save_checked(t, cmd.ref.ns, d->record));
        return BeginOnceReply{d->outcome, std::move(d->record), d->retry_after_ms, d->replayed};
      },
      std::move(done), std::move(x));
}

void TableStore::complete_once(CompleteOnceCmd cmd, Callback<OnceRecord> done) {
  JobExtras x = extras([&] { return once_extras(cmd.ref, /*wakes=*/true); });
  write<OnceRecord>(
      [cmd = std::move(cmd)](Tables& t, TimeMs now) -> Result<OnceRecord> {
        auto existing = load(t, cmd.ref);
        if (!existing.ok()) return std::move(existing).error();
        if (!*existing) return core::once_not_found(cmd.ref.key);
        auto c = core::decide_complete(*existing, cmd.token, cmd.result_json, now);
        if (!c.ok()) return std::move(c).error();
        if (c->write) ICHIDO_TRY(save_checked(t, cmd.ref.ns, c->record));
        return std::move(c->record);
      },
      std::move(done), std::move(x));
}

void TableStore::fail_once(FailOnceCmd cmd, Callback<OnceRecord> done) {
  JobExtras x = extras([&] { return once_extras(cmd.ref, /*wakes=*/true); });
  write<OnceRecord>(
      [cmd = std::move(cmd)](Tables& t, TimeMs now) -> Result<OnceRecord> {
        auto existing = load(t, cmd.ref);
        if (!existing.ok()) return std::move(existing).error();
        if (!*existing) return core::once_not_found(cmd.ref.key);
        auto c = core::decide_fail(*existing, cmd.token, cmd.error, cmd.retry, now);
        if (!c.ok()) return std::move(c).error();
        if (c->write) ICHIDO_TRY(save_checked(t, cmd.ref.ns, c->record));
        return std::move(c->record);
      },
      std::move(done), std::move(x));
}

void TableStore::renew_once(RenewOnceCmd cmd, Callback<OnceRecord> done) {
  JobExtras x = extras([&] { return once_extras(cmd.ref, /*wakes=*/false); });
  write<OnceRecord>(
      [cmd = std::move(cmd)](Tables& t, TimeMs now) -> Result<OnceRecord> {
        auto existing = load(t, cmd.ref);
        if (!existing.ok()) return std::move(existing).error();
        if (!*existing) return core::once_not_found(cmd.ref.key);
        auto r = core::decide_renew(*existing, cmd.token, cmd.lease_ms, now);
        if (!r.ok()) return std::move(r).error();
        ICHIDO_TRY(save_checked(t, cmd.ref.ns, *r));
        return std::move(*r);
      },
      std::move(done), std::move(x));
}

void TableStore::get_once(OnceRef ref, Callback<OnceRecord> done) {
  read<OnceRecord>(
      [ref = std::move(ref)](Tables& t, TimeMs) -> Result<OnceRecord> {
        auto existing = load(t, ref);
        if (!existing.ok()) return std::move(existing).error();
        if (!*existing) return core::once_not_found(ref.key);
        return std::move(**existing);
      },
      std::move(done));
}

void TableStore::list_once(OnceQuery q, Callback<OncePage> done) {
  read<OncePage>(
      [q = std::move(q)](Tables& t, TimeMs now) -> Result<OncePage> {
        if (q.limit < 1 || q.limit > kMaxOnceLimit) {
          return invalid_field("limit", "The limit must be a whole number from 1 to 1000.");
        }
        auto items = t.list_once(q.ns, q.filter, now, q.after, q.limit + 1);
        if (!items.ok()) return std::move(items).error();
        OncePage page;
        page.items = std::move(*items);
        if (static_cast<int>(page.items.size()) > q.limit) {
          page.items.resize(q.limit);
          page.next_after = page.items.back().key;
        }
        return page;
      },
      std::move(done));
}

void TableStore::abandon_once(AbandonOnceCmd cmd, Callback<bool> done) {
  JobExtras x = extras([&] { return once_extras(cmd.ref, /*wakes=*/true); });
  write<bool>(
      [cmd = std::move(cmd)](Tables& t, TimeMs now) -> Result<bool> {
        auto existing = load(t, cmd.ref);
        if (!existing.ok()) return std::move(existing).error();
        auto a = core::decide_abandon(*existing, cmd.token, now);
        if (!a.write) return false;
        if (a.record) {
          ICHIDO_TRY(save_checked(t, cmd.ref.ns, *a.record));
        } else {
          auto deleted = t.delete_once(cmd.ref.ns, cmd.ref.key);
          if (!deleted.ok()) return std::move(deleted).error();
        }
        return true;
      },
      std::move(done), std::move(x));
}

void TableStore::reset_once(ResetOnceCmd cmd, Callback<OnceRecord> done) {
  JobExtras x = extras([&] { return once_extras(cmd.ref, /*wakes=*/true); });
  write_audited<OnceRecord>(
      [ref = std::move(cmd.ref)](Tables& t, TimeMs) -> Result<OnceRecord> {
        auto existing = load(t, ref);
        if (!existing.ok()) return std::move(existing).error();
        if (!*existing) return core::once_not_found(ref.key);
        auto deleted = t.delete_once(ref.ns, ref.key);
        if (!deleted.ok()) return std::move(deleted).error();
        return std::move(**existing);
      },
      std::move(cmd.audit), std::move(done), std::move(x));
}

void TableStore::purge_once(PurgeOnceCmd cmd, Callback<std::int64_t> done) {
  write<std::int64_t>(
      [cmd](Tables& t, TimeMs now) -> Result<std::int64_t> {
        if (cmd.limit < 1 || cmd.limit > kMaxOnceLimit) {
          return invalid_field("limit", "The purge batch must be 1 to 1000 records.");
        }
        // Namespace by namespace (an index probe each), each with its own retention: a
        // namespace keeping records longer never slows the purge of the others. The default
        // cut-off is the store's clock minus cmd.retention_ms when set (with PostgreSQL the
        // database's clock, so every node purges alike).
        const TimeMs default_cutoff = cmd.retention_ms ? now - *cmd.retention_ms : cmd.older_than;
        auto names = t.list_namespaces();
        if (!names.ok()) return std::move(names).error();
        std::int64_t purged = 0;
        for (const auto& ns : *names) {
          auto settings = t.find_ns_settings(ns);
          if (!settings.ok()) return std::move(settings).error();
          const TimeMs cutoff = *settings && (*settings)->once_retention_ms
                                    ? now - *(*settings)->once_retention_ms
                                    : default_cutoff;
          auto n = t.purge_once_in(ns, cutoff, cmd.limit - static_cast<int>(purged));
          if (!n.ok()) return std::move(n).error();
          purged += *n;
          if (purged >= cmd.limit) break;
        }
        return purged;
      },
      std::move(done));
}

}  // namespace ichido::store
