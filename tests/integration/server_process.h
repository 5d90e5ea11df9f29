// ServerProcess: runs the real `ichido serve` binary for integration tests — port 0 (the kernel
// picks a free port), its own data directory, output captured to a log file. Tests stop it with
// SIGTERM (clean) or SIGKILL (crash) and start it again on the same data directory.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cli/client.h"

namespace ichido::testing {

// A fresh temporary directory, removed (recursively) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The store every ServerProcess of this test run uses: the embedded one (default), or PostgreSQL
// when $ICHIDO_TEST_STORE is "postgres" — CTest runs the whole integration suite a second time
// that way (tests named pg.*), against the throwaway cluster of the `pg` fixture.
bool on_postgres();

class ServerProcess {
 public:
  // `data_dir`: the store's directory (with PostgreSQL: the node's own files); the log goes to
  // data_dir + ".log". Without `auth` the server runs with --no-auth. On PostgreSQL each
  // ServerProcess gets a schema of its own (kept across restarts, dropped by the destructor).
  explicit ServerProcess(std::string data_dir, std::vector<std::string> extra_args = {},
                         bool auth = false);
  ~ServerProcess();  // kills the server if it still runs

  // The arguments that name this server's store for `ichido serve` and `ichido token`:
  // "--data DIR", or "--store URL --store-schema S" (shell-quoted, for run_command).
  std::string store_args() const;
  // PostgreSQL only: every row of the server's tables as JSON text, bytea values hex-encoded
  // (to check what the database holds). Empty on the embedded store.
  std::string store_dump() const;

  // PostgreSQL only, before start(): use the same database and schema as `other` (another node
  // of one deployment; the schema stays `other`'s to drop).
  void share_store(const ServerProcess& other);
  // PostgreSQL only, before start(): this URL and schema (a cluster the test runs itself; the
  // schema is not dropped by this object).
  void set_store(std::string url, std::string schema);
  const std::string& store_url() const { return pg_url_; }
  const std::string& store_schema() const { return pg_schema_; }
  // Environment variables the server process gets in addition to the test's (e.g. libfaketime).
  void set_env(std::vector<std::pair<std::string, std::string>> env) { env_ = std::move(env); }
  // Runs another build of ichido than ichido_binary() (before start()).
  void set_binary(std::string path) { binary_ = std::move(path); }
  // --listen (before start()); default 127.0.0.1:0. "localhost:0" listens on 127.0.0.1 and ::1,
  // port() is the port of both.
  void set_listen(std::string listen) { listen_ = std::move(listen); }

  // Starts the server and waits (bounded, 20 s) until it prints its listening line.
  // Returns false (with the log in `error`) when it exits or never becomes ready.
  bool start(std::string* error);
  // SIGTERM and wait; returns the exit status (-1 when it did not exit normally).
  int stop();
  // Waits for the server to exit by itself (after a signal the test sent); returns the exit
  // status (-1 when it did not exit normally).
  int wait_exit();
  // SIGKILL and reap: a crash at an arbitrary point.
  void kill9();
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  const std::string& data_dir() const { return data_dir_; }

  std::uint16_t port() const { return port_; }
  cli::BaseUrl url() const;
  std::string log() const;

 private:
  std::string data_dir_;
  std::string pg_url_;       // on_postgres(): the server's database
  std::string pg_schema_;    // on_postgres(): its schema
  bool owns_schema_ = true;  // drop pg_schema_ in the destructor
  std::vector<std::pair<std::string, std::string>> env_;
  std::string binary_;  // empty: ichido_binary()
  std::string listen_ = "127.0.0.1:0";
  std::vector<std::string> extra_args_;
  bool auth_ = false;
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
};

// The path of the ichido binary under test (compiled in by CMake).
const char* ichido_binary();

// The threads of process `pid` by thread id → name, once two listings 100 ms apart agree (at
// most 5 s): its long-lived threads, without a short-lived helper that comes and goes meanwhile
// (the PostgreSQL store's connection attempt runs on a thread of its own while it lasts).
std::map<std::string, std::string> steady_threads(pid_t pid);

}  // namespace ichido::testing
