// What only the PostgreSQL store promises, beyond the conformance suite: migrations that many
// nodes may run at once, refusal of a newer schema, the database's clock, a failing statement
// that fails only its own command, and connections that are replaced when the server drops them.
// Runs against the server of store/testing/pg_test_env.h (skipped when none is configured).
#include "store/postgres/pg_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <limits>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "store/postgres/change_feed.h"
#include "store/postgres/pg_conn.h"
#include "store/postgres/schema.h"
#include "store/testing/pg_schema_test.h"
#include "store/testing/sync_store.h"

namespace ichido::store::postgres {

class PgStoreTestPeer {
 public:
  static void submit_write(PgStore& s, Job job) { s.submit_write(std::move(job)); }
};

namespace {

using store_testing::SyncStore;

// The number issued, or the error's code. Out of line: inlined into the callbacks below, g++ 12
// warns (falsely) that the variant's value may be uninitialized.
[[gnu::noinline]] std::string Outcome(const Result<NextReply>& r) {
  if (!r.ok()) return std::string(to_string(r.error().code));
  return std::to_string(r.value().record.value);
}
// `what(value)`, or the error's code (out of line for the same reason).
template <class T, class F>
[[gnu::noinline]] std::string Describe(const Result<T>& r, F what) {
  if (!r.ok()) return std::string(to_string(r.error().code));
  return what(r.value());
}

class PgStoreTest : public store_testing::PgSchemaTest {
 protected:
  PgStoreTest() : PgSchemaTest("pgstore") {}
  std::string Value(const std::string& sql) {
    auto c = Admin();
    if (!c) return "";
    auto r = c->query(Stmt{"SELECT (" + sql + ")::text"}, Params());
    if (!r.ok()) return "error: " + r.error().message;
    return r->rows() && !r->is_null(0, 0) ? r->str(0, 0) : "";
  }
  CounterRef Ref(const std::string& name) { return {"acme", name}; }
  static core::CounterConfig Config() {
    return core::CounterConfig{0, 9999, "R-{seq:4}", core::Period::none, "UTC", false};
  }
  // Holds the lane of `gate`'s key (a `next` on it whose answer callback waits, on the lane's
  // thread) until the returned promise is set, so that what is submitted meanwhile lands in one
  // batch.
  static std::promise<void> HoldLane(PgStore& store, const CounterRef& gate,
                                     const std::string& key = "gate") {
    std::promise<void> held, release;
    auto released = release.get_future().share();
    store.next({gate, {key, ""}}, [&held, released](Result<NextReply>) {
      held.set_value();
      released.wait_for(std::chrono::seconds(60));
    });
    EXPECT_EQ(held.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready);
    return release;
  }
};

TEST_F(PgStoreTest, StoresOpeningTogetherMigrateOnceAndAllWork) {
  constexpr int kStores = 4;
  std::vector<Result<std::unique_ptr<PgStore>>> stores;
  for (int i = 0; i < kStores; ++i) stores.emplace_back(Error());
  std::vector<std::thread> ts;
  for (int i = 0; i < kStores; ++i) {
    ts.emplace_back([&, i] { stores[i] = PgStore::open(Opts()); });
  }
  for (auto& t : ts) t.join();
  for (auto& s : stores) ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(Value("SELECT count(*) FROM \"" + schema_ + "\".schema_version"),
            std::to_string(current_schema_version()));
  SyncStore a(**stores[0]), b(**stores[3]);
  ASSERT_TRUE(a.create_counter({Ref("c"), Config()}).ok());
  auto n = b.next({Ref("c"), {std::string("k"), ""}});
  ASSERT_TRUE(n.ok()) << n.error().message;
  EXPECT_EQ(n->record.value, 1);
  for (auto& s : stores) (*s)->close();
}

TEST_F(PgStoreTest, ASchemaWrittenByANewerIchidoIsRefused) {
  {
    auto s = PgStore::open(Opts());
    ASSERT_TRUE(s.ok()) << s.error().message;
    (*s)->close();
  }
  auto c = Admin();
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->exec_script("INSERT INTO \"" + schema_ + "\".schema_version (version) VALUES (" +
                             std::to_string(current_schema_version() + 1) + ")")
                  .ok());
  auto s = PgStore::open(Opts());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, errc::store_unavailable);
  EXPECT_NE(s.error().message.find("newer ichido"), std::string::npos) << s.error().message;
  EXPECT_EQ(s.error().details.count("needs_operator"), 1u);  // serve exits with code 4
}

// Migration 5 on a schema the previous release left: its counters keep their config (no fiscal
// year start) and numbering, and a fiscal-year counter can be created and read back.
TEST_F(PgStoreTest, AnUpgradeKeepsEveryCounterAndAddsFiscalYears) {
  ASSERT_EQ(current_schema_version(), 5) << "this test undoes migration 5 only";
  const core::CounterConfig monthly{0, 99, "M{mm}-{seq}", core::Period::month, "Asia/Tokyo", true};
  {
    auto s = PgStore::open(Opts());
    ASSERT_TRUE(s.ok()) << s.error().message;
    SyncStore st(**s);
    ASSERT_TRUE(st.create_counter({Ref("monthly"), monthly}).ok());
    ASSERT_TRUE(st.next({Ref("monthly"), {std::string("k"), ""}}).ok());
    (*s)->close();
  }
  auto c = Admin();
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->exec_script("ALTER TABLE \"" + schema_ +
                             "\".counters DROP COLUMN fiscal_year_start; DELETE FROM \"" + schema_ +
                             "\".schema_version WHERE version = 5")
                  .ok());
  auto s = PgStore::open(Opts());
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(Value("SELECT max(version) FROM \"" + schema_ + "\".schema_version"), "5");
  SyncStore st(**s);
  auto got = st.get_counter(Ref("monthly"));
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(got->config, monthly);
  EXPECT_EQ(got->last_value, 1);
  auto replay = st.next({Ref("monthly"), {std::string("k"), ""}});
  ASSERT_TRUE(replay.ok());
  EXPECT_TRUE(replay->replayed);
  const core::CounterConfig fy{0,     99, "{fy}-{seq}", core::Period::fiscal_year, "Asia/Tokyo",
                               false, 4};
  ASSERT_TRUE(st.create_counter({Ref("fy"), fy}).ok());
  auto back = st.get_counter(Ref("fy"));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->config, fy);
  (*s)->close();
}

