// Where the tests find PostgreSQL: `make test` (CTest) starts a throwaway cluster before the
// tests that need one (scripts/pg-test-cluster, the `pg` CTest fixture) and passes its URL in a
// file named by $ICHIDO_TEST_PG_URL_FILE. $ICHIDO_TEST_PG_URL gives a URL directly (running a test
// binary by hand against a server of your own).
//
// Neither set: PostgreSQL tests skip (a test binary run by hand without a server). Set but
// unreadable: the tests fail — under CTest the cluster must be there. $ICHIDO_TEST_PG_FORBIDDEN
// (CTest sets it for the cases of a binary it runs without the cluster): a PostgreSQL test that
// lands there fails with that text, so that it is moved to the run with the cluster instead of
// being skipped in every run. Header-only, no test framework, so both the store tests and the
// integration tests use it.
#pragma once

#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

namespace ichido::store_testing {

struct PgTestUrl {
  std::optional<std::string> url;  // nullopt: not configured (skip)
  std::string error;               // configured but unusable (fail)
};

inline PgTestUrl pg_test_url() {
  if (const char* why = std::getenv("ICHIDO_TEST_PG_FORBIDDEN"); why && *why) {
    return {std::nullopt, std::string("a PostgreSQL test in a run without PostgreSQL: ") + why};
  }
  if (const char* u = std::getenv("ICHIDO_TEST_PG_URL"); u && *u) return {std::string(u), ""};
  const char* f = std::getenv("ICHIDO_TEST_PG_URL_FILE");
  if (!f || !*f) return {std::nullopt, ""};
  std::ifstream in(f);
  std::string url;
  std::getline(in, url);
  if (url.empty()) {
    return {std::nullopt, std::string("$ICHIDO_TEST_PG_URL_FILE names ") + f +
                              ", which holds no URL: did the pg_cluster_start test run?"};
  }
  return {url, ""};
}

}  // namespace ichido::store_testing
