// The fixture of the store conformance suite (conformance_test.cc: counters,
// once_conformance_test.cc: once records): the stores under test as factory types, a ManualClock,
// a SyncStore facade and small helpers.
//
// Each store is a factory type in StoreFactories; adding a backend (PostgreSQL) means adding one
// type with the same three members. The tests talk to the stores only through include/ichido/
// store.h, drive time with a ManualClock (never sleeping), and check exact values and exact
// error codes, so two stores that pass give the same answers to the same commands.
#pragma once

#include <date/date.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "ichido/store.h"
#include "store/memory/memory_store.h"
#include "store/postgres/pg_store.h"
#include "store/postgres/schema.h"
#include "store/sqlite/sqlite_store.h"
#include "store/testing/pg_test_env.h"
#include "store/testing/sync_store.h"

namespace ichido::store_testing {

inline TimeMs At(int y, unsigned m, unsigned d, int hh = 0, int mm = 0, int ss = 0) {
  const auto tp = date::sys_days{date::year{y} / date::month{m} / date::day{d}} +
                  std::chrono::hours{hh} + std::chrono::minutes{mm} + std::chrono::seconds{ss};
  return std::chrono::duration_cast<std::chrono::milliseconds>(tp.time_since_epoch()).count();
}

// --- the stores under test -------------------------------------------------------------------
// A factory: `kName`, and `Open(clock)` returning a fresh, empty store that reads `clock`.

struct MemoryFactory {
  static constexpr const char* kName = "Memory";
  Result<std::unique_ptr<Store>> Open(Clock* clock) {
    return std::unique_ptr<Store>(std::make_unique<store::memory::MemoryStore>(clock));
  }
};

struct SqliteFactory {
  static constexpr const char* kName = "Sqlite";
  TempDir dir;  // a fresh data directory per test
  Result<std::unique_ptr<Store>> Open(Clock* clock) {
    store::sqlite::Options o;
    o.dir = dir.path() + "/data";
    o.clock = clock;
    auto s = store::sqlite::SqliteStore::open(std::move(o));
    if (!s.ok()) return std::move(s).error();
    return std::unique_ptr<Store>(std::move(*s));
  }
};

// PostgreSQL (pg_test_env.h says where the server is): one schema per test process, emptied
// (every row deleted, sequences restarted) before the first Open() of each test and kept across
// Open() calls of one test, so reopening finds the data; dropped when the process exits. The
// ManualClock replaces the database's clock (Options::clock), so time-dependent rules are tested
// alike. (A schema per test would cost ~100 ms of DDL each; emptying one costs a few.)
struct PgFactory {
  static constexpr const char* kName = "Postgres";
  static constexpr bool kNeedsServer = true;
  bool emptied = false;

  // The process's schema and a connection to administer it; drops the schema at exit.
  struct Schema {
    std::string name = "conformance_" + std::to_string(::getpid());
    std::unique_ptr<store::postgres::PgConn> conn;
    ~Schema() {
      if (conn) (void)conn->exec_script("DROP SCHEMA IF EXISTS \"" + name + "\" CASCADE");
    }
  };
  static Schema& Shared() {
    static Schema s;
    return s;
  }

  static store::postgres::Options Options(Clock* clock) {
    store::postgres::Options o;
    o.url = pg_test_url().url.value_or("");
    o.schema = Shared().name;
    o.clock = clock;
    o.lanes = 2;
    o.readers = 1;
    return o;
  }