// check_health() after the monitor's next probes (every 500 ms): the first failure, or ok once
// `probes` probe intervals passed without one.
Result<void> HealthAfterProbes(PgStore& s, int probes) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(600 * probes);
  while (std::chrono::steady_clock::now() < until) {
    if (auto h = s.check_health(); !h.ok()) return h;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return s.check_health();
}

// docs/decisions/074: the database is the store's identity. A node whose URL now leads to
// another store (or whose token sequence went backwards) stops serving, latched.
TEST_F(PgStoreTest, AnotherStoreUnderTheUrlIsRefusedLatched) {
  auto s = PgStore::open(Opts());
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_EQ((*s)->store_id().size(), 32u) << (*s)->store_id();
  EXPECT_EQ(Value("SELECT store_id FROM \"" + schema_ + "\".store_identity"), (*s)->store_id());
  SyncStore st(**s);
  ASSERT_TRUE(st.create_counter({Ref("c"), Config()}).ok());
  EXPECT_TRUE(HealthAfterProbes(**s, 2).ok());
  auto c = Admin();
  ASSERT_TRUE(c);
  ASSERT_TRUE(
      c->exec_script("UPDATE \"" + schema_ + "\".store_identity SET store_id = 'another'").ok());
  auto h = HealthAfterProbes(**s, 3);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.error().message.find("another store"), std::string::npos) << h.error().message;
  EXPECT_FALSE((*s)->check_ready().ok());
  auto n = st.next({Ref("c"), {std::string("k"), ""}});
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.error().code, errc::store_unavailable);
  // Latched: putting the row back does not make the node serve again (an operator restarts it).
  ASSERT_TRUE(c->exec_script("UPDATE \"" + schema_ + "\".store_identity SET store_id = '" +
                             (*s)->store_id() + "'")
                  .ok());
  EXPECT_FALSE(HealthAfterProbes(**s, 2).ok());
  (*s)->close();
}

TEST_F(PgStoreTest, ATokenSequenceGoingBackwardsIsRefusedLatched) {
  auto s = PgStore::open(Opts());
  ASSERT_TRUE(s.ok()) << s.error().message;
  SyncStore st(**s);
  for (int i = 0; i < 3; ++i) {
    auto r = st.acquire_lock({{"acme", "l" + std::to_string(i)}, "me", 60000, std::nullopt});
    ASSERT_TRUE(r.ok()) << r.error().message;
  }
  EXPECT_TRUE(HealthAfterProbes(**s, 2).ok());  // the monitor has seen the sequence
  auto c = Admin();
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->exec_script("ALTER SEQUENCE \"" + schema_ + "\".token_seq RESTART").ok());
  auto h = HealthAfterProbes(**s, 3);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.error().message.find("went back"), std::string::npos) << h.error().message;
  (*s)->close();
}

TEST_F(PgStoreTest, AnUnreachableDatabaseIsStoreUnavailable) {
  Options o = Opts();
  o.url = "postgresql://postgres@127.0.0.1:1/postgres?connect_timeout=2";
  const auto started = std::chrono::steady_clock::now();
  auto s = PgStore::open(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, errc::store_unavailable);
  EXPECT_NE(s.error().message.find("cannot connect"), std::string::npos) << s.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
}

TEST_F(PgStoreTest, TimeComesFromTheDatabaseClock) {
  auto s = PgStore::open(Opts());  // no Options::clock: the database's
  ASSERT_TRUE(s.ok()) << s.error().message;
  SyncStore sync(**s);
  const std::string now_ms = "floor(extract(epoch from clock_timestamp()) * 1000)::int8";
  const std::int64_t before = std::stoll(Value("SELECT " + now_ms));
  auto c = sync.create_counter({Ref("c"), Config()});
  const std::int64_t after = std::stoll(Value("SELECT " + now_ms));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_GE(c->info.created_at, before);
  EXPECT_LE(c->info.created_at, after);
  auto l = sync.acquire_lock({{"acme", "l"}, "me", 30000});
  ASSERT_TRUE(l.ok());
  EXPECT_GE(l->now, c->info.created_at) << "never backwards";
  EXPECT_EQ(l->record.lease_expires_at, l->now + 30000);
  (*s)->close();
}

