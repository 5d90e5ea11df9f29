// ForwardingStore: a Store that passes every call to another one. Tests derive from it and
// override only the calls they want to hold back, fail or observe (fault injection at the Store
// boundary), so a change of the Store interface is made here once, not in every test double.
#pragma once

#include <utility>

#include "ichido/store.h"

namespace ichido::store_testing {

class ForwardingStore : public Store {
 public:
  explicit ForwardingStore(Store& inner) : in_(inner) {}

  void create_counter(CreateCounterCmd c, Callback<CreateCounterReply> d) override {
    in_.create_counter(std::move(c), std::move(d));
  }
  void next(NextCmd c, Callback<NextReply> d) override { in_.next(std::move(c), std::move(d)); }
  void void_number(VoidCmd c, Callback<core::IssuedNumber> d) override {
    in_.void_number(std::move(c), std::move(d));
  }
  void set_last_value(SetCmd c, Callback<core::CounterInfo> d) override {
    in_.set_last_value(std::move(c), std::move(d));
  }
  void get_counter(CounterRef r, Callback<core::CounterInfo> d) override {
    in_.get_counter(std::move(r), std::move(d));
  }
  void list_counters(std::string ns, Callback<std::vector<core::CounterInfo>> d) override {
    in_.list_counters(std::move(ns), std::move(d));
  }
  void list_issued(IssuedQuery q, Callback<IssuedPage> d) override {
    in_.list_issued(std::move(q), std::move(d));
  }
  void begin_once(BeginOnceCmd c, Callback<BeginOnceReply> d) override {
    in_.begin_once(std::move(c), std::move(d));
  }
  void complete_once(CompleteOnceCmd c, Callback<core::OnceRecord> d) override {
    in_.complete_once(std::move(c), std::move(d));
  }
  void fail_once(FailOnceCmd c, Callback<core::OnceRecord> d) override {
    in_.fail_once(std::move(c), std::move(d));
  }
  void renew_once(RenewOnceCmd c, Callback<core::OnceRecord> d) override {
    in_.renew_once(std::move(c), std::move(d));
  }
  void get_once(OnceRef r, Callback<core::OnceRecord> d) override {
    in_.get_once(std::move(r), std::move(d));
  }
  void list_once(OnceQuery q, Callback<OncePage> d) override {
    in_.list_once(std::move(q), std::move(d));
  }
  void abandon_once(AbandonOnceCmd c, Callback<bool> d) override {
    in_.abandon_once(std::move(c), std::move(d));
  }
  void reset_once(ResetOnceCmd c, Callback<core::OnceRecord> d) override {
    in_.reset_once(std::move(c), std::move(d));
  }
  void purge_once(PurgeOnceCmd c, Callback<std::int64_t> d) override {
    in_.purge_once(std::move(c), std::move(d));
  }
  void create_token(CreateTokenCmd c, Callback<core::TokenInfo> d) override {
    in_.create_token(std::move(c), std::move(d));
  }
  void revoke_token(RevokeTokenCmd c, Callback<core::TokenInfo> d) override {
    in_.revoke_token(std::move(c), std::move(d));
  }
  void list_tokens(Callback<std::vector<core::TokenInfo>> d) override {
    in_.list_tokens(std::move(d));
  }
  void find_token_by_hash(std::string h, Callback<std::optional<core::TokenInfo>> d) override {
    in_.find_token_by_hash(std::move(h), std::move(d));
  }
  void append_audit(core::AuditEntry e, Callback<core::AuditEntry> d) override {
    in_.append_audit(std::move(e), std::move(d));
  }
  void list_audit(AuditQuery q, Callback<std::vector<core::AuditEntry>> d) override {
    in_.list_audit(std::move(q), std::move(d));
  }
  void get_ns_settings(std::string ns, Callback<NamespaceSettings> d) override {
    in_.get_ns_settings(std::move(ns), std::move(d));
  }
  void put_ns_settings(PutNsSettingsCmd c, Callback<NamespaceSettings> d) override {
    in_.put_ns_settings(std::move(c), std::move(d));
  }
  void summarize_namespaces(std::optional<std::string> ns, std::int64_t cap,
                            Callback<std::vector<NamespaceSummary>> d) override {
    in_.summarize_namespaces(std::move(ns), cap, std::move(d));
  }
  void acquire_lock(AcquireLockCmd c, Callback<AcquireLockReply> d) override {
    in_.acquire_lock(std::move(c), std::move(d));
  }
  bool queues_lock_waiters() const override { return in_.queues_lock_waiters(); }
  void leave_lock_queue(LeaveLockQueueCmd c, Callback<AcquireLockReply> d) override {
    in_.leave_lock_queue(std::move(c), std::move(d));
  }
  void release_lock(ReleaseLockCmd c, Callback<Unit> d) override {
    in_.release_lock(std::move(c), std::move(d));
  }
  void renew_lock(RenewLockCmd c, Callback<core::LockRecord> d) override {
    in_.renew_lock(std::move(c), std::move(d));
  }
  void force_release_lock(ForceReleaseCmd c, Callback<ForceReleaseReply> d) override {
    in_.force_release_lock(std::move(c), std::move(d));
  }
  void get_lock(LockRef r, Callback<LockState> d) override {
    in_.get_lock(std::move(r), std::move(d));
  }
  void list_locks(std::string ns, Callback<std::vector<LockState>> d) override {
    in_.list_locks(std::move(ns), std::move(d));
  }
  Result<void> check_ready() override { return in_.check_ready(); }
  StoreStats stats() const override { return in_.stats(); }
  void close() override { in_.close(); }

 protected:
  Store& in_;
};

}  // namespace ichido::store_testing
