// The transaction engine (batch_engine.h) against a fake BatchTransaction that records every
// step: which attempts ran in which mode, what each job saw, what was rolled back.
#include "store/batch_engine.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace ichido::store {
namespace {

// Tables no job of these tests touches: every call fails.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
class NullTables final : public Tables {
 public:
  Result<std::int64_t> next_token() override { return none(); }
  Result<std::optional<CounterRow>> find_counter(const std::string& ns,
                                                 const std::string& name) override {
    return none();
  }
  Result<std::int64_t> insert_counter(const CounterRow& row) override { return none(); }
  Result<std::vector<CounterRow>> list_counters(const std::string& ns) override { return none(); }
  Result<std::optional<PeriodRow>> find_period(std::int64_t counter_id,
                                               const std::string& period) override {
    return none();
  }
  Result<void> save_period(std::int64_t counter_id, const std::string& period,
                           const PeriodRow& row) override {
    return none();
  }
  Result<std::optional<core::IssuedNumber>> find_issued_by_key(std::int64_t counter_id,
                                                               const std::string& key) override {
    return none();
  }
  Result<std::optional<core::IssuedNumber>> find_issued(std::int64_t counter_id,
                                                        const std::string& period,
                                                        std::int64_t value) override {
    return none();
  }
  Result<std::optional<std::int64_t>> highest_issued(std::int64_t counter_id,
                                                     const std::string& period) override {
    return none();
  }
  Result<void> save_issued(std::int64_t counter_id, const core::IssuedNumber& rec) override {
    return none();
  }
  Result<std::vector<core::IssuedNumber>> list_issued(std::int64_t counter_id,
                                                      const std::string& period, std::int64_t after,
                                                      int limit) override {
    return none();
  }
  Result<std::optional<core::OnceRecord>> find_once(const std::string& ns,
                                                    const std::string& key) override {
    return none();
  }
  Result<void> save_once(const std::string& ns, const core::OnceRecord& rec) override {
    return none();
  }
  Result<bool> delete_once(const std::string& ns, const std::string& key) override {
    return none();
  }
  Result<std::vector<core::OnceRecord>> list_once(const std::string& ns, core::OnceFilter filter,
                                                  TimeMs now, const std::string& after,
                                                  int limit) override {
    return none();
  }
  Result<std::int64_t> purge_once_in(const std::string& ns, TimeMs older_than, int limit) override {
    return none();
  }
  Result<std::optional<NamespaceSettings>> find_ns_settings(const std::string& ns) override {
    return none();
  }
  Result<void> save_ns_settings(const std::string& ns, const NamespaceSettings& s) override {
    return none();
  }
  Result<void> insert_token(const core::TokenInfo& t) override { return none(); }
  Result<std::optional<core::TokenInfo>> find_token(const std::string& id) override {
    return none();
  }
  Result<std::optional<core::TokenInfo>> find_token_by_hash(const std::string& hash) override {
    return none();
  }
  Result<void> save_token(const core::TokenInfo& t) override { return none(); }
  Result<std::vector<core::TokenInfo>> list_tokens() override { return none(); }
  Result<std::int64_t> insert_audit(const core::AuditEntry& e) override { return none(); }
  Result<std::vector<core::AuditEntry>> list_audit(const AuditQuery& q) override { return none(); }
  Result<std::vector<std::string>> list_namespaces() override { return none(); }
  Result<OnceCounts> count_once(const std::string& ns, TimeMs now, std::int64_t cap) override {
    return none();
  }
  Result<std::optional<core::LockRecord>> find_lock(const std::string& ns,
                                                    const std::string& name) override {
    return none();
  }
  Result<void> save_lock(const std::string& ns, const core::LockRecord& rec) override {
    return none();
  }
  Result<void> delete_lock(const std::string& ns, const std::string& name) override {
    return none();
  }
  Result<std::vector<core::LockRecord>> list_live_locks(const std::string& ns,
                                                        TimeMs now) override {
    return none();
  }