// Like the SQLite writer: a batch runs without savepoints; a job that fails after it wrote, or
// whose statement the server rejects, is undone alone by a second run with a savepoint per job.
TEST_F(PgStoreTest, AFailingJobIsUndoneAloneInItsBatch) {
  Options o = Opts();
  o.lanes = 1;  // every job in one lane, so they share batches
  auto opened = PgStore::open(o);
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  PgStore& store = **opened;
  SyncStore sync(store);
  ASSERT_TRUE(sync.create_counter({Ref("c"), Config()}).ok());
  core::TokenInfo tok{"dup-id", "h1", core::Role::reader, "acme",
                      "",       1,    std::nullopt,       std::nullopt};
  ASSERT_TRUE(sync.create_counter({Ref("d"), Config()}).ok());
  {
    std::promise<Result<core::TokenInfo>> p;
    store.create_token(CreateTokenCmd{tok, std::nullopt},
                       [&](Result<core::TokenInfo> r) { p.set_value(std::move(r)); });
    ASSERT_TRUE(p.get_future().get().ok());
  }
  const StoreStats before = store.stats();

  // Hold the lane (a callback runs on its thread) so that everything below lands in one batch.
  auto release = HoldLane(store, Ref("c"));

  std::mutex mu;
  std::condition_variable cv;
  int answered = 0;
  std::vector<std::string> outcomes(6);
  auto record = [&](int i, std::string what) {
    std::lock_guard lk(mu);
    outcomes[i] = std::move(what);
    ++answered;
    cv.notify_all();
  };
  auto next = [&](int i, const std::string& key) {
    store.next({Ref("c"), {key, ""}}, [&, i](Result<NextReply> r) { record(i, Outcome(r)); });
  };
  next(0, "a");
  {
    Job job;  // writes, then fails: its write must vanish
    job.apply = [](Tables& t, TimeMs) {
      (void)t.save_period(1, "", PeriodRow{500, 9, 0});
      return false;
    };
    job.finish = [&](const Error* e) {
      record(1, e ? std::string(to_string(e->code)) : "rejected");
    };
    job.keys = counter_keys(Ref("c"));
    PgStoreTestPeer::submit_write(store, std::move(job));
  }
  next(2, "b");
  {
    // A statement the server rejects (duplicate primary key): the transaction is aborted, so the
    // batch runs again, and only this command fails.
    store.create_token(CreateTokenCmd{tok, std::nullopt}, [&](Result<core::TokenInfo> r) {
      record(3, r.ok() ? "stored" : std::string(to_string(r.error().code)));
    });
  }
  next(4, "c");
  store.next({{"acme", "d"}, {std::string("x"), ""}},
             [&](Result<NextReply> r) { record(5, Outcome(r)); });
  release.set_value();
  {
    std::unique_lock lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(60), [&] { return answered == 6; }));
  }
  EXPECT_EQ(outcomes,
            (std::vector<std::string>{"2", "rejected", "3", "store_unavailable", "4", "1"}));
  const StoreStats after = store.stats();
  EXPECT_EQ(after.isolated_batches - before.isolated_batches, 1u);
  EXPECT_EQ(after.commits - before.commits, 2u);  // the gate's, then the batch's
  auto info = sync.get_counter(Ref("c"));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->last_value, 4);
  EXPECT_EQ(info->issued_count, 4);
  store.close();
}

// A batch of five `next`s on one lane while something else holds what one of them needs longer
// than lock_timeout: that one answers store_unavailable saying the record is locked elsewhere
// (503 with Retry-After over HTTP), the others are answered their numbers in the same go, and
// the node stays ready. `hold` runs on a second connection in an open transaction.
class PgBusyKeyTest : public PgStoreTest {
 protected:
  // `busy` names the counter whose record is held. Each test holds its own: advisory locks are
  // the database's, not a schema's, so two tests holding the same key would wait on each other.
  void Run(const std::string& busy, const std::string& hold) {
    Options o = Opts();
    o.lanes = 1;  // every job in one lane, so they share batches
    o.lock_timeout_ms = 300;
    auto opened = PgStore::open(o);
    ASSERT_TRUE(opened.ok()) << opened.error().message;
    PgStore& store = **opened;
    SyncStore sync(store);
    for (const std::string& c : {busy, std::string("a"), std::string("b"), std::string("gate")}) {
      ASSERT_TRUE(sync.create_counter({Ref(c), Config()}).ok());
      ASSERT_TRUE(sync.next({Ref(c), {std::string("first"), ""}}).ok());
    }
    auto holder = Admin();
    ASSERT_TRUE(holder);
    ASSERT_TRUE(holder->exec_script("BEGIN; " + hold).ok());
    const StoreStats before = store.stats();

    // Hold the lane (a callback runs on its thread) so that everything below lands in one batch.
    auto release = HoldLane(store, Ref("gate"));
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::string> outcomes(5);
    std::string busy_message;
    int answered = 0;
    const std::vector<std::pair<std::string, std::string>> calls = {
        {"a", "k1"}, {busy, "k2"}, {"b", "k3"}, {"a", "k4"}, {"b", "k5"}};
    for (std::size_t i = 0; i < calls.size(); ++i) {
      store.next({Ref(calls[i].first), {calls[i].second, ""}}, [&, i](Result<NextReply> r) {
        std::lock_guard lk(mu);
        outcomes[i] = Outcome(r);
        if (!r.ok()) busy_message = r.error().message;
        ++answered;
        cv.notify_all();
      });
    }
    release.set_value();
    {
      std::unique_lock lk(mu);
      ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(60), [&] { return answered == 5; }));
    }
    EXPECT_EQ(outcomes, (std::vector<std::string>{"2", "store_unavailable", "2", "3", "3"}));
    EXPECT_NE(busy_message.find("locked by another transaction"), std::string::npos)
        << busy_message;
    EXPECT_TRUE(store.check_ready().ok()) << "one record's lock made the node not ready";
    const StoreStats after = store.stats();
    EXPECT_EQ(after.commits - before.commits, 2u);  // the gate's, then the batch's
    ASSERT_TRUE(holder->exec_script("ROLLBACK").ok());
    auto later = sync.next({Ref(busy), {std::string("k2"), ""}});
    ASSERT_TRUE(later.ok()) << later.error().message;
    EXPECT_EQ(later->record.value, 2) << "the refused command consumed no number";
    store.close();
  }
  std::string Table(const std::string& name) const { return "\"" + schema_ + "\"." + name; }
};