  Result<std::unique_ptr<Store>> Open(Clock* clock) {
    auto o = Options(clock);
    if (!emptied) {
      Schema& sh = Shared();
      if (!sh.conn || sh.conn->broken()) {
        auto c = store::postgres::PgConn::connect(store::postgres::connection_settings(o));
        if (!c.ok()) return std::move(c).error();
        sh.conn = std::move(*c);
      }
      auto m = store::postgres::migrate(*sh.conn, o.schema);
      if (!m.ok()) return std::move(m).error();
      const std::string q = "\"" + o.schema + "\".";
      std::string empty;
      for (const char* t : {"counters", "counter_periods", "issued", "once_records", "locks",
                            "tokens", "audit", "ns_settings"}) {
        empty += "DELETE FROM " + q + t + "; ";
      }
      empty += "ALTER SEQUENCE " + q + "token_seq RESTART; ALTER TABLE " + q +
               "counters ALTER COLUMN id RESTART; ALTER TABLE " + q +
               "audit ALTER COLUMN id RESTART;";
      ICHIDO_TRY(sh.conn->exec_script(empty));
      emptied = true;
    }
    auto s = store::postgres::PgStore::open(std::move(o));
    if (!s.ok()) return std::move(s).error();
    return std::unique_ptr<Store>(std::move(*s));
  }
};

using StoreFactories = ::testing::Types<MemoryFactory, SqliteFactory, PgFactory>;

// Empty when a store of this kind can be opened here; else why not, with *fail set when that
// is an error (a configured server that is missing) rather than a reason to skip.
template <class Factory>
std::string StoreUnusable(bool* fail) {
  *fail = false;
  if constexpr (requires { Factory::kNeedsServer; }) {
    auto url = pg_test_url();
    if (!url.error.empty()) {
      *fail = true;
      return url.error;
    }
    if (!url.url) {
      return "no PostgreSQL server: set ICHIDO_TEST_PG_URL (make test starts one)";
    }
  }
  return "";
}

// In a fixture's SetUp: skips or fails the test when its store cannot be opened here.
#define ICHIDO_SKIP_UNUSABLE_STORE(Factory)                                \
  do {                                                                     \
    bool ichido_fail_ = false;                                             \
    const std::string ichido_why_ = StoreUnusable<Factory>(&ichido_fail_); \
    if (ichido_fail_) FAIL() << ichido_why_;                               \
    if (!ichido_why_.empty()) GTEST_SKIP() << ichido_why_;                 \
  } while (0)

struct FactoryName {
  template <class T>
  static std::string GetName(int) {
    return T::kName;
  }
};

// --- helpers ---------------------------------------------------------------------------------

template <class T>
void ExpectError(const Result<T>& r, errc code, const std::string& field = "") {
  ASSERT_FALSE(r.ok()) << "expected " << to_string(code);
  EXPECT_EQ(r.error().code, code) << "got " << to_string(r.error().code) << ": "
                                  << r.error().message;
  EXPECT_EQ(r.error().field, field);
}

inline std::int64_t DetailInt(const Error& e, const std::string& k) {
  auto it = e.details.find(k);
  if (it == e.details.end() || !std::holds_alternative<std::int64_t>(it->second)) {
    ADD_FAILURE() << "no integer details." << k;
    return -1;
  }
  return std::get<std::int64_t>(it->second);
}

inline std::string Dump(const core::IssuedNumber& r) {
  std::ostringstream o;
  o << r.period << "/" << r.value << " " << r.formatted << " key=" << r.key.value_or("<none>")
    << " note=" << r.note << " at=" << r.issued_at
    << " voided=" << (r.voided_at ? std::to_string(*r.voided_at) : "no")
    << " reason=" << r.void_reason;
  return o.str();
}

inline std::string Dump(const core::CounterInfo& i) {
  std::ostringstream o;
  o << i.name << " start=" << i.config.start << " max=" << i.config.max
    << " format=" << i.config.format << " period=" << core::to_string(i.config.period)
    << " tz=" << i.config.timezone << " require_key=" << i.config.require_key
    << " fiscal_year_start=" << i.config.fiscal_year_start << " last=" << i.last_value
    << " issued=" << i.issued_count << " voided=" << i.voided_count
    << " current=" << i.current_period << " created_at=" << i.created_at;
  return o.str();
}

inline core::CounterConfig Config(std::int64_t start = 0, std::int64_t max = 9999,
                                  std::string format = "R-{seq:4}",
                                  core::Period period = core::Period::none, std::string tz = "UTC",
                                  bool require_key = false) {
  return core::CounterConfig{start, max, std::move(format), period, std::move(tz), require_key};
}

// A fiscal-year (年度) counter whose years start in `start_month`.
inline core::CounterConfig FiscalConfig(std::string format, int start_month = 4,
                                        std::string tz = "Asia/Tokyo", bool require_key = false) {
  core::CounterConfig c =
      Config(0, 9999, std::move(format), core::Period::fiscal_year, std::move(tz), require_key);
  c.fiscal_year_start = start_month;
  return c;
}

// --- the fixture -----------------------------------------------------------------------------

template <class Factory>
class StoreConformance : public ::testing::Test {
 protected:
  static constexpr const char* kNs = "acme";

  void SetUp() override {
    ICHIDO_SKIP_UNUSABLE_STORE(Factory);
    Open();
  }
  void TearDown() override {
    if (store_) store_->close();
  }
  void Open() {
    auto s = factory_.Open(&clock_);
    ASSERT_TRUE(s.ok()) << s.error().message;
    store_ = std::move(*s);
    sync_ = std::make_unique<SyncStore>(*store_);
  }
  // Closes the store and opens it again on the same data (a durable store keeps everything;
  // the memory store starts empty).
  void Reopen() {
    store_->close();
    sync_.reset();
    store_.reset();
    Open();
  }

  SyncStore& S() { return *sync_; }

  CounterRef Ref(const std::string& name, const std::string& ns = kNs) { return {ns, name}; }

  void MustCreate(const std::string& name, const core::CounterConfig& c,
                  const std::string& ns = kNs) {
    auto r = S().create_counter({Ref(name, ns), c});
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_TRUE(r->created);
  }

  Result<NextReply> Next(const std::string& name, std::optional<std::string> key = std::nullopt,
                         std::string note = "") {
    return S().next({Ref(name), core::NextCommand{std::move(key), std::move(note)}});
  }

  // Issues a number that must succeed and returns its value (-1 after a reported failure).
  std::int64_t MustNext(const std::string& name, std::optional<std::string> key = std::nullopt) {
    auto r = Next(name, std::move(key));
    EXPECT_TRUE(r.ok()) << r.error().message;
    if (!r.ok()) return -1;
    EXPECT_FALSE(r->replayed);
    return r->record.value;
  }

  Result<IssuedPage> Issued(const std::string& name, std::int64_t after = 0, int limit = 100,
                            std::optional<std::string> period = std::nullopt) {
    IssuedQuery q;
    q.ref = Ref(name);
    q.after = after;
    q.limit = limit;
    q.period = std::move(period);
    return S().list_issued(std::move(q));
  }

  std::vector<std::int64_t> Values(const IssuedPage& p) {
    std::vector<std::int64_t> v;
    for (const auto& i : p.items) v.push_back(i.value);
    return v;
  }

  // Everything observable about the namespace, for before/after comparisons.
  std::string Snapshot() {
    std::ostringstream o;
    auto list = S().list_counters(kNs);
    if (!list.ok()) return "list_counters failed: " + list.error().message;
    for (const auto& info : *list) {
      o << Dump(info) << "\n";
      auto page = Issued(info.name, 0, 1000, info.current_period);
      if (!page.ok()) return "list_issued failed: " + page.error().message;
      for (const auto& rec : page->items) o << "  " << Dump(rec) << "\n";
    }
    return o.str();
  }

  // Members are destroyed in reverse order: the store first, then its directory, then the clock.
  ManualClock clock_{At(2026, 4, 1, 9, 30)};
  Factory factory_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<SyncStore> sync_;
};

}  // namespace ichido::store_testing
