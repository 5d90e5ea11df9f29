// The embedded store's failure paths against SQLite's real behaviour, with faults injected below
// it (store/testing/fault_vfs.h): a COMMIT whose WAL write or fsync fails, a full disk mid-batch,
// SQLite rolling a transaction back by itself, a job that throws, a read-only database, damage,
// the fatal latch — and recovery. Each test says which request got which answer and what the
// store holds afterwards (reopened through the plain VFS, as a restarted server would).
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "store/sqlite/sqlite_store.h"
#include "store/sqlite/test_peer.h"
#include "store/testing/fault_vfs.h"
#include "store/testing/sync_store.h"

namespace ichido::store::sqlite {

namespace {

using store_testing::fault_plan;
using store_testing::FaultPlan;
using store_testing::SyncStore;
using store_testing::TempDir;

class SqliteFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_testing::register_fault_vfs();
    fault_plan().reset();
  }
  void TearDown() override { fault_plan().reset(); }

  // The WAL is not filled ahead with zeros (decision 132) unless `zero_fill`: a fill between two
  // commits would take a fault meant for the second one, and add to the writes and syncs counted.
  // `quiet`: the zero fill's wal_zero_fill_quiet.
  std::unique_ptr<SqliteStore> Open(bool faulty = true, int checkpoint_frames = 1000,
                                    int restart_frames = 10000, bool zero_fill = false,
                                    std::chrono::milliseconds quiet = {}) {
    Options o;
    o.caller_may_commit = &test_caller_may_commit;
    o.checkpoint_frames = checkpoint_frames;
    o.restart_frames = restart_frames;
    if (zero_fill) {
      o.wal_zero_fill_quiet = quiet;
    } else {
      o.wal_zero_ahead = 0;
    }
    o.on_notice = [this](const std::string& line) {
      std::lock_guard lk(notices_mu_);
      notices_.push_back(line);
    };
    o.dir = dir_.path() + "/data";
    o.clock = &clock_;
    if (faulty) o.vfs = store_testing::kFaultVfs;
    auto s = SqliteStore::open(std::move(o));
    EXPECT_TRUE(s.ok()) << s.error().message;
    return s.ok() ? std::move(*s) : nullptr;
  }
  static CounterRef Ref() { return {"acme", "c"}; }
  static NextCmd Next(const std::string& key) { return {Ref(), {key, ""}}; }
  void MakeCounter(SqliteStore& s) {
    core::CounterConfig c;
    c.max = 1'000'000;
    ASSERT_TRUE(SyncStore(s).create_counter({Ref(), c}).ok());
  }
  // The keys the counter holds, in value order, read through the plain VFS after a restart.
  std::vector<std::string> KeysAfterRestart() {
    fault_plan().reset();
    auto s = Open(/*faulty=*/false);
    if (!s) return {};
    auto page = SyncStore(*s).list_issued({Ref(), std::nullopt, std::nullopt, 0, 1000});
    std::vector<std::string> keys;
    if (page.ok()) {
      for (const auto& n : page->items) keys.push_back(n.key.value_or("?"));
    }
    s->close();
    return keys;
  }
  // Holds the writer inside a batch (its answer callback blocks) so that what is submitted next
  // lands in one batch; returns the release.
  std::promise<void> HoldWriter(SqliteStore& s) {
    std::promise<void> held, release;
    auto released = release.get_future().share();
    s.next(Next("gate"), [&held, released](Result<NextReply>) {
      held.set_value();
      released.wait_for(std::chrono::seconds(60));
    });
    EXPECT_EQ(held.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready);
    return release;
  }
  // Submits `keys` as nexts, releases the writer, waits for every answer: "<value>" or the code
  // (with ":unknown" when details.outcome says so).
  std::vector<std::string> NextAll(SqliteStore& s, std::promise<void>& release,
                                   const std::vector<std::string>& keys) {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::string> out(keys.size());
    std::size_t answered = 0;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      s.next(Next(keys[i]), [&, i](Result<NextReply> r) {
        std::string what;
        if (r.ok()) {
          what = std::to_string(r->record.value);
        } else {
          what = std::string(to_string(r.error().code));
          if (r.error().details.count("outcome")) what += ":unknown";
        }
        std::lock_guard lk(mu);
        out[i] = what;
        ++answered;
        cv.notify_all();
      });
    }
    release.set_value();
    std::unique_lock lk(mu);
    EXPECT_TRUE(cv.wait_for(lk, std::chrono::seconds(60), [&] { return answered == keys.size(); }));
    return out;
  }

  bool Noticed(const std::string& part) {
    std::lock_guard lk(notices_mu_);
    for (const auto& n : notices_) {
      if (n.find(part) != std::string::npos) return true;
    }
    return false;
  }

  ManualClock clock_{1'775'000'000'000};
  TempDir dir_;
  std::mutex notices_mu_;
  std::vector<std::string> notices_;  // Options::on_notice's lines
};