// A row lock held by a database session (SELECT … FOR UPDATE of the counter's period row).
TEST_F(PgBusyKeyTest, ARowLockedElsewherePastTheLockTimeoutFailsOnlyItsCommand) {
  Run("busy-row", "SELECT 1 FROM " + Table("counter_periods") +
                      " WHERE counter_id = (SELECT id FROM " + Table("counters") +
                      " WHERE ns = 'acme' AND name = 'busy-row') FOR UPDATE");
}

// The record's key lock held by another transaction (a node cut off in the middle of a batch
// holds its key locks until PostgreSQL ends its session).
TEST_F(PgBusyKeyTest, AKeyLockHeldElsewherePastTheLockTimeoutFailsOnlyItsCommand) {
  Run("busy-key", "SELECT pg_advisory_xact_lock(" +
                      std::to_string(counter_keys(Ref("busy-key")).front()) + ")");
}

// A job that throws answers alone (its slot has no result: internal, 500 over HTTP); the other
// jobs of its batch commit and the lane goes on serving.
TEST_F(PgStoreTest, AJobThatThrowsFailsAloneAndTheBatchGoesOn) {
  Options o = Opts();
  o.lanes = 1;
  auto opened = PgStore::open(o);
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  PgStore& store = **opened;
  SyncStore sync(store);
  ASSERT_TRUE(sync.create_counter({Ref("c"), Config()}).ok());
  auto release = HoldLane(store, Ref("c"));
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> outcomes(3);
  int answered = 0;
  auto record = [&](int i, std::string what) {
    std::lock_guard lk(mu);
    outcomes[i] = std::move(what);
    ++answered;
    cv.notify_all();
  };
  store.next({Ref("c"), {std::string("a"), ""}},
             [&](Result<NextReply> r) { record(0, Outcome(r)); });
  {
    Job job;
    job.apply = [](Tables&, TimeMs) -> bool { throw std::runtime_error("a bug"); };
    job.finish = [&](const Error* e) {
      record(1, e ? std::string(to_string(e->code)) : "finished without a store error");
    };
    job.keys = counter_keys(Ref("c"));
    PgStoreTestPeer::submit_write(store, std::move(job));
  }
  store.next({Ref("c"), {std::string("b"), ""}},
             [&](Result<NextReply> r) { record(2, Outcome(r)); });
  release.set_value();
  {
    std::unique_lock lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(60), [&] { return answered == 3; }));
  }
  EXPECT_EQ(outcomes, (std::vector<std::string>{"2", "finished without a store error", "3"}));
  auto after = sync.next({Ref("c"), {std::string("d"), ""}});
  ASSERT_TRUE(after.ok()) << "the lane is gone: " << after.error().message;
  EXPECT_EQ(after->record.value, 4);
  store.close();
}

// Re-runs after a serialization failure or deadlock wait a random time, up to a cap that doubles
// from 2 ms per re-run and stops at 100 ms.
TEST(PgRetryWait, IsRandomUpToACapThatDoubles) {
  for (int retries : {0, 1, 3, 6, 20}) {
    const std::int64_t cap = std::min<std::int64_t>(100, std::int64_t{2} << std::min(retries, 10));
    std::set<std::int64_t> seen;
    for (int i = 0; i < 400; ++i) {
      const auto w = serialization_retry_wait(retries).count();
      EXPECT_GE(w, 0);
      EXPECT_LE(w, cap) << "re-run " << retries;
      seen.insert(w);
    }
    EXPECT_GT(seen.size(), 1u) << "re-run " << retries << " always waits the same";
    if (cap >= 50) {
      EXPECT_GT(*seen.rbegin(), cap / 2) << "re-run " << retries;
    }
  }
}

