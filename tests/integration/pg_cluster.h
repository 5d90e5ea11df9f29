// PgCluster: a PostgreSQL cluster a test runs itself (through scripts/pg-test-cluster), for the
// tests that stop, restart, crash or fail over the database, or put PgBouncer in front of it.
// The destructor stops and removes it (and PgBouncer) whatever the test did.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "store/postgres/pg_conn.h"
#include "test_util.h"

namespace ichido::testing {

class PgCluster {
 public:
  // `handle_dir`: where the script keeps the cluster's name and URL (a test's TempDir child).
  explicit PgCluster(std::string handle_dir) : handle_(std::move(handle_dir)) {}
  ~PgCluster() { (void)script("stop " + handle_); }
  PgCluster(const PgCluster&) = delete;
  PgCluster& operator=(const PgCluster&) = delete;

  // A fresh cluster; `sets` are extra postgresql.conf lines ("name = value").
  bool start(std::string* error, const std::vector<std::string>& sets = {}) {
    std::string args = "start " + handle_;
    for (const auto& s : sets) args += " --set '" + s + "'";
    return check(script(args), error);
  }
  // A streaming standby of `primary` (application_name "standby").
  bool start_standby_of(const PgCluster& primary, std::string* error) {
    return check(script("standby " + primary.handle_ + " " + handle_), error);
  }
  // PgBouncer (transaction pooling) in front of `target`.
  bool start_pgbouncer_for(const PgCluster& target, std::string* error) {
    return check(script("pgbouncer " + target.handle_ + " " + handle_), error);
  }
  bool restart() { return script("restart " + handle_).first == 0; }
  bool stop_keep() { return script("stop " + handle_ + " --keep").first == 0; }
  bool resume() { return script("resume " + handle_).first == 0; }
  bool kill9() { return script("kill " + handle_).first == 0; }
  bool promote() { return script("promote " + handle_).first == 0; }

  std::string url() const { return slurp_line(handle_ + "/url"); }
  // Runs SQL on this cluster as postgres; returns psql's status and unaligned, tuples-only output.
  std::pair<int, std::string> psql(const std::string& sql) const {
    return script("psql " + handle_ + " -At -c " + quote(sql));
  }

 private:
  static std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) {
      if (c == '\'') {
        q += "'\\''";
      } else {
        q.push_back(c);
      }
    }
    return q + "'";
  }
  static std::string slurp_line(const std::string& path) {
    std::string s = slurp(path);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
  }
  static std::pair<int, std::string> script(const std::string& args) {
    return run_command(std::string(ICHIDO_SOURCE_DIR) + "/scripts/pg-test-cluster " + args +
                       " 2>&1");
  }
  static bool check(const std::pair<int, std::string>& r, std::string* error) {
    if (r.first == 0) return true;
    *error = r.second;
    return false;
  }

  std::string handle_;
};

// One value (first column of the first row, as text) of a query on `url`; "" on failure.
inline std::string query_value(const std::string& url, const std::string& sql) {
  store::postgres::PgConn::Settings s;
  s.conninfo = url;
  auto c = store::postgres::PgConn::connect(s);
  if (!c.ok()) return "";
  auto r =
      (*c)->query(store::postgres::Stmt{"SELECT (" + sql + ")::text"}, store::postgres::Params());
  if (!r.ok() || r->rows() == 0 || r->is_null(0, 0)) return "";
  return r->str(0, 0);
}

}  // namespace ichido::testing
