// Test helpers for stores: a synchronous facade over the asynchronous Store interface, and a
// temporary data directory. For tests only (uses GoogleTest to report misuse).
//
// SyncStore calls a Store method and waits on a std::promise for its callback. A callback that
// never comes fails the test after a timeout instead of hanging it; a callback that comes twice
// (the contract says exactly once) is reported as a failure.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ichido/store.h"

namespace ichido::store_testing {

inline constexpr std::chrono::seconds kCallbackTimeout{60};

// Runs `start(callback)` and waits for the callback's result.
template <class T, class Start>
Result<T> CallAndWait(Start&& start) {
  auto promise = std::make_shared<std::promise<Result<T>>>();
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto future = promise->get_future();
  start(Callback<T>([promise, calls](Result<T> r) {
    if (calls->fetch_add(1) == 0) {
      promise->set_value(std::move(r));
    } else {
      ADD_FAILURE() << "a store callback was called more than once";
    }
  }));
  if (future.wait_for(kCallbackTimeout) != std::future_status::ready) {
    ADD_FAILURE() << "a store callback did not come within " << kCallbackTimeout.count() << " s";
    return Error(errc::internal, "timed out waiting for the store");
  }
  return future.get();
}

class SyncStore {
 public:
  explicit SyncStore(Store& store) : s_(store) {}

  Result<CreateCounterReply> create_counter(CreateCounterCmd cmd) {
    return CallAndWait<CreateCounterReply>(
        [&](auto cb) { s_.create_counter(std::move(cmd), std::move(cb)); });
  }
  Result<NextReply> next(NextCmd cmd) {
    return CallAndWait<NextReply>([&](auto cb) { s_.next(std::move(cmd), std::move(cb)); });
  }
  Result<core::IssuedNumber> void_number(VoidCmd cmd) {
    return CallAndWait<core::IssuedNumber>(
        [&](auto cb) { s_.void_number(std::move(cmd), std::move(cb)); });
  }
  Result<core::CounterInfo> set_last_value(SetCmd cmd) {
    return CallAndWait<core::CounterInfo>(
        [&](auto cb) { s_.set_last_value(std::move(cmd), std::move(cb)); });
  }
  Result<core::CounterInfo> get_counter(CounterRef ref) {
    return CallAndWait<core::CounterInfo>(
        [&](auto cb) { s_.get_counter(std::move(ref), std::move(cb)); });
  }
  Result<std::vector<core::CounterInfo>> list_counters(std::string ns) {
    return CallAndWait<std::vector<core::CounterInfo>>(
        [&](auto cb) { s_.list_counters(std::move(ns), std::move(cb)); });
  }
  Result<IssuedPage> list_issued(IssuedQuery q) {
    return CallAndWait<IssuedPage>([&](auto cb) { s_.list_issued(std::move(q), std::move(cb)); });
  }