// In one batch, commands on the same records see each other's writes (the batch remembers and
// prefetches rows; what it remembers must follow its own writes exactly).
TEST_F(PgStoreTest, CommandsOnOneRecordInOneBatchSeeEachOthersWrites) {
  Options o = Opts();
  o.lanes = 1;
  auto opened = PgStore::open(o);
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  PgStore& store = **opened;
  SyncStore sync(store);
  ASSERT_TRUE(sync.create_counter({Ref("gate"), Config()}).ok());

  auto release = HoldLane(store, Ref("gate"), "g");

  std::mutex mu;
  std::condition_variable cv;
  int answered = 0;
  std::vector<std::string> out(10);
  auto record = [&](int i, std::string what) {
    std::lock_guard lk(mu);
    out[i] = std::move(what);
    ++answered;
    cv.notify_all();
  };
  // A counter created in the batch, numbered twice with one key and once with another.
  store.create_counter({Ref("c"), Config()}, [&](Result<CreateCounterReply> r) {
    record(0, Describe(r, [](const CreateCounterReply& c) {
             return std::string(c.created ? "created" : "existed");
           }));
  });
  auto next = [&](int i, const std::string& key) {
    store.next({Ref("c"), {key, ""}}, [&, i](Result<NextReply> r) {
      record(i, Describe(r, [](const NextReply& n) {
               return std::to_string(n.record.value) + (n.replayed ? " replayed" : "");
             }));
    });
  };
  next(1, "k");
  next(2, "k");
  next(3, "k2");
  // A once key claimed twice, a lock acquired twice, then released and acquired again.
  auto begin = [&](int i, const std::string& owner) {
    store.begin_once({{"acme", "o"}, core::BeginCommand{owner, 60000}},
                     [&, i](Result<BeginOnceReply> r) {
                       record(i, Describe(r, [](const BeginOnceReply& b) {
                                return std::string(core::to_string(b.outcome));
                              }));
                     });
  };
  begin(4, "A");
  begin(5, "B");
  std::int64_t token = 0;
  auto acquire = [&](int i, const std::string& owner) {
    store.acquire_lock({{"acme", "l"}, owner, 60000}, [&, i](Result<AcquireLockReply> r) {
      record(i, Describe(r, [&, i](const AcquireLockReply& a) {
               if (a.acquired && i == 6) token = a.record.token;
               return std::string(a.acquired ? "acquired" : "busy");
             }));
    });
  };
  acquire(6, "A");
  acquire(7, "B");
  // A release with a token nobody holds fails and must not free the lock.
  store.release_lock({{"acme", "l"}, 0}, [&](Result<Unit> r) {
    record(8, Describe(r, [](const Unit&) { return std::string("released"); }));
  });
  acquire(9, "C");
  release.set_value();
  {
    std::unique_lock lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(60), [&] { return answered == 10; }));
  }
  EXPECT_EQ(out[0], "created");
  EXPECT_EQ(out[1], "1");
  EXPECT_EQ(out[2], "1 replayed");
  EXPECT_EQ(out[3], "2");
  EXPECT_EQ(out[4], "acquired");
  EXPECT_EQ(out[5], "in_progress");
  EXPECT_EQ(out[6], "acquired");
  EXPECT_EQ(out[7], "busy");
  EXPECT_EQ(out[8], "not_holder");  // token 0 is nobody's
  EXPECT_EQ(out[9], "busy");
  // And what was committed is what the batch said.
  auto l = sync.get_lock({"acme", "l"});
  ASSERT_TRUE(l.ok());
  ASSERT_TRUE(l->holder.has_value());
  EXPECT_EQ(l->holder->owner, "A");
  EXPECT_EQ(l->holder->token, token);
  auto once = sync.get_once({"acme", "o"});
  ASSERT_TRUE(once.ok());
  EXPECT_EQ(once->owner, "A");
  auto info = sync.get_counter(Ref("c"));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->last_value, 2);
  EXPECT_EQ(info->issued_count, 2);
  store.close();
}

// The server ends every connection of the store (a restart, a failover, a pooler recycling
// connections): the next commands run on new connections without an error.
TEST_F(PgStoreTest, DroppedConnectionsAreReplacedWithoutFailingCommands) {
  auto opened = PgStore::open(Opts());
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  PgStore& store = **opened;
  SyncStore sync(store);
  ASSERT_TRUE(sync.create_counter({Ref("c"), Config()}).ok());
  ASSERT_TRUE(sync.get_counter(Ref("c")).ok());
  for (int round = 0; round < 3; ++round) {
    const std::string killed = Value(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
        "application_name = 'ichido-" +
        schema_ + "'");
    EXPECT_NE(killed, "0") << "round " << round;
    auto n = sync.next({Ref("c"), {"k" + std::to_string(round), ""}});
    ASSERT_TRUE(n.ok()) << n.error().message;
    EXPECT_EQ(n->record.value, round + 1);
    auto g = sync.get_counter(Ref("c"));
    ASSERT_TRUE(g.ok()) << g.error().message;
    EXPECT_EQ(g->last_value, round + 1);
  }
  EXPECT_EQ(store.stats().failed_commits, 0u);
  store.close();
}

}  // namespace
}  // namespace ichido::store::postgres

namespace ichido::store::postgres {
namespace {

// --- the change feed (decision 075) ---

TEST(ChangeFeed, PayloadRoundTripsEscapedKeysAndIsSortedAndUnique) {
  std::vector<Announcement> items = {announce_once({"shop", "a\tb\nc\\d"}),
                                     announce_lock({"ops", "export"}),
                                     announce_lock({"ops", "export"}), announce_tokens()};
  const std::string p = encode_changes("node1", items);
  EXPECT_EQ(p, "node1\nL\tops\texport\nO\tshop\ta\tb\\nc\\\\d\nT");
  auto d = decode_changes(p);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->node, "node1");
  ASSERT_EQ(d->changes.locks.size(), 1u);
  EXPECT_EQ(d->changes.locks[0].ns, "ops");
  EXPECT_EQ(d->changes.locks[0].name, "export");
  ASSERT_EQ(d->changes.once.size(), 1u);
  EXPECT_EQ(d->changes.once[0].key, "a\tb\nc\\d");
  EXPECT_TRUE(d->changes.tokens);
  EXPECT_FALSE(d->changes.all_waiters);
}

TEST(ChangeFeed, TooManyItemsFallBackToNamespacesThenToEverything) {
  std::vector<Announcement> items;
  for (int i = 0; i < 2000; ++i) items.push_back(announce_once({"shop", "k" + std::to_string(i)}));
  items.push_back(announce_lock({"ops", "l"}));
  std::string p = encode_changes("n", items);
  EXPECT_LE(p.size(), kMaxNotifyPayload);
  auto d = decode_changes(p);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->changes.namespaces, (std::vector<std::string>{"ops", "shop"}));
  EXPECT_TRUE(d->changes.once.empty());