 private:
  static Error none() { return Error(errc::internal, "no tables in this test"); }
};
#pragma GCC diagnostic pop

// Jobs write by bumping the fake's write count; a savepoint remembers it, and rolling back to it
// or rolling the whole transaction back restores it, so `kept` lists what stayed written.
class FakeTransaction final : public BatchTransaction {
 public:
  explicit FakeTransaction(Tables& tables) : tables_(tables) {}

  // What the fake records, in order: "begin optimistic", "savepoint", "job_done", ...
  std::vector<std::string> log;
  std::vector<BatchMode> attempts;
  std::uint64_t written = 0;      // the transaction's writes (jobs add to it)
  std::vector<std::string> kept;  // names written by jobs, undone with their rollbacks
  std::vector<Announcement> committed_announcements;
  TimeMs now = 1000;                       // begin's answer
  std::optional<Error> fail_begin;         // begin answers batch_failed with it
  std::optional<Error> fail_commit;        // commit answers batch_failed with it
  int fail_job_done_at = -1;               // job_done's nth call answers job_failed
  std::size_t begin_fails_job = SIZE_MAX;  // begin answers this job with an error

  Began begin(BatchMode mode, std::span<Job> /*batch*/, JobErrors& job_errors) override {
    attempts.push_back(mode);
    log.push_back(mode == BatchMode::optimistic ? "begin optimistic" : "begin isolated");
    if (fail_begin) return {TxStep::batch_failed(*fail_begin)};
    if (begin_fails_job != SIZE_MAX) {
      job_errors.set(begin_fails_job, Error(errc::store_unavailable, "busy"));
    }
    written = 0;
    kept.clear();
    return {TxStep::ok(), now};
  }
  Tables& tables() override { return tables_; }
  std::uint64_t writes() override { return written; }
  TxStep savepoint() override {
    log.push_back("savepoint");
    mark_ = kept.size();
    return TxStep::ok();
  }
  TxStep job_done(BatchMode /*mode*/) override {
    log.push_back("job_done");
    if (job_dones_++ == fail_job_done_at) {
      return TxStep::job_failed(Error(errc::store_unavailable, "the job's statement failed"));
    }
    return TxStep::ok();
  }
  TxStep rollback_to_savepoint() override {
    log.push_back("rollback_to_savepoint");
    kept.resize(mark_);
    return TxStep::ok();
  }
  TxStep release_savepoint() override {
    log.push_back("release_savepoint");
    return TxStep::ok();
  }
  TxStep rollback() override {
    log.push_back("rollback");
    kept.clear();
    return TxStep::ok();
  }
  TxStep flush() override {
    log.push_back("flush");
    return TxStep::ok();
  }
  TxStep commit(std::vector<Announcement> announcements) override {
    log.push_back("commit");
    if (fail_commit) return TxStep::batch_failed(*fail_commit);
    committed_announcements = std::move(announcements);
    return TxStep::ok();
  }

