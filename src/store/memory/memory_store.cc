#include "store/memory/memory_store.h"

#include <algorithm>
#include <set>

namespace ichido::store::memory {
namespace {

class MemoryTables final : public Tables {
 public:
  MemoryTables(MemoryStore::State& s, bool fail_audit) : s_(s), fail_audit_(fail_audit) {}

  Result<std::int64_t> next_token() override { return ++s_.last_token; }

  Result<std::optional<CounterRow>> find_counter(const std::string& ns,
                                                 const std::string& name) override {
    auto it = s_.counters.find({ns, name});
    if (it == s_.counters.end()) return std::optional<CounterRow>();
    return std::optional<CounterRow>(it->second);
  }
  Result<std::int64_t> insert_counter(const CounterRow& row) override {
    CounterRow r = row;
    r.id = s_.next_counter_id++;
    s_.counters[{r.ns, r.name}] = r;
    return r.id;
  }
  Result<std::vector<CounterRow>> list_counters(const std::string& ns) override {
    std::vector<CounterRow> out;
    for (auto it = s_.counters.lower_bound({ns, ""});
         it != s_.counters.end() && it->first.first == ns; ++it) {
      out.push_back(it->second);
    }
    return out;
  }
  Result<std::optional<PeriodRow>> find_period(std::int64_t id,
                                               const std::string& period) override {
    auto it = s_.periods.find({id, period});
    if (it == s_.periods.end()) return std::optional<PeriodRow>();
    return std::optional<PeriodRow>(it->second);
  }
  Result<void> save_period(std::int64_t id, const std::string& period,
                           const PeriodRow& row) override {
    s_.periods[{id, period}] = row;
    return {};
  }
  Result<std::optional<core::IssuedNumber>> find_issued_by_key(std::int64_t id,
                                                               const std::string& key) override {
    auto it = s_.issued_by_key.find({id, key});
    if (it == s_.issued_by_key.end()) return std::optional<core::IssuedNumber>();
    return std::optional<core::IssuedNumber>(s_.issued.at(it->second));
  }
  Result<std::optional<core::IssuedNumber>> find_issued(std::int64_t id, const std::string& period,
                                                        std::int64_t value) override {
    auto it = s_.issued.find({id, period, value});
    if (it == s_.issued.end()) return std::optional<core::IssuedNumber>();
    return std::optional<core::IssuedNumber>(it->second);
  }
  Result<std::optional<std::int64_t>> highest_issued(std::int64_t id,
                                                     const std::string& period) override {
    std::optional<std::int64_t> best;
    for (auto it = s_.issued.lower_bound({id, period, INT64_MIN});
         it != s_.issued.end() && std::get<0>(it->first) == id && std::get<1>(it->first) == period;
         ++it) {
      best = std::get<2>(it->first);
    }
    return best;
  }
  Result<void> save_issued(std::int64_t id, const core::IssuedNumber& rec) override {
    auto k = std::make_tuple(id, rec.period, rec.value);
    s_.issued[k] = rec;
    if (rec.key) s_.issued_by_key[{id, *rec.key}] = k;
    return {};
  }
  Result<std::vector<core::IssuedNumber>> list_issued(std::int64_t id, const std::string& period,
                                                      std::int64_t after, int limit) override {
    std::vector<core::IssuedNumber> out;
    for (auto it = s_.issued.upper_bound({id, period, after});
         it != s_.issued.end() && std::get<0>(it->first) == id &&
         std::get<1>(it->first) == period && static_cast<int>(out.size()) < limit;
         ++it) {
      out.push_back(it->second);
    }
    return out;
  }