  items.clear();
  for (int i = 0; i < 200; ++i) {
    items.push_back(announce_lock({std::string(100, 'n') + std::to_string(i), "l"}));
  }
  items.push_back(announce_tokens());
  p = encode_changes("n", items);
  EXPECT_LE(p.size(), kMaxNotifyPayload);
  d = decode_changes(p);
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->changes.all_waiters);
  EXPECT_TRUE(d->changes.tokens);  // kept whatever else falls back
}

TEST(ChangeFeed, AnUnreadablePayloadIsRefused) {
  EXPECT_FALSE(decode_changes(""));
  EXPECT_FALSE(decode_changes("n\nX\tfoo\tbar"));
  EXPECT_FALSE(decode_changes("n\nO\tns\tbad\\escape"));
}

// Two stores on one schema stand for two nodes: a release committed by one reaches the other's
// handler (not its own), once per committed transaction.
TEST_F(PgStoreTest, AReleaseOnOneNodeReachesTheOtherNodesHandlerOnly) {
  auto a = PgStore::open(Opts());
  auto b = PgStore::open(Opts());
  ASSERT_TRUE(a.ok() && b.ok());
  std::mutex mu;
  std::condition_variable cv;
  std::vector<ExternalChanges> at_a, at_b;
  auto collect = [&](std::vector<ExternalChanges>& into) {
    return [&](const ExternalChanges& c) {
      if (c.all_waiters && c.locks.empty() && c.once.empty()) return;  // the periodic re-check
      std::lock_guard lk(mu);
      into.push_back(c);
      cv.notify_all();
    };
  };
  (*a)->watch_external_changes(collect(at_a));
  (*b)->watch_external_changes(collect(at_b));
  // Both LISTEN connections are up before anything is sent.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((*a)->feed_stats().listens < 1 || (*b)->feed_stats().listens < 1) {
    ASSERT_LT(std::chrono::steady_clock::now(), until) << "the LISTEN connections never came up";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  SyncStore sa(**a);
  auto g = sa.acquire_lock({{"ops", "l"}, "me", 60000, std::nullopt});
  ASSERT_TRUE(g.ok() && g->acquired);
  EXPECT_EQ((*a)->feed_stats().sent, 0u);  // an acquire announces nothing
  ASSERT_TRUE(sa.release_lock({{"ops", "l"}, g->record.token}).ok());
  EXPECT_EQ((*a)->feed_stats().sent, 1u);
  std::unique_lock lk(mu);
  ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(5), [&] { return !at_b.empty(); }));
  ASSERT_EQ(at_b[0].locks.size(), 1u);
  EXPECT_EQ(at_b[0].locks[0].name, "l");
  lk.unlock();
  // Now b releases: a hears it, and nothing before it (its own notification, delivered to it
  // first, was dropped).
  SyncStore sb(**b);
  auto h = sb.acquire_lock({{"ops", "m"}, "me", 60000, std::nullopt});
  ASSERT_TRUE(h.ok() && h->acquired);
  ASSERT_TRUE(sb.release_lock({{"ops", "m"}, h->record.token}).ok());
  lk.lock();
  ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(5), [&] { return !at_a.empty(); }));
  ASSERT_EQ(at_a.size(), 1u) << "a node is not told about its own changes";
  ASSERT_EQ(at_a[0].locks.size(), 1u);
  EXPECT_EQ(at_a[0].locks[0].name, "m");
  lk.unlock();
  (*a)->watch_external_changes({});
  (*b)->watch_external_changes({});
  (*a)->close();
  (*b)->close();
}

