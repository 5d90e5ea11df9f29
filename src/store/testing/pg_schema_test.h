// PgSchemaTest: a GoogleTest fixture that gives every test a PostgreSQL schema of its own (a new
// store), dropped after the test. Skips when no server is configured and fails when one is
// configured but missing (store/testing/pg_test_env.h). For the PostgreSQL store's own tests and
// for service tests over that store; the conformance suite shares one schema instead
// (conformance_fixture.h). A derived fixture that opens stores in SetUp calls this SetUp first
// (and stops when the test was skipped or failed) and closes them before this TearDown.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <utility>

#include "store/postgres/pg_conn.h"
#include "store/postgres/pg_store.h"
#include "store/testing/pg_test_env.h"

namespace ichido::store_testing {

class PgSchemaTest : public ::testing::Test {
 protected:
  // `prefix` names the schemas: PREFIX_PID_N, unique among the processes sharing the server.
  explicit PgSchemaTest(std::string prefix) : prefix_(std::move(prefix)) {}

  void SetUp() override {
    auto u = pg_test_url();
    if (!u.error.empty()) FAIL() << u.error;
    if (!u.url) GTEST_SKIP() << "no PostgreSQL server: set ICHIDO_TEST_PG_URL (make test does)";
    url_ = *u.url;
    static std::atomic<int> n{0};
    schema_ = prefix_ + "_" + std::to_string(::getpid()) + "_" + std::to_string(n.fetch_add(1));
  }
  void TearDown() override {
    if (url_.empty()) return;
    auto c = Admin();
    if (c) (void)c->exec_script("DROP SCHEMA IF EXISTS \"" + schema_ + "\" CASCADE");
  }

  // The store's options for this test's schema (small pools: tests open several stores).
  store::postgres::Options Opts() const {
    store::postgres::Options o;
    o.url = url_;
    o.schema = schema_;
    o.lanes = 2;
    o.readers = 1;
    o.application_name = "ichido-" + schema_;
    return o;
  }
  // A connection of its own, for looking at or changing the schema behind the store's back.
  std::unique_ptr<store::postgres::PgConn> Admin() const {
    store::postgres::PgConn::Settings s;
    s.conninfo = url_;
    auto c = store::postgres::PgConn::connect(s);
    EXPECT_TRUE(c.ok()) << c.error().message;
    return c.ok() ? std::move(*c) : nullptr;
  }

  std::string url_, schema_;

 private:
  std::string prefix_;
};

}  // namespace ichido::store_testing