  Result<std::optional<core::OnceRecord>> find_once(const std::string& ns,
                                                    const std::string& key) override {
    auto it = s_.once.find({ns, key});
    if (it == s_.once.end()) return std::optional<core::OnceRecord>();
    return std::optional<core::OnceRecord>(it->second);
  }
  Result<void> save_once(const std::string& ns, const core::OnceRecord& rec) override {
    s_.once[{ns, rec.key}] = rec;
    return {};
  }
  Result<bool> delete_once(const std::string& ns, const std::string& key) override {
    return s_.once.erase({ns, key}) > 0;
  }
  Result<std::vector<core::OnceRecord>> list_once(const std::string& ns, core::OnceFilter filter,
                                                  TimeMs now, const std::string& after,
                                                  int limit) override {
    std::vector<core::OnceRecord> out;
    for (auto it = s_.once.upper_bound({ns, after});
         it != s_.once.end() && it->first.first == ns && static_cast<int>(out.size()) < limit;
         ++it) {
      if (core::matches(filter, it->second, now)) out.push_back(it->second);
    }
    return out;
  }
  Result<std::optional<NamespaceSettings>> find_ns_settings(const std::string& ns) override {
    auto it = s_.ns_settings.find(ns);
    if (it == s_.ns_settings.end()) return std::optional<NamespaceSettings>();
    return std::optional<NamespaceSettings>(it->second);
  }
  Result<void> save_ns_settings(const std::string& ns, const NamespaceSettings& s) override {
    if (s == NamespaceSettings{}) {
      s_.ns_settings.erase(ns);
    } else {
      s_.ns_settings[ns] = s;
    }
    return {};
  }
  Result<std::int64_t> purge_once_in(const std::string& ns, TimeMs older_than, int limit) override {
    // Oldest first, like the SQLite store: collect (finished_at, map key), sort, erase a prefix.
    std::vector<std::pair<TimeMs, std::pair<std::string, std::string>>> finished;
    for (auto it = s_.once.lower_bound({ns, ""}); it != s_.once.end() && it->first.first == ns;
         ++it) {
      const auto& r = it->second;
      if (r.finished_at && *r.finished_at < older_than) {
        finished.emplace_back(*r.finished_at, it->first);
      }
    }
    std::sort(finished.begin(), finished.end());
    std::int64_t n = 0;
    for (const auto& f : finished) {
      if (n >= limit) break;
      s_.once.erase(f.second);
      ++n;
    }
    return n;
  }

  Result<void> insert_token(const core::TokenInfo& t) override {
    for (const auto& [id, other] : s_.tokens) {
      if (id == t.id || other.hash == t.hash) {
        return Error(errc::store_unavailable, "A token with this id or hash already exists.");
      }
    }
    s_.tokens[t.id] = t;
    return {};
  }
  Result<std::optional<core::TokenInfo>> find_token(const std::string& id) override {
    auto it = s_.tokens.find(id);
    if (it == s_.tokens.end()) return std::optional<core::TokenInfo>();
    return std::optional<core::TokenInfo>(it->second);
  }
  Result<std::optional<core::TokenInfo>> find_token_by_hash(const std::string& hash) override {
    for (const auto& [id, t] : s_.tokens) {
      if (t.hash == hash) return std::optional<core::TokenInfo>(t);
    }
    return std::optional<core::TokenInfo>();
  }
  Result<void> save_token(const core::TokenInfo& t) override {
    s_.tokens[t.id] = t;
    return {};
  }
  Result<std::vector<core::TokenInfo>> list_tokens() override {
    std::vector<core::TokenInfo> out;
    for (const auto& [id, t] : s_.tokens) out.push_back(t);
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
      return std::tie(a.created_at, a.id) < std::tie(b.created_at, b.id);
    });
    return out;
  }
  Result<std::int64_t> insert_audit(const core::AuditEntry& e) override {
    if (fail_audit_) return Error(errc::store_unavailable, "Injected fault: audit insert fails.");
    core::AuditEntry copy = e;
    copy.id = static_cast<std::int64_t>(s_.audit.size()) + 1;
    s_.audit.push_back(copy);
    return copy.id;
  }
  Result<std::vector<core::AuditEntry>> list_audit(const AuditQuery& q) override {
    std::vector<core::AuditEntry> out;
    auto take = [&](const core::AuditEntry& e) {
      if (e.id <= q.after || (q.before && e.id >= *q.before)) return;
      if (!q.actor.empty() && e.actor != q.actor) return;
      if (!q.action.empty() && e.action.find(q.action) == std::string::npos) return;
      if (q.ns && e.ns != *q.ns) return;
      out.push_back(e);
    };
    if (q.newest_first) {
      for (auto it = s_.audit.rbegin(); it != s_.audit.rend() && std::ssize(out) < q.limit; ++it)
        take(*it);
    } else {
      for (auto it = s_.audit.begin(); it != s_.audit.end() && std::ssize(out) < q.limit; ++it)
        take(*it);
    }
    return out;
  }
  Result<std::vector<std::string>> list_namespaces() override {
    std::set<std::string> names;
    for (const auto& [k, v] : s_.counters) names.insert(k.first);
    for (const auto& [k, v] : s_.once) names.insert(k.first);
    for (const auto& [k, v] : s_.locks) names.insert(k.first);
    return std::vector<std::string>(names.begin(), names.end());
  }
  Result<OnceCounts> count_once(const std::string& ns, TimeMs now, std::int64_t cap) override {
    OnceCounts c;
    std::int64_t processing_rows = 0;
    for (auto it = s_.once.lower_bound({ns, ""}); it != s_.once.end() && it->first.first == ns;
         ++it) {
      const core::OnceRecord& r = it->second;
      auto bump = [&](std::int64_t& n) {
        if (n < cap) ++n;
      };
      switch (r.state) {
        case core::OnceState::processing:
          if (processing_rows >= cap) break;
          ++processing_rows;
          if (core::matches(core::OnceFilter::expired, r, now)) {
            ++c.expired;
            if (!c.oldest_expired_lease || r.lease_expires_at < *c.oldest_expired_lease)
              c.oldest_expired_lease = r.lease_expires_at;
          } else {
            ++c.processing;
          }
          break;
        case core::OnceState::pending:
          bump(c.pending);
          break;
        case core::OnceState::completed:
          bump(c.completed);
          break;
        case core::OnceState::dead:
          bump(c.dead);
          break;
      }
    }
    c.capped = processing_rows >= cap || c.pending >= cap || c.completed >= cap || c.dead >= cap;
    return c;
  }