// A COMMIT whose WAL write fails: no answer of the batch is a success, each says the outcome is
// unknown, the store latches (no more writes, unhealthy), and after a restart the batch is absent.
TEST_F(SqliteFaultTest, ACommitWhoseWriteFailsAnswersNoSuccessAndLatches) {
  auto s = Open();
  ASSERT_TRUE(s);
  MakeCounter(*s);
  auto release = HoldWriter(*s);
  fault_plan().fail_writes.store(1);
  auto answers = NextAll(*s, release, {"a", "b", "c"});
  EXPECT_EQ(answers, (std::vector<std::string>(3, "store_unavailable:unknown")));
  EXPECT_GE(fault_plan().injected.load(), 1);
  ASSERT_FALSE(s->check_health().ok()) << "the fatal latch must make /healthz fail";
  EXPECT_FALSE(s->check_ready().ok());
  auto later = SyncStore(*s).next(Next("d"));
  ASSERT_FALSE(later.ok());
  EXPECT_EQ(later.error().code, errc::store_unavailable) << "writes stay refused until restart";
  EXPECT_TRUE(SyncStore(*s).get_counter(Ref()).ok()) << "reads still work";
  s->close();
  EXPECT_EQ(KeysAfterRestart(), (std::vector<std::string>{"gate"}));
}

// A COMMIT whose fsync fails: the frames may be in the WAL file (they are here: the write went
// through), so "may or may not have been saved" is the only honest answer; after a restart SQLite
// recovers them, and the store works again.
TEST_F(SqliteFaultTest, ACommitWhoseFsyncFailsSaysOutcomeUnknownAndRecoversOnRestart) {
  auto s = Open();
  ASSERT_TRUE(s);
  MakeCounter(*s);
  auto release = HoldWriter(*s);
  fault_plan().fail_syncs.store(1);
  auto answers = NextAll(*s, release, {"a", "b"});
  EXPECT_EQ(answers, (std::vector<std::string>(2, "store_unavailable:unknown")));
  EXPECT_FALSE(s->check_health().ok());
  s->close();
  EXPECT_EQ(KeysAfterRestart(), (std::vector<std::string>{"gate", "a", "b"}));
  auto again = Open(/*faulty=*/false);
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->check_health().ok());
  auto n = SyncStore(*again).next(Next("e"));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->record.value, 4);
}