 private:
  Tables& tables_;
  std::size_t mark_ = 0;
  int job_dones_ = 0;
};

// What a job saw and how it was answered.
struct Seen {
  std::vector<TimeMs> nows;  // one per run
  int finished = 0;
  std::optional<Error> answer;  // the store error finish got, if any
};

// A job named `name` that writes (when `writes`), then keeps its change or not, or throws.
enum class Does { keep, fail_clean, fail_dirty, throw_up };
Job make_job(FakeTransaction& tx, Seen& seen, std::string name, Does does,
             std::vector<Announcement> announce = {}) {
  Job j;
  j.apply = [&tx, &seen, name, does](Tables&, TimeMs now) {
    seen.nows.push_back(now);
    if (does == Does::throw_up) {
      ++tx.written;
      tx.kept.push_back(name);
      throw std::runtime_error("boom");
    }
    if (does != Does::fail_clean) {
      ++tx.written;
      tx.kept.push_back(name);
    }
    return does == Does::keep;
  };
  j.finish = [&seen](const Error* e) {
    ++seen.finished;
    if (e) seen.answer = *e;
  };
  j.announce = std::move(announce);
  return j;
}

class BatchEngineTest : public ::testing::Test {
 protected:
  NullTables tables_;
  FakeTransaction tx_{tables_};
};

TEST_F(BatchEngineTest, AnOptimisticBatchCommitsWithoutSavepoints) {
  Seen a, b;
  std::vector<Job> batch;
  batch.push_back(make_job(tx_, a, "a", Does::keep));
  batch.push_back(make_job(tx_, b, "b", Does::fail_clean));  // failed, wrote nothing
  BatchResult r = run_transaction(tx_, batch);
  EXPECT_TRUE(r.committed);
  EXPECT_FALSE(r.isolated);
  EXPECT_EQ(tx_.log, (std::vector<std::string>{"begin optimistic", "job_done", "job_done", "flush",
                                               "commit"}));
  EXPECT_EQ(tx_.kept, (std::vector<std::string>{"a"}));
  r.finish(batch);
  EXPECT_EQ(a.finished, 1);
  EXPECT_EQ(b.finished, 1);
  EXPECT_FALSE(a.answer);
  EXPECT_FALSE(b.answer);  // its own (failed) result is its answer
  EXPECT_EQ(a.nows, std::vector<TimeMs>{1000});
}

TEST_F(BatchEngineTest, AFailedJobThatWroteMakesOneIsolatedRerunWithTheSameNow) {
  Seen a, b, c;
  std::vector<Job> batch;
  batch.push_back(make_job(tx_, a, "a", Does::keep));
  batch.push_back(make_job(tx_, b, "b", Does::fail_dirty));
  batch.push_back(make_job(tx_, c, "c", Does::keep));
  BatchResult r = run_transaction(tx_, batch);
  EXPECT_TRUE(r.committed);
  EXPECT_TRUE(r.isolated);
  EXPECT_EQ(tx_.attempts, (std::vector<BatchMode>{BatchMode::optimistic, BatchMode::isolated}));
  // The optimistic attempt stops at the dirty failure: c never ran in it.
  EXPECT_EQ(tx_.log,
            (std::vector<std::string>{
                "begin optimistic", "job_done", "job_done", "rollback", "begin isolated",
                "savepoint", "job_done", "release_savepoint",                           // a
                "savepoint", "job_done", "rollback_to_savepoint", "release_savepoint",  // b
                "savepoint", "job_done", "release_savepoint",                           // c
                "flush", "commit"}));
  EXPECT_EQ(tx_.kept, (std::vector<std::string>{"a", "c"}));  // only b's write undone
  EXPECT_EQ(a.nows, (std::vector<TimeMs>{1000, 1000}));
  EXPECT_EQ(b.nows, (std::vector<TimeMs>{1000, 1000}));
  EXPECT_EQ(c.nows, std::vector<TimeMs>{1000});
  r.finish(batch);
  EXPECT_EQ(a.finished + b.finished + c.finished, 3);
  EXPECT_FALSE(a.answer || b.answer || c.answer);
}

TEST_F(BatchEngineTest, AThrowingJobFailsAloneAndTheBatchGoesOn) {
  Seen a, b, c;
  std::vector<Job> batch;
  batch.push_back(make_job(tx_, a, "a", Does::keep));
  batch.push_back(make_job(tx_, b, "b", Does::throw_up));  // wrote, then threw
  batch.push_back(make_job(tx_, c, "c", Does::keep));
  BatchResult r = run_transaction(tx_, batch);
  EXPECT_TRUE(r.committed);
  EXPECT_TRUE(r.isolated);  // it wrote: its write is undone alone
  EXPECT_EQ(tx_.kept, (std::vector<std::string>{"a", "c"}));
  r.finish(batch);
  EXPECT_EQ(b.finished, 1);
  EXPECT_FALSE(b.answer);  // no result in its slot: TableStore's job answers internal
}

TEST_F(BatchEngineTest, ABatchFailureAnswersEveryJobWithTheStoreError) {
  tx_.fail_commit = Error(errc::store_unavailable, "disk gone");
  Seen a, b;
  std::vector<Job> batch;
  batch.push_back(make_job(tx_, a, "a", Does::keep));
  batch.push_back(make_job(tx_, b, "b", Does::fail_clean));
  BatchResult r = run_transaction(tx_, batch);
  EXPECT_FALSE(r.committed);
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->message, "disk gone");
  r.finish(batch);
  for (const Seen* s : {&a, &b}) {
    EXPECT_EQ(s->finished, 1);
    ASSERT_TRUE(s->answer);
    EXPECT_EQ(s->answer->message, "disk gone");
  }
}