  Result<BeginOnceReply> begin_once(BeginOnceCmd cmd) {
    return CallAndWait<BeginOnceReply>(
        [&](auto cb) { s_.begin_once(std::move(cmd), std::move(cb)); });
  }
  Result<core::OnceRecord> complete_once(CompleteOnceCmd cmd) {
    return CallAndWait<core::OnceRecord>(
        [&](auto cb) { s_.complete_once(std::move(cmd), std::move(cb)); });
  }
  Result<core::OnceRecord> fail_once(FailOnceCmd cmd) {
    return CallAndWait<core::OnceRecord>(
        [&](auto cb) { s_.fail_once(std::move(cmd), std::move(cb)); });
  }
  Result<core::OnceRecord> renew_once(RenewOnceCmd cmd) {
    return CallAndWait<core::OnceRecord>(
        [&](auto cb) { s_.renew_once(std::move(cmd), std::move(cb)); });
  }
  Result<core::OnceRecord> get_once(OnceRef ref) {
    return CallAndWait<core::OnceRecord>(
        [&](auto cb) { s_.get_once(std::move(ref), std::move(cb)); });
  }
  Result<OncePage> list_once(OnceQuery q) {
    return CallAndWait<OncePage>([&](auto cb) { s_.list_once(std::move(q), std::move(cb)); });
  }
  Result<bool> abandon_once(AbandonOnceCmd cmd) {
    return CallAndWait<bool>([&](auto cb) { s_.abandon_once(std::move(cmd), std::move(cb)); });
  }
  Result<core::OnceRecord> reset_once(OnceRef ref, AuditNote audit = std::nullopt) {
    return CallAndWait<core::OnceRecord>([&](auto cb) {
      s_.reset_once(ResetOnceCmd{std::move(ref), std::move(audit)}, std::move(cb));
    });
  }
  Result<std::int64_t> purge_once(PurgeOnceCmd cmd) {
    return CallAndWait<std::int64_t>(
        [&](auto cb) { s_.purge_once(std::move(cmd), std::move(cb)); });
  }
  Result<AcquireLockReply> acquire_lock(AcquireLockCmd cmd) {
    return CallAndWait<AcquireLockReply>(
        [&](auto cb) { s_.acquire_lock(std::move(cmd), std::move(cb)); });
  }
  Result<AcquireLockReply> leave_lock_queue(LeaveLockQueueCmd cmd) {
    return CallAndWait<AcquireLockReply>(
        [&](auto cb) { s_.leave_lock_queue(std::move(cmd), std::move(cb)); });
  }
  Result<Unit> release_lock(ReleaseLockCmd cmd) {
    return CallAndWait<Unit>([&](auto cb) { s_.release_lock(std::move(cmd), std::move(cb)); });
  }
  Result<core::LockRecord> renew_lock(RenewLockCmd cmd) {
    return CallAndWait<core::LockRecord>(
        [&](auto cb) { s_.renew_lock(std::move(cmd), std::move(cb)); });
  }
  Result<ForceReleaseReply> force_release_lock(LockRef ref, AuditNote audit = std::nullopt) {
    return CallAndWait<ForceReleaseReply>([&](auto cb) {
      s_.force_release_lock(ForceReleaseCmd{std::move(ref), std::move(audit)}, std::move(cb));
    });
  }
  Result<core::TokenInfo> create_token(core::TokenInfo t, AuditNote audit = std::nullopt) {
    return CallAndWait<core::TokenInfo>([&](auto cb) {
      s_.create_token(CreateTokenCmd{std::move(t), std::move(audit)}, std::move(cb));
    });
  }
  Result<core::TokenInfo> revoke_token(std::string id, AuditNote audit = std::nullopt) {
    return CallAndWait<core::TokenInfo>([&](auto cb) {
      s_.revoke_token(RevokeTokenCmd{std::move(id), std::move(audit)}, std::move(cb));
    });
  }
  Result<std::optional<core::TokenInfo>> find_token_by_hash(std::string hash) {
    return CallAndWait<std::optional<core::TokenInfo>>(
        [&](auto cb) { s_.find_token_by_hash(std::move(hash), std::move(cb)); });
  }
  Result<std::vector<core::AuditEntry>> list_audit(std::int64_t after = 0, int limit = 1000) {
    AuditQuery q;
    q.after = after;
    q.limit = limit;
    return list_audit(std::move(q));
  }
  Result<LockState> get_lock(LockRef ref) {
    return CallAndWait<LockState>([&](auto cb) { s_.get_lock(std::move(ref), std::move(cb)); });
  }
  Result<core::AuditEntry> append_audit(core::AuditEntry e) {
    return CallAndWait<core::AuditEntry>(
        [&](auto cb) { s_.append_audit(std::move(e), std::move(cb)); });
  }
  Result<std::vector<core::AuditEntry>> list_audit(AuditQuery q) {
    return CallAndWait<std::vector<core::AuditEntry>>(
        [&](auto cb) { s_.list_audit(std::move(q), std::move(cb)); });
  }
  Result<std::vector<NamespaceSummary>> summarize_namespaces(std::optional<std::string> ns,
                                                             std::int64_t cap) {
    return CallAndWait<std::vector<NamespaceSummary>>(
        [&](auto cb) { s_.summarize_namespaces(std::move(ns), cap, std::move(cb)); });
  }
  Result<NamespaceSettings> get_ns_settings(std::string ns) {
    return CallAndWait<NamespaceSettings>(
        [&](auto cb) { s_.get_ns_settings(std::move(ns), std::move(cb)); });
  }
  Result<NamespaceSettings> put_ns_settings(std::string ns, NamespaceSettings st,
                                            AuditNote audit = std::nullopt) {
    return CallAndWait<NamespaceSettings>([&](auto cb) {
      s_.put_ns_settings(PutNsSettingsCmd{std::move(ns), st, std::move(audit)}, std::move(cb));
    });
  }
  Result<std::vector<LockState>> list_locks(std::string ns) {
    return CallAndWait<std::vector<LockState>>(
        [&](auto cb) { s_.list_locks(std::move(ns), std::move(cb)); });
  }

 private:
  Store& s_;
};

// A fresh directory under the system temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ichido-test-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp failed for " << tmpl;
    }
    path_ = tmpl;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace ichido::store_testing
