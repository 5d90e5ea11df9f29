// ServeConfig: everything `ichido serve` can be told. Filled by the CLI (src/cli), consumed by
// run_server (src/server/server.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ichido::server {

struct ServeConfig {
  std::string listen = "127.0.0.1:7878";   // HOST:PORT; port 0 picks a free port
  std::string data_dir = "./ichido-data";  // the embedded store; with store_url: node-local files
  bool init = false;  // start a new, empty store where the database was lost (--init)
  // /readyz fails below this much free disk in the data directory (--min-free-disk; 0: never).
  std::uint64_t min_free_disk = 0;
  // PostgreSQL (several stateless nodes on one database): a libpq URI or key=value conninfo
  // (multi-host lists allowed). Empty: the embedded store in data_dir.
  std::string store_url;
  std::string store_schema = "ichido";  // the PostgreSQL schema holding ichido's tables
  int store_connections = 4;            // write connections (each its own group commit)
  bool store_no_prepare = false;        // unnamed statements only (PgBouncer < 1.21)
  // The LISTEN connection's URL (empty: store_url): the database itself when store_url is a
  // PgBouncer in transaction mode, where LISTEN does not work (decision 075).
  std::string listen_store_url;
  // With store_url: a request waits for the database at most this long, then answers 503
  // store_unavailable (details.outcome "unknown" when its commit had been sent) (--store-timeout).
  std::int64_t store_timeout_ms = 5000;
  bool no_auth = false;       // accept calls without a token; only when listening on loopback
  bool metrics_open = false;  // /metrics without a token
  std::string tls_cert;       // PEM certificate chain; with tls_key: serve HTTPS only
  std::string tls_key;        // PEM private key
  int threads = 0;            // I/O threads; 0 = number of cores
  std::size_t max_body_bytes = 64 * 1024;
  std::size_t max_header_bytes = 16 * 1024;
  std::uint32_t read_timeout_ms = 30000;   // a request must arrive whole within this
  std::uint32_t idle_timeout_ms = 60000;   // keep-alive connections idle longer are closed
  std::uint32_t drain_timeout_ms = 10000;  // on SIGTERM, in-flight requests get this long
  std::size_t max_connections = 10000;
  // Completed and dead once records older than this are purged in the background
  // (--once-retention).
  std::int64_t once_retention_ms = std::int64_t{30} * 24 * 3600 * 1000;
  std::size_t max_waiters_per_lock = 10000;  // more waiters on one lock: 429 too_many_waiters
  std::size_t max_waiters = 100000;          // waiters over all locks, same answer beyond it
  // The zone (IANA name) of a counter created without "timezone" (--default-timezone; the CLI
  // refuses an unknown zone before the server starts).
  std::string default_timezone = "UTC";
  bool request_log = true;          // one line per request on stderr (--request-log on|off)
  std::string log_format = "text";  // "text" or "json": the request log and the server's messages
  // --cors-origin: origins (scheme://host[:port], core/origin.h) whose web pages may call the API
  // from a browser (CORS). Empty: CORS off.
  std::vector<std::string> cors_origins;
};

// Runs the server until SIGTERM or SIGINT, then drains and closes the store. Prints
// "ichido listening on HOST:PORT" on stdout once it accepts connections. Returns the process
// exit code: kExitClean after a clean shutdown, else one of the start-up failures below (the
// log says what and what to do).
inline constexpr int kExitClean = 0;
inline constexpr int kExitStoreFailed = 1;    // the store could not be opened (may be passing)
inline constexpr int kExitUsage = 2;          // bad flags or configuration
inline constexpr int kExitCannotListen = 3;   // the address is in use or not this machine's
inline constexpr int kExitNeedsOperator = 4;  // the data needs an operator: do not restart
                                              // (a lost database, damage, a newer schema)
int run_server(const ServeConfig& config);

}  // namespace ichido::server