// The same on a lone write run on the caller's thread (decision 141): the caller is answered,
// before its call returns, that the outcome is unknown; the store latches for every thread; a
// restart recovers the write.
TEST_F(SqliteFaultTest, ALoneWriteWhoseFsyncFailsOnTheCallersThreadSaysOutcomeUnknown) {
  auto s = Open();
  ASSERT_TRUE(s);
  MakeCounter(*s);
  std::string first, second;
  std::thread lone([&] {
    test_serves_one_client() = true;
    auto answer = [&](const std::string& key) {
      std::string what = "not answered before the call returned";
      s->next(Next(key), [&](Result<NextReply> r) {
        what = r.ok() ? std::to_string(r->record.value) : std::string(to_string(r.error().code));
        if (!r.ok() && r.error().details.count("outcome")) what += ":unknown";
      });
      return what;
    };
    fault_plan().fail_syncs.store(1);
    first = answer("a");
    second = answer("b");
  });
  lone.join();
  EXPECT_EQ(first, "store_unavailable:unknown");
  EXPECT_EQ(second, "store_unavailable") << "refused at once: the latch";
  EXPECT_EQ(s->own_stats().caller_commits, 0u) << "a failed commit is no commit";
  EXPECT_FALSE(s->check_health().ok());
  EXPECT_FALSE(SyncStore(*s).next(Next("c")).ok()) << "and for the writer's callers too";
  s->close();
  EXPECT_EQ(KeysAfterRestart(), (std::vector<std::string>{"a"}));
}

// Decision 136: a checkpoint that cannot write the database file (every write to it fails here,
// and in WAL mode only checkpoints write it) changes no answer — the commits are in the WAL — and
// does not make the store unhealthy; after a restart everything is there.
TEST_F(SqliteFaultTest, AFailingCheckpointChangesNoAnswerAndLosesNothing) {
  auto s = Open(/*faulty=*/true, /*checkpoint_frames=*/20, /*restart_frames=*/200);
  ASSERT_TRUE(s);
  MakeCounter(*s);
  fault_plan().kinds.store(FaultPlan::kMainDb);
  fault_plan().fail_writes.store(1'000'000);
  std::vector<std::string> keys;
  for (int i = 0; i < 400; ++i) {
    keys.push_back("k" + std::to_string(i));
    auto n = SyncStore(*s).next(Next(keys.back()));
    ASSERT_TRUE(n.ok()) << n.error().message;
    EXPECT_EQ(n->record.value, i + 1);
  }
  EXPECT_GE(fault_plan().injected.load(), 1) << "no checkpoint tried to write the database file";
  EXPECT_GE(s->own_stats().failed_checkpoints, 1u) << "/metrics shows the failures";
  EXPECT_TRUE(s->check_health().ok());
  EXPECT_TRUE(s->check_ready().ok());
  s->close();
  EXPECT_EQ(KeysAfterRestart(), keys);
}