// Decision 077: a node that started around a revocation — it loaded its tokens before the
// commit and began to LISTEN after the notification — confirms the current token epoch as soon as
// its handler is installed (and only then: the handler is what reloads the tokens). Before, its
// row kept epoch 0 until the next revocation, and a revoke through another node waited for it
// until its heartbeat lease ran out (3 s).
TEST_F(PgStoreTest, ANodeConfirmsTheTokenEpochOnceItsHandlerIsInstalled) {
  auto a = PgStore::open(Opts());
  ASSERT_TRUE(a.ok()) << a.error().message;
  auto admin = Admin();
  ASSERT_TRUE(admin);
  // A revocation whose notification this node never hears.
  ASSERT_TRUE(
      admin->exec_script("UPDATE \"" + schema_ + "\".token_epoch SET epoch = epoch + 1").ok());
  const std::string confirmed = "(SELECT tokens_epoch FROM \"" + schema_ +
                                "\".nodes WHERE node_id = '" + (*a)->node_id() + "')";
  std::atomic<int> token_changes{0};
  (*a)->watch_external_changes([&](const ExternalChanges& c) {
    if (c.tokens) token_changes.fetch_add(1);
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (Value(confirmed) != "1" && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling the database's row
  }
  EXPECT_EQ(Value(confirmed), "1") << "the node never confirmed the epoch";
  EXPECT_GE(token_changes.load(), 1) << "confirmed without its tokens being reloaded";
  (*a)->watch_external_changes({});
  (*a)->close();
}

// core/lock.h Q1–Q4 over two stores (two nodes) on one schema, command by command.
TEST_F(PgStoreTest, TheWaiterQueueGrantsInArrivalOrderAcrossStores) {
  auto a = PgStore::open(Opts());
  auto b = PgStore::open(Opts());
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->queues_lock_waiters());
  SyncStore sa(**a), sb(**b);
  const LockRef l{"ops", "l"};
  auto waiting = [&](SyncStore& s, const std::string& owner, const std::string& id,
                     std::int64_t wait_ms = 60000) {
    AcquireLockCmd c{l, owner, 60000, std::nullopt};
    c.waiter_id = id;
    c.wait_ms = wait_ms;
    return s.acquire_lock(c);
  };
  auto queued = [&](SyncStore& s) {
    auto g = s.get_lock(l);
    return g.ok() && g->queued ? *g->queued : -1;
  };
  auto held = sa.acquire_lock({l, "holder", 60000, std::nullopt});
  ASSERT_TRUE(held.ok() && held->acquired);
  EXPECT_EQ(queued(sa), 0);

  // Q1: arrival order across stores.
  auto wa = waiting(sa, "first", "wa");
  ASSERT_TRUE(wa.ok());
  EXPECT_FALSE(wa->acquired);
  EXPECT_TRUE(wa->queued);
  EXPECT_EQ(wa->record.owner, "holder");
  auto wb = waiting(sb, "second", "wb");
  ASSERT_TRUE(wb.ok());
  EXPECT_TRUE(wb->queued);
  EXPECT_EQ(wb->head_waiter, std::optional<std::string>("wa"));  // who comes first
  EXPECT_EQ(queued(sb), 2);
  auto again = waiting(sb, "second", "wb");  // asking again keeps the place (no second row)
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(queued(sa), 2);

  // Q3: the release grants the head waiter in its own transaction; the lock is never free.
  ASSERT_TRUE(sa.release_lock({l, held->record.token}).ok());
  auto now_held = sb.get_lock(l);
  ASSERT_TRUE(now_held.ok() && now_held->holder);
  EXPECT_EQ(now_held->holder->owner, "first");
  EXPECT_EQ(now_held->queued, 1);
  // Until the waiter picks it up, the grant lasts at most kLockPickupMs (not its 60 s).
  EXPECT_LE(now_held->holder->lease_expires_at - now_held->now, core::kLockPickupMs);
  // Q2: a newcomer with wait_ms 0 does not get it; the second waiter asking again neither.
  auto newcomer = sb.acquire_lock({l, "newcomer", 60000, std::nullopt});
  ASSERT_TRUE(newcomer.ok());
  EXPECT_FALSE(newcomer->acquired);
  auto second = waiting(sb, "second", "wb");
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->acquired);
  EXPECT_EQ(second->record.waiter, std::optional<std::string>("wa"));  // D2's hint
  // The first waiter, asking again on its own store, finds the grant made for it.
  auto first = waiting(sa, "first", "wa");
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(first->acquired);
  EXPECT_FALSE(first->replayed);
  EXPECT_GT(first->record.token, held->record.token);
  EXPECT_EQ(first->record.owner, "first");
  EXPECT_EQ(first->record.lease_expires_at, first->now + 60000) << "picked up: its own lease";

  // Q4: the second waiter leaves before its turn: its place is gone, nothing granted.
  auto left = sb.leave_lock_queue({l, "wb"});
  ASSERT_TRUE(left.ok());
  EXPECT_FALSE(left->acquired);
  EXPECT_EQ(left->record.owner, "first");
  EXPECT_EQ(queued(sa), 0);

  // Q4: a waiter granted by a release before it left gets the grant from leaving.
  ASSERT_TRUE(waiting(sb, "third", "wc").ok());
  ASSERT_TRUE(sa.release_lock({l, first->record.token}).ok());
  auto third = sb.leave_lock_queue({l, "wc"});
  ASSERT_TRUE(third.ok());
  ASSERT_TRUE(third->acquired);
  EXPECT_EQ(third->record.owner, "third");
  EXPECT_EQ(third->record.lease_expires_at, third->now + 30000) << "picked up by leaving";
  EXPECT_GT(third->record.token, first->record.token);

  // Q1: a place whose wait ended is not live: a release skips it and the lock is free.
  auto short_wait = waiting(sa, "gone", "wd", 1);
  ASSERT_TRUE(short_wait.ok() && short_wait->queued);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (queued(sa) != 0) {
    ASSERT_LT(std::chrono::steady_clock::now(), until) << "the place never stopped being live";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(sb.release_lock({l, third->record.token}).ok());
  auto free = sa.get_lock(l);
  ASSERT_TRUE(free.ok());
  EXPECT_FALSE(free->holder);
  auto anyone = sa.acquire_lock({l, "anyone", 60000, std::nullopt});
  ASSERT_TRUE(anyone.ok());
  EXPECT_TRUE(anyone->acquired);

  // A store closing takes its node's places with it (its waiters were all answered).
  ASSERT_TRUE(waiting(sb, "left-behind", "we").ok());
  EXPECT_EQ(queued(sa), 1);
  (*b)->close();
  EXPECT_EQ(queued(sa), 0);
  (*a)->close();
}

// A lock record written by a build that keeps no queue has no waiter; and a SQLite-like caller
// that never sends a waiter id is never queued (the memory and SQLite stores' path).
// L9 across nodes (stores a and b): a's queued waiter (request_id "rid") is granted by a release
// (Q3) just as its client goes away; the client's retry reaches b and is answered that grant
// ("replayed"); a then leaves the queue (D3: Q4 picks the grant up) and releases it for the gone
// client. The retry keeps it — before, the release ended the grant the retry was told it held.
TEST_F(PgStoreTest, AGrantARetryOnAnotherNodeWasAnsweredSurvivesTheReleaseForItsGoneAttempt) {
  auto a = PgStore::open(Opts());
  auto b = PgStore::open(Opts());
  ASSERT_TRUE(a.ok() && b.ok());
  SyncStore sa(**a), sb(**b);
  const LockRef l{"ops", "l"};
  auto held = sa.acquire_lock({l, "holder", 60000, std::nullopt});
  ASSERT_TRUE(held.ok() && held->acquired);
  AcquireLockCmd first{l, "S", 60000, "rid"};
  first.waiter_id = "first";
  first.wait_ms = 60000;
  auto queued = sa.acquire_lock(first);
  ASSERT_TRUE(queued.ok());
  ASSERT_TRUE(queued->queued);
  ASSERT_TRUE(sa.release_lock({l, held->record.token}).ok());  // Q3: granted to "first"
  AcquireLockCmd again{l, "S", 60000, "rid"};
  again.waiter_id = "retry";
  again.wait_ms = 60000;
  auto retry = sb.acquire_lock(again);
  ASSERT_TRUE(retry.ok()) << retry.error().message;
  ASSERT_TRUE(retry->acquired);
  ASSERT_TRUE(retry->replayed);
  auto left = sa.leave_lock_queue({l, "first", 60000});  // D3: the first attempt's client is gone
  ASSERT_TRUE(left.ok()) << left.error().message;
  ASSERT_TRUE(left->acquired) << "Q4: the grant made for it";
  EXPECT_EQ(left->record.token, retry->record.token);
  ASSERT_TRUE(sa.release_lock({l, left->record.token, /*for_gone_client=*/true}).ok());
  auto now_held = sb.get_lock(l);
  ASSERT_TRUE(now_held.ok());
  ASSERT_TRUE(now_held->holder.has_value()) << "the retry was told it holds a released lock";
  EXPECT_EQ(now_held->holder->token, retry->record.token);
  EXPECT_EQ(now_held->holder->owner, "S");
  EXPECT_EQ(now_held->queued, 0);
}

// A read the server does not answer (here: blocked behind another session's table lock) fails
// 503 after one io_timeout, not after two: a read that lost its connection runs again on a new
// one, but not one that timed out — a wedged server would keep the caller waiting as long again.
TEST_F(PgStoreTest, AWedgedReadIsUnavailableAfterOneTimeoutNotTwo) {
  auto o = Opts();
  o.io_timeout_ms = 2000;
  auto s = PgStore::open(o);
  ASSERT_TRUE(s.ok()) << s.error().message;
  SyncStore st(**s);
  const LockRef l{"ops", "l"};
  ASSERT_TRUE(st.get_lock(l).ok());  // the readers are connected
  auto blocker = Admin();
  ASSERT_TRUE(blocker);
  ASSERT_TRUE(
      blocker->exec_script("BEGIN; LOCK TABLE \"" + schema_ + "\".locks IN ACCESS EXCLUSIVE MODE")
          .ok());
  const auto t0 = std::chrono::steady_clock::now();
  auto wedged = st.get_lock(l);
  const auto waited =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  ASSERT_FALSE(wedged.ok());
  EXPECT_EQ(wedged.error().code, errc::store_unavailable) << wedged.error().message;
  EXPECT_GE(waited, 2000);
  // A second timeout would end at 4000 ms at the earliest.
  EXPECT_LT(waited, 3500) << "the read was tried again on a new connection after timing out";
  ASSERT_TRUE(blocker->exec_script("ROLLBACK").ok());
  auto after = st.get_lock(l);
  EXPECT_TRUE(after.ok()) << "reads reconnect by themselves: " << after.error().message;
}

// The poll behind io_timeout waits whole milliseconds rounded up: rounded down, a wait with
// 1.9 ms left polled 1 ms, found 0 ms left and timed out early (CI saw a 2,000 ms io_timeout end
// after 1,999 ms in the test above).
TEST(PgConnPoll, TheWaitIsRoundedUpSoATimeoutNeverEndsBeforeItsDeadline) {
  using std::chrono::microseconds;
  using std::chrono::milliseconds;
  EXPECT_EQ(poll_ms_until(microseconds(1900)), 2);
  EXPECT_EQ(poll_ms_until(microseconds(1)), 1);
  EXPECT_EQ(poll_ms_until(milliseconds(2000)), 2000);
  EXPECT_EQ(poll_ms_until(microseconds(1999001)), 2000);
  EXPECT_EQ(poll_ms_until(microseconds(0)), 0) << "the deadline has passed";
  EXPECT_EQ(poll_ms_until(microseconds(-5)), 0);
  EXPECT_EQ(poll_ms_until(std::chrono::hours(24 * 365 * 100)), std::numeric_limits<int>::max());
}

TEST_F(PgStoreTest, WithoutAWaiterIdNothingIsQueued) {
  auto a = PgStore::open(Opts());
  ASSERT_TRUE(a.ok());
  SyncStore sa(**a);
  const LockRef l{"ops", "n"};
  auto held = sa.acquire_lock({l, "holder", 60000, std::nullopt});
  ASSERT_TRUE(held.ok() && held->acquired);
  EXPECT_EQ(held->record.waiter, std::nullopt);
  auto busy = sa.acquire_lock({l, "other", 60000, std::nullopt});
  ASSERT_TRUE(busy.ok());
  EXPECT_FALSE(busy->acquired);
  EXPECT_FALSE(busy->queued);
  auto g = sa.get_lock(l);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->queued, 0);
  (*a)->close();
}

}  // namespace
}  // namespace ichido::store::postgres
