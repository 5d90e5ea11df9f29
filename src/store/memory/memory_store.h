// MemoryStore: the reference store. Everything in maps under one mutex, nothing durable.
// It runs the same TableStore command logic as the SQLite store, so the conformance suite can
// compare them, and it backs unit tests and fuzzing where a disk would only slow things down.
// Each write job runs against a copy of the state that replaces it only on success (simple and
// obviously atomic; O(size) per write, which is fine for tests, and a reason not to use it in
// production). Callbacks run synchronously on the calling thread.
// Thread-safety: all public methods are safe from any thread.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "base/mutex.h"
#include "ichido/clock.h"
#include "store/table_store.h"

namespace ichido::store::memory {

class MemoryStore final : public TableStore {
 public:
  explicit MemoryStore(Clock* clock = &SystemClock::instance()) : clock_(clock) {}

  Result<void> check_ready() override;
  StoreStats stats() const override;
  void close() override;

  // Fault injection for tests: while set, appending to the audit log fails with
  // store_unavailable (inside whatever transaction does it).
  void fail_audit_inserts(bool on) {
    MutexLock lk(mu_);
    fail_audit_ = on;
  }

  struct State {
    std::int64_t next_counter_id = 1;
    std::int64_t last_token = 0;
    std::map<std::pair<std::string, std::string>, CounterRow> counters;  // (ns, name)
    std::map<std::pair<std::int64_t, std::string>, PeriodRow> periods;   // (id, period)
    std::map<std::tuple<std::int64_t, std::string, std::int64_t>, core::IssuedNumber> issued;
    std::map<std::pair<std::int64_t, std::string>,
             std::tuple<std::int64_t, std::string, std::int64_t>>
        issued_by_key;  // (id, key) -> issued map key
    std::map<std::pair<std::string, std::string>, core::OnceRecord> once;  // (ns, key)
    std::map<std::string, core::TokenInfo> tokens;                         // by id
    std::vector<core::AuditEntry> audit;
    std::map<std::pair<std::string, std::string>, core::LockRecord> locks;  // (ns, name)
    std::map<std::string, NamespaceSettings> ns_settings;
  };

 protected:
  void submit_write(Job job) override;
  void submit_read(Job job) override;

 private:
  Clock* clock_;
  mutable Mutex mu_;
  State state_ GUARDED_BY(mu_);
  bool closed_ GUARDED_BY(mu_) = false;
  bool fail_audit_ GUARDED_BY(mu_) = false;
  StoreStats stats_ GUARDED_BY(mu_);
};

}  // namespace ichido::store::memory