// Decision 136: the checkpointer syncs the database file after each of its checkpoints, so that
// the sync that lets the WAL start over (on the writer's thread, which every request waits for)
// finds few pages left to write. SQLite alone syncs it only after a checkpoint that copied the
// whole WAL, which a checkpointer beside a busy writer seldom does. Here a reader that keeps an
// old snapshot holds every checkpoint short of the WAL's end, as a busy writer would.
TEST_F(SqliteFaultTest, TheCheckpointerSyncsTheDatabaseFileAfterEachCheckpoint) {
  auto s = Open(/*faulty=*/true, /*checkpoint_frames=*/20, /*restart_frames=*/100000);
  ASSERT_TRUE(s);
  MakeCounter(*s);
  sqlite3* reader = nullptr;
  ASSERT_EQ(sqlite3_open_v2(s->db_path().c_str(), &reader, SQLITE_OPEN_READONLY, nullptr),
            SQLITE_OK);
  // Closed on every way out, a failed assertion's too (its read transaction ends with it).
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> close_reader(reader, &sqlite3_close);
  ASSERT_EQ(sqlite3_exec(reader, "BEGIN; SELECT count(*) FROM issued;", nullptr, nullptr, nullptr),
            SQLITE_OK);
  const auto before = SqliteStoreTestPeer::checkpoints(*s).by_checkpointer;
  fault_plan().kinds.store(FaultPlan::kMainDb);  // count the database file's syncs from here
  for (int i = 0; i < 200; ++i) {
    auto n = SyncStore(*s).next(Next("k" + std::to_string(i)));
    ASSERT_TRUE(n.ok()) << n.error().message;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (SqliteStoreTestPeer::checkpoints(*s).by_checkpointer < before + 5 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Each checkpoint is counted after its sync: read the count first.
  const auto during = SqliteStoreTestPeer::checkpoints(*s).by_checkpointer - before;
  const int syncs = fault_plan().syncs.load();
  EXPECT_GE(during, 5u) << "too few checkpoints to tell";
  EXPECT_GE(static_cast<std::uint64_t>(syncs), during)
      << syncs << " syncs of the database file for " << during << " checkpoints";
  close_reader.reset();  // the reader's snapshot ends before the store's closing checkpoint
  s->close();
}

// A failed fsync of the database file after a checkpoint: Linux may have marked the pages it
// could not write clean, so a later sync would succeed without them, and a WAL started over after
// it would lose them. The store latches as after a failed commit: writes are refused until a
// restart (whose recovery copies everything from the WAL again), and nothing acknowledged is
// lost.
TEST_F(SqliteFaultTest, AFailedSyncOfTheDatabaseFileStopsWritesAndLosesNothing) {
  auto s = Open(/*faulty=*/true, /*checkpoint_frames=*/20, /*restart_frames=*/200);
  ASSERT_TRUE(s);
  MakeCounter(*s);
  fault_plan().kinds.store(FaultPlan::kMainDb);
  fault_plan().fail_syncs.store(1);
  std::vector<std::string> acknowledged;
  std::optional<Error> refused;
  for (int i = 0; i < 2000 && !refused; ++i) {
    const std::string key = "k" + std::to_string(i);
    auto n = SyncStore(*s).next(Next(key));
    if (n.ok()) {
      acknowledged.push_back(key);
    } else {
      refused = n.error();
    }
  }
  ASSERT_EQ(fault_plan().injected.load(), 1) << "no checkpoint synced the database file";
  ASSERT_TRUE(refused.has_value()) << "the store went on writing after a failed sync";
  EXPECT_EQ(refused->code, errc::store_unavailable) << refused->message;
  EXPECT_FALSE(s->check_health().ok());
  EXPECT_GE(s->own_stats().failed_checkpoints, 1u) << "/metrics shows the failure";
  auto again = SyncStore(*s).next(Next("after"));
  EXPECT_FALSE(again.ok()) << "a write after the latch";
  s->close();
  EXPECT_EQ(KeysAfterRestart(), acknowledged);
}

// Decision 132 on a disk with no free block left: the commits go on over the zeros already
// ahead of the WAL (they lengthen nothing), the next fill fails, which only ends the filling (a
// notice says so; the store stays healthy), and every acknowledged write is there after a restart.
TEST_F(SqliteFaultTest, ADiskWithNoFreeBlockEndsTheZeroFillAndLosesNothing) {
  auto s = Open(/*faulty=*/true, 1000, 10000, /*zero_fill=*/true);
  ASSERT_TRUE(s);
  MakeCounter(*s);
  ASSERT_EQ(SqliteStoreTestPeer::await_wal_zero_fill(*s), 1u) << "the WAL was never filled ahead";
  fault_plan().no_free_blocks.store(true);
  const std::string notice = "no longer filled ahead with zeros";
  std::vector<std::string> acknowledged;
  // A fill is wanted once less than half of the 1 MiB is left (a commit writes a few frames),
  // and tried when the writer has seen no commit for a while (1 ms here): so the commits come
  // with a pause after each, in which the notice may come.
  for (int i = 0; i < 200 && !Noticed(notice); ++i) {
    const std::string key = "k" + std::to_string(i);
    auto n = SyncStore(*s).next(Next(key));
    ASSERT_TRUE(n.ok()) << key << ": " << n.error().message;
    acknowledged.push_back(key);
    const auto pause = std::chrono::steady_clock::now() + std::chrono::milliseconds(10);
    while (!Noticed(notice) && std::chrono::steady_clock::now() < pause) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  ASSERT_TRUE(Noticed(notice)) << "no fill was tried, or its failure was not told";
  EXPECT_GE(acknowledged.size(), 10u);
  EXPECT_GE(fault_plan().injected.load(), 1);
  EXPECT_EQ(SqliteStoreTestPeer::wal_zero_fills(*s), 1u);
  EXPECT_TRUE(s->check_health().ok()) << "a failed fill is not fatal";
  for (int i = 0; i < 5; ++i) {  // still within the zeros of the first fill
    const std::string key = "after" + std::to_string(i);
    auto n = SyncStore(*s).next(Next(key));
    ASSERT_TRUE(n.ok()) << key << ": " << n.error().message;
    acknowledged.push_back(key);
  }
  fault_plan().no_free_blocks.store(false);
  s->close();
  EXPECT_EQ(KeysAfterRestart(), acknowledged);
}

// Decision 132 beside another writer: another connection (the CLI's token commands, another
// process) holds the WAL's write lock when the writer's quiet moment comes. The fill waits for
// it no longer than the busy timeout, then is skipped: no notice, the filling stays on, and the
// next commit asks for zeros again, which the next quiet moment brings.
TEST_F(SqliteFaultTest, AFillThatFindsTheWriteLockTakenIsSkippedAndAskedForAgain) {
  // A quiet second before a fill: time enough for this thread to take the lock after a commit.
  constexpr auto kQuiet = std::chrono::seconds(1);
  auto s = Open(/*faulty=*/false, 1000, 10000, /*zero_fill=*/true, kQuiet);
  ASSERT_TRUE(s);
  ASSERT_TRUE(SqliteStoreTestPeer::set_write_busy_timeout(*s, 50));
  // Closed (its transaction rolled back, the lock released) however the test ends.
  sqlite3* raw = nullptr;
  const int opened = sqlite3_open_v2((dir_.path() + "/data/ichido.db").c_str(), &raw,
                                     SQLITE_OPEN_READWRITE, nullptr);
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> held(raw, &sqlite3_close_v2);
  ASSERT_EQ(opened, SQLITE_OK);
  sqlite3* other = held.get();
  MakeCounter(*s);  // the first commit: the new WAL has no zeros ahead, so they are wanted
  const auto committed = std::chrono::steady_clock::now();
  ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  ASSERT_LT(std::chrono::steady_clock::now() - committed, kQuiet)
      << "this thread took the lock only after the quiet moment: the test proves nothing";
  ASSERT_EQ(SqliteStoreTestPeer::wal_zero_fills(*s), 0u);

  ASSERT_EQ(SqliteStoreTestPeer::await_wal_zero_fill_skip(*s), 1u) << "no fill was tried";
  EXPECT_EQ(SqliteStoreTestPeer::wal_zero_fills(*s), 0u);
  EXPECT_FALSE(Noticed("no longer filled ahead with zeros")) << "a busy lock is not a failure";
  EXPECT_TRUE(s->check_health().ok());
  ASSERT_EQ(sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_close(held.release()), SQLITE_OK);

  ASSERT_TRUE(SyncStore(*s).next(Next("after")).ok());  // asks for zeros again
  EXPECT_EQ(SqliteStoreTestPeer::await_wal_zero_fill(*s), 1u) << "the filling stopped";
  EXPECT_EQ(SqliteStoreTestPeer::wal_zero_fill_skips(*s), 1u);
  s->close();
  EXPECT_EQ(KeysAfterRestart(), std::vector<std::string>{"after"});
}

// A full disk: the batch is rolled back (nothing changed, every answer 503 without "unknown"),
// the store does not latch, and writes succeed again when space comes back.
TEST_F(SqliteFaultTest, ADiskFullBatchChangesNothingAndTheStoreGoesOn) {
  auto s = Open();
  ASSERT_TRUE(s);
  MakeCounter(*s);
  auto release = HoldWriter(*s);
  fault_plan().disk_full.store(true);
  auto answers = NextAll(*s, release, {"a", "b", "c"});
  EXPECT_EQ(answers, (std::vector<std::string>(3, "store_unavailable")));
  EXPECT_TRUE(s->check_health().ok()) << "a full disk is not fatal";
  fault_plan().disk_full.store(false);
  auto d = SyncStore(*s).next(Next("d"));
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->record.value, 2) << "the failed batch consumed no number";
  s->close();
  EXPECT_EQ(KeysAfterRestart(), (std::vector<std::string>{"gate", "d"}));
}

// A write refused for lack of space makes the store not ready (a load balancer stops sending
// writes here) while it stays healthy (the process is fine); a write that succeeds makes it
// ready again. Free space alone counts only a second after the failure: right after it, the
// store is not ready whatever the file system says.
TEST_F(SqliteFaultTest, AWriteRefusedForLackOfSpaceMakesTheStoreNotReadyUntilAWriteSucceeds) {
  auto s = Open();
  ASSERT_TRUE(s);
  MakeCounter(*s);
  ASSERT_TRUE(s->check_ready().ok());
  fault_plan().disk_full.store(true);
  auto refused = SyncStore(*s).next(Next("a"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, errc::store_unavailable);
  auto ready = s->check_ready();
  ASSERT_FALSE(ready.ok()) << "ready while writes are refused for lack of space";
  EXPECT_EQ(ready.error().code, errc::store_unavailable);
  EXPECT_NE(ready.error().message.find("is full"), std::string::npos) << ready.error().message;
  EXPECT_TRUE(s->check_health().ok()) << "a full disk is not fatal";
  auto read = SyncStore(*s).get_counter(Ref());
  EXPECT_TRUE(read.ok()) << "reads go on";
  fault_plan().disk_full.store(false);
  EXPECT_FALSE(s->check_ready().ok()) << "nothing has been written since";
  auto written = SyncStore(*s).next(Next("b"));
  ASSERT_TRUE(written.ok()) << written.error().message;
  EXPECT_TRUE(s->check_ready().ok()) << s->check_ready().error().message;
}

// A failed batch leaves nothing of its changes behind, in the table or in what the writer
// keeps. A `fail` (retry) that a full disk refused left the record processing under its holder;
// another owner's begin is told it is in progress (a "pending" kept from the failed batch would
// have handed the item out twice), and the holder completes it.
TEST_F(SqliteFaultTest, AOnceRecordChangedByAFailedBatchIsReadAgainNotRemembered) {
  auto s = Open();
  ASSERT_TRUE(s);
  SyncStore sync(*s);
  const OnceRef item{"acme", "mail-1"};
  auto begun = sync.begin_once({item, core::BeginCommand{"a", 600'000}});
  ASSERT_TRUE(begun.ok()) << begun.error().message;
  ASSERT_EQ(begun->outcome, core::BeginOutcome::acquired);
  const std::int64_t token = begun->record.token;

  fault_plan().disk_full.store(true);
  auto failed = sync.fail_once({item, token, "boom", /*retry=*/true});
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().code, errc::store_unavailable) << failed.error().message;
  fault_plan().disk_full.store(false);

  auto other = sync.begin_once({item, core::BeginCommand{"b", 600'000}});
  ASSERT_TRUE(other.ok()) << other.error().message;
  EXPECT_EQ(other->outcome, core::BeginOutcome::in_progress);
  auto done = sync.complete_once({item, token, "{}"});
  ASSERT_TRUE(done.ok()) << done.error().message;
  EXPECT_EQ(done->state, core::OnceState::completed);
  EXPECT_EQ(done->attempt, 1);
}

// SQLite rolling the whole transaction back by itself mid-batch (here: a job ends it, as an
// I/O error or a full disk during a statement would): none of the batch's answers is a success.
TEST_F(SqliteFaultTest, SqlitesOwnRollbackFailsTheWholeBatch) {
  auto s = Open(/*faulty=*/false);
  ASSERT_TRUE(s);
  MakeCounter(*s);
  auto release = HoldWriter(*s);
  // Submit a, a job that ends the transaction through SQL, then b.
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> out(3);
  int answered = 0;
  auto record = [&](int i, std::string w) {
    std::lock_guard lk(mu);
    out[i] = std::move(w);
    ++answered;
    cv.notify_all();
  };
  s->next(Next("a"), [&](Result<NextReply> r) {
    record(0, r.ok() ? "ok" : std::string(to_string(r.error().code)));
  });
  Job end_tx;
  end_tx.apply = [](Tables& t, TimeMs) {
    // A statement that ends the transaction: what SQLite's own rollback looks like to the writer.
    auto* tables = dynamic_cast<SqliteTables*>(&t);
    if (tables) (void)tables->db().exec("ROLLBACK", "roll back");
    return true;
  };
  end_tx.finish = [&](const Error* e) { record(1, e ? std::string(to_string(e->code)) : "ok"); };
  SqliteStoreTestPeer::submit_write(*s, std::move(end_tx));
  s->next(Next("b"), [&](Result<NextReply> r) {
    record(2, r.ok() ? "ok" : std::string(to_string(r.error().code)));
  });
  release.set_value();
  {
    std::unique_lock lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(60), [&] { return answered == 3; }));
  }
  EXPECT_EQ(out, (std::vector<std::string>(3, "store_unavailable")));
  auto later = SyncStore(*s).next(Next("c"));
  ASSERT_TRUE(later.ok()) << "not fatal: the store goes on";
  s->close();
  EXPECT_EQ(KeysAfterRestart(), (std::vector<std::string>{"gate", "c"}));
}

// A job that throws answers internal; the batch goes on without it and the writer survives.
TEST_F(SqliteFaultTest, AJobThatThrowsAnswersInternalAndTheOthersCommit) {
  auto s = Open(/*faulty=*/false);
  ASSERT_TRUE(s);
  MakeCounter(*s);
  auto release = HoldWriter(*s);
  std::promise<std::string> thrown;
  Job job;
  job.apply = [](Tables& t, TimeMs) -> bool {
    (void)t.save_period(1, "", PeriodRow{900, 1, 0});  // written, then the job throws
    throw std::runtime_error("a bug");
  };
  job.finish = [&thrown](const Error* e) {
    thrown.set_value(e ? std::string(to_string(e->code)) : "finished");
  };
  auto a = std::async(std::launch::async, [&] { return SyncStore(*s).next(Next("a")); });
  SqliteStoreTestPeer::submit_write(*s, std::move(job));
  release.set_value();
  auto f = thrown.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  // finish(nullptr) with no result: the TableStore wrapper answers internal; a hand-made job
  // sees "finished" (committed without its writes).
  EXPECT_EQ(f.get(), "finished");
  auto ra = a.get();
  ASSERT_TRUE(ra.ok());
  auto info = SyncStore(*s).get_counter(Ref());
  ASSERT_TRUE(info.ok());
  EXPECT_LT(info->last_value, 900) << "the throwing job's write must not survive";
  EXPECT_TRUE(SyncStore(*s).next(Next("b")).ok()) << "the writer thread survived";
}

// Read-only: the store opens, says it is not ready, and every write answers 503 saying why.
TEST_F(SqliteFaultTest, AReadOnlyDatabaseIsNotReadyAndWritesSayWhy) {
  {
    auto s = Open(/*faulty=*/false);
    ASSERT_TRUE(s);
    MakeCounter(*s);
    s->close();
  }
  fault_plan().read_only.store(true);
  auto s = Open();
  ASSERT_TRUE(s);
  auto ready = s->check_ready();
  ASSERT_FALSE(ready.ok());
  EXPECT_NE(ready.error().message.find("read-only"), std::string::npos) << ready.error().message;
  auto w = SyncStore(*s).next(Next("a"));
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().code, errc::store_unavailable);
  EXPECT_NE(w.error().message.find("read-only"), std::string::npos) << w.error().message;
  EXPECT_TRUE(SyncStore(*s).get_counter(Ref()).ok());
}

}  // namespace
}  // namespace ichido::store::sqlite