TEST_F(BatchEngineTest, AFailedBeginRunsNoJob) {
  tx_.fail_begin = Error(errc::store_unavailable, "cannot begin");
  Seen a;
  std::vector<Job> batch;
  batch.push_back(make_job(tx_, a, "a", Does::keep));
  BatchResult r = run_transaction(tx_, batch);
  EXPECT_FALSE(r.committed);
  EXPECT_TRUE(a.nows.empty());
  r.finish(batch);
  ASSERT_TRUE(a.answer);
  EXPECT_EQ(a.answer->message, "cannot begin");
}

TEST_F(BatchEngineTest, AnnouncementsComeFromKeptJobsOnly) {
  Seen a, b, c;
  std::vector<Job> batch;
  batch.push_back(make_job(tx_, a, "a", Does::keep, {announce_tokens()}));
  batch.push_back(make_job(tx_, b, "b", Does::fail_clean, {announce_lock({"ns", "b"})}));
  batch.push_back(make_job(tx_, c, "c", Does::keep, {announce_once({"ns", "c"})}));
  BatchResult r = run_transaction(tx_, batch);
  ASSERT_TRUE(r.committed);
  ASSERT_EQ(tx_.committed_announcements.size(), 2u);
  EXPECT_EQ(tx_.committed_announcements[0].kind, Announcement::Kind::tokens);
  EXPECT_EQ(tx_.committed_announcements[1].kind, Announcement::Kind::once);
  EXPECT_EQ(tx_.committed_announcements[1].name, "c");
}

TEST_F(BatchEngineTest, AJobFailedByTheStoreAnswersItsOwnErrorAndIsRolledBack) {
  tx_.fail_job_done_at = 1;  // the second job's statements fail (isolated mode)
  Seen a, b;
  std::vector<Job> batch;
  batch.push_back(make_job(tx_, a, "a", Does::keep, {announce_tokens()}));
  batch.push_back(make_job(tx_, b, "b", Does::keep, {announce_lock({"ns", "b"})}));
  BatchResult r = run_transaction(tx_, batch, BatchMode::isolated);
  ASSERT_TRUE(r.committed);
  EXPECT_EQ(tx_.kept, (std::vector<std::string>{"a"}));
  ASSERT_EQ(tx_.committed_announcements.size(), 1u);  // not the failed job's
  r.finish(batch);
  EXPECT_FALSE(a.answer);
  ASSERT_TRUE(b.answer);
  EXPECT_EQ(b.answer->message, "the job's statement failed");
}

TEST_F(BatchEngineTest, AJobAnsweredByBeginDoesNotRun) {
  tx_.begin_fails_job = 0;
  Seen a, b;
  std::vector<Job> batch;
  batch.push_back(make_job(tx_, a, "a", Does::keep));
  batch.push_back(make_job(tx_, b, "b", Does::keep));
  BatchResult r = run_transaction(tx_, batch, BatchMode::isolated);
  ASSERT_TRUE(r.committed);
  EXPECT_TRUE(a.nows.empty());
  EXPECT_EQ(tx_.kept, (std::vector<std::string>{"b"}));
  r.finish(batch);
  ASSERT_TRUE(a.answer);
  EXPECT_EQ(a.answer->message, "busy");
  EXPECT_FALSE(b.answer);
}

TEST(JobErrors, KeepsAnswersByIndexWhateverOrderTheyCome) {
  JobErrors e;
  EXPECT_EQ(e.find(0), nullptr);
  e.set(5, Error(errc::internal, "five"));
  e.set(2, Error(errc::internal, "two"));
  e.set(5, Error(errc::internal, "five again"));
  EXPECT_EQ(e.size(), 2u);
  ASSERT_NE(e.find(2), nullptr);
  EXPECT_EQ(e.find(2)->message, "two");
  EXPECT_EQ(e.find(5)->message, "five again");
  EXPECT_EQ(e.find(3), nullptr);
}

}  // namespace
}  // namespace ichido::store