  Result<std::optional<core::LockRecord>> find_lock(const std::string& ns,
                                                    const std::string& name) override {
    auto it = s_.locks.find({ns, name});
    if (it == s_.locks.end()) return std::optional<core::LockRecord>();
    return std::optional<core::LockRecord>(it->second);
  }
  Result<void> save_lock(const std::string& ns, const core::LockRecord& rec) override {
    s_.locks[{ns, rec.name}] = rec;
    return {};
  }
  Result<void> delete_lock(const std::string& ns, const std::string& name) override {
    s_.locks.erase({ns, name});
    return {};
  }
  Result<std::vector<core::LockRecord>> list_live_locks(const std::string& ns,
                                                        TimeMs now) override {
    std::vector<core::LockRecord> out;
    for (auto it = s_.locks.lower_bound({ns, ""}); it != s_.locks.end() && it->first.first == ns;
         ++it) {
      if (core::is_held(it->second, now)) out.push_back(it->second);
    }
    return out;
  }

 private:
  MemoryStore::State& s_;
  const bool fail_audit_;
};

const Error& closed_error() {
  static const Error e(errc::store_unavailable,
                       "The store is closed; nothing was changed, retry against a running server.");
  return e;
}

}  // namespace

void MemoryStore::submit_write(Job job) {
  MutexLock lk(mu_);
  if (closed_) {
    lk.unlock();
    job.finish(&closed_error());
    return;
  }
  State copy = state_;
  MemoryTables tables(copy, fail_audit_);
  if (job.apply(tables, clock_->now_ms())) state_ = std::move(copy);
  stats_.commits += 1;
  stats_.committed_commands += 1;
  lk.unlock();
  job.finish(nullptr);
}

void MemoryStore::submit_read(Job job) {
  MutexLock lk(mu_);
  if (closed_) {
    lk.unlock();
    job.finish(&closed_error());
    return;
  }
  State& s = state_;
  MemoryTables tables(s, fail_audit_);
  (void)job.apply(tables, clock_->now_ms());
  lk.unlock();
  job.finish(nullptr);
}

Result<void> MemoryStore::check_ready() {
  MutexLock lk(mu_);
  if (closed_) return closed_error();
  return {};
}

StoreStats MemoryStore::stats() const {
  MutexLock lk(mu_);
  return stats_;
}

void MemoryStore::close() {
  MutexLock lk(mu_);
  closed_ = true;
}

}  // namespace ichido::store::memory
