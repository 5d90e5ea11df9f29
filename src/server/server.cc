// Composition root: wires store, services, HTTP server, signals and drain.
#include "http/server.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <cstdio>
#include <filesystem>
#include <future>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

#include "base/secret.h"
#include "base/thread_name.h"
#include "core/counter.h"
#include "core/origin.h"
#include "http/api.h"
#include "server/config.h"
#include "server/listen_address.h"
#include "service/token_auth.h"
#include "store/postgres/pg_store.h"
#include "store/sqlite/data_dir.h"
#include "store/sqlite/sqlite_store.h"
#include "store/sqlite/token_admin.h"

namespace ichido::server {
namespace {

// The server's own messages on stderr: "TIME ichido: message", or with --log-format json one
// object per line {"at", "level": "info", "msg"} like the request log. Constant after start-up.
class ServerLog {
 public:
  explicit ServerLog(bool json) : json_(json) {}
  void operator()(const std::string& msg) const {
    const std::string at = format_rfc3339(SystemClock::instance().now_ms());
    if (json_) {
      std::cerr << boost::json::serialize(
                       boost::json::object{{"at", at}, {"level", "info"}, {"msg", msg}})
                << std::endl;
    } else {
      std::cerr << at << " ichido: " << msg << std::endl;
    }
  }

 private:
  const bool json_;
};

// Once-record retention: every `interval`, purge completed and dead records finished more than
// `retention_ms` ago, in batches of kPurgeBatch. Each batch is its own short write transaction
// in the group-commit queue, so requests interleave with a long purge instead of waiting for it.
// Runs on the I/O threads as one coroutine (no thread of its own); ends when the io_context stops.
constexpr int kPurgeBatch = 200;

boost::asio::awaitable<void> purge_once_records(const ServerLog& log, service::OnceService& once,
                                                std::int64_t retention_ms) {
  namespace asio = boost::asio;
  // A tenth of the default retention, at most a minute: a namespace's own retention (PUT
  // /v1/ns/{ns}/settings) is honoured within a minute of its records coming due.
  const auto interval =
      std::chrono::milliseconds(std::clamp<std::int64_t>(retention_ms / 10, 100, 60000));
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    timer.expires_after(interval);
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
    std::int64_t purged = 0;
    for (;;) {
      PurgeOnceCmd cmd{0, kPurgeBatch, retention_ms};  // cut-off on the store's clock
      auto n = co_await once.purge(cmd);
      if (!n.ok()) {
        log("once retention: purge failed (will retry): " + n.error().message);
        break;
      }
      purged += *n;
      if (*n < kPurgeBatch) break;
    }
    if (purged > 0) log("once retention: purged " + std::to_string(purged) + " records");
  }
}

// Refreshes the overview snapshot behind the /metrics once gauges every kRefreshInterval (at
// once at start-up, so the first scrape has figures). A failure keeps the old snapshot.
boost::asio::awaitable<void> refresh_overview(const ServerLog& log,
                                              service::OverviewService& overview) {
  namespace asio = boost::asio;
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    auto r = co_await overview.refresh(SystemClock::instance().now_ms());
    if (!r.ok()) log("overview refresh failed (will retry): " + r.error().message);
    timer.expires_after(service::OverviewService::kRefreshInterval);
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
  }
}

// First start with authentication on and no token yet: mint an admin token scoped to every
// namespace and write it to DIR/admin.token (0600). Returns the file's path, or "" when another
// node sharing the store made the first token meanwhile (then this one leaves no file).
// The file is written durably *before* the token is stored: a start that cannot write it (or
// crashes before it is on disk) stores nothing, so the next start mints one again — the other
// order left a stored token that nobody had.
Result<std::string> create_first_admin_token(store::TableStore& store, const std::string& dir) {
  const std::string secret = new_token_secret();
  auto info =
      core::make_token(new_token_id(), secret, core::Role::admin, std::string(core::kAllNamespaces),
                       "first admin token", SystemClock::instance().now_ms(), std::nullopt);
  if (!info.ok()) return std::move(info).error();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);  // with --store, --data may not exist yet
  const std::string path = dir + "/admin.token";
  const std::string line = secret + "\n";
  const std::string_view pieces[] = {line};
  if (auto w = store::sqlite::replace_file_durably(path, pieces, 0600); !w.ok()) {
    return Error(errc::internal, "cannot write " + path + ": " + w.error().message);
  }
  core::AuditEntry audit;
  audit.actor = "ichido";
  audit.action = "first admin token";
  audit.status = 201;
  audit.remote = "local";
  audit.detail = "id " + info->id + ", written to " + path;
  std::promise<Result<bool>> p;
  auto f = p.get_future();
  store.create_first_token(std::move(*info), std::move(audit),
                           [&p](Result<bool> r) { p.set_value(std::move(r)); });
  auto stored = f.get();
  if (!stored.ok() || !*stored) ::unlink(path.c_str());  // a secret the store does not know
  if (!stored.ok()) return std::move(stored).error();
  if (!*stored) return std::string();
  return path;
}

// DIR/store.id: the PostgreSQL store a node served (its store_identity), one line. "" when the
// file is absent or empty.
std::string read_store_id(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return std::string();
  char buf[128] = {};
  const bool got = std::fgets(buf, sizeof buf, f) != nullptr;
  std::fclose(f);
  std::string id = got ? std::string(buf) : std::string();
  while (!id.empty() && (id.back() == '\n' || id.back() == '\r' || id.back() == ' ')) id.pop_back();
  return id;
}

// Writes DIR/store.id durably (store/sqlite/data_dir.h: replace_file_durably).
Result<void> write_store_id(const std::string& path, const std::string& id) {
  std::error_code ec;
  const std::string dir = std::filesystem::path(path).parent_path().string();
  std::filesystem::create_directories(dir, ec);  // with --store, --data may not exist yet
  const std::string line = id + "\n";
  const std::string_view pieces[] = {line};
  if (!store::sqlite::replace_file_durably(path, pieces, 0644).ok()) {
    return Error(errc::internal, "cannot write " + path +
                                     " (this node's record of the store it serves; is --data "
                                     "writable?)");
  }
  return {};
}

// The embedded store in cfg.data_dir, or PostgreSQL when cfg.store_url is set. Logs where
// (never the URL itself: it may carry a password).
Result<std::unique_ptr<store::TableStore>> open_store(const ServerLog& log,
                                                      const ServeConfig& cfg) {
  if (cfg.store_url.empty()) {
    store::sqlite::Options o;
    o.dir = cfg.data_dir;
    o.init = cfg.init;
    o.min_free_disk = cfg.min_free_disk;
    o.on_upgrade = [log](int from, int to) {  // a copy: the store keeps its options
      log("upgrading the store's schema from version " + std::to_string(from) + " to " +
          std::to_string(to) + " (once; on a large store this start takes a while)");
    };
    o.on_notice = [log](const std::string& line) { log(line); };
    o.caller_may_commit = &http::this_thread_serves_one_client;
    auto s = store::sqlite::SqliteStore::open(o);
    if (!s.ok()) return std::move(s).error();
    log("store " + (*s)->identity().store_id + " opened at " + (*s)->db_path() +
        (cfg.init ? " (--init: a new, empty store)" : ""));
    return std::unique_ptr<store::TableStore>(std::move(*s));
  }
  store::postgres::Options o;
  o.url = cfg.store_url;
  o.schema = cfg.store_schema;
  o.lanes = cfg.store_connections;
  o.listen_url = cfg.listen_store_url;
  // A request's time bound; a lock held elsewhere is waited for a quarter of it (a batch may
  // wait twice: the second time only for the jobs that need that lock), and a transaction this
  // node leaves idle (cut off mid-batch) holds its locks on other nodes at most the bound.
  o.timeout_ms = static_cast<int>(cfg.store_timeout_ms);
  o.lock_timeout_ms = std::max(100, o.timeout_ms / 4);
  o.idle_in_tx_timeout_ms = o.timeout_ms;
  o.statements = cfg.store_no_prepare ? store::postgres::PgConn::Mode::unnamed
                                      : store::postgres::PgConn::Mode::prepared;
  // The store this node served before (decision 134): never replaced by a new, empty one
  // unless --init says so.
  const std::string id_file = cfg.data_dir + "/store.id";
  if (!cfg.init) o.expect_store_id = read_store_id(id_file);
  auto s = store::postgres::PgStore::open(o);
  if (!s.ok()) return std::move(s).error();
  if ((*s)->store_id() != o.expect_store_id) {
    // Best effort: a node whose --data is read-only (a container) still serves; it only cannot
    // remember its store (decision 134).
    if (auto w = write_store_id(id_file, (*s)->store_id()); !w.ok()) {
      log("warning: " + w.error().message +
          "; this node will not notice if its database is "
          "emptied or replaced before its next start");
    }
  }
  log("store " + (*s)->store_id() + " opened: PostgreSQL at " + (*s)->describe() + " (" +
      std::to_string(o.lanes) + " write connections" +
      (cfg.store_no_prepare ? ", unnamed statements" : "") + "; node-local files in " +
      cfg.data_dir + ")");
  return std::unique_ptr<store::TableStore>(std::move(*s));
}

// Raises the soft limit on open files to the hard limit: the common default soft limit (1024)
// would stop a server at about a thousand sockets. Logs what connection capacity results.
void raise_fd_limit(const ServerLog& log, std::size_t max_connections) {
  struct rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  const rlim_t before = rl.rlim_cur;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) rl.rlim_cur = before;
  }
  // Descriptors not available for clients: the store's files, the listener, stdio, a margin.
  constexpr rlim_t kReserved = 64;
  const rlim_t usable = rl.rlim_cur > kReserved ? rl.rlim_cur - kReserved : 0;
  std::string msg = "open-file limit " + std::to_string(rl.rlim_cur) +
                    (before != rl.rlim_cur ? " (raised from " + std::to_string(before) + ")" : "");
  if (usable < max_connections) {
    log(msg + ": only about " + std::to_string(usable) + " of the " +
        std::to_string(max_connections) +
        " connections --max-connections allows can be open at once; more wait in the kernel's "
        "backlog. Raise the hard limit (ulimit -Hn, LimitNOFILE=) or lower --max-connections.");
  } else {
    log(msg + ": up to " + std::to_string(max_connections) + " connections (--max-connections)");
  }
}

// Binds every address of `addr` on one port. With port 0 the first listener picks the port and
// the others take the same one (all again, on a new port, when another program holds it on a
// later address). "localhost" where IPv6 is unavailable listens on 127.0.0.1 alone and says so.
Result<std::vector<boost::asio::ip::tcp::acceptor>> bind_listeners(boost::asio::io_context& ioc,
                                                                   const ListenAddress& addr,
                                                                   const ServerLog& log) {
  namespace asio = boost::asio;
  constexpr int kAttempts = 10;
  for (int attempt = 1;; ++attempt) {
    std::vector<asio::ip::tcp::acceptor> out;
    auto first = http::bind_listener(ioc, addr.hosts[0], addr.port);
    if (!first.ok()) return std::move(first).error();
    const std::uint16_t port = first->local_endpoint().port();
    out.push_back(std::move(*first));
    bool again = false;
    for (std::size_t i = 1; i < addr.hosts.size() && !again; ++i) {
      boost::system::error_code os;
      auto more = http::bind_listener(ioc, addr.hosts[i], port, &os);
      if (more.ok()) {
        out.push_back(std::move(*more));
      } else if (addr.localhost && (os == asio::error::address_family_not_supported ||
                                    os == boost::system::errc::address_not_available)) {
        log("localhost: no IPv6 loopback here (" + os.message() + "); listening on " +
            addr.hosts[0] + " only");
      } else if (addr.port == 0 && os == asio::error::address_in_use && attempt < kAttempts) {
        again = true;
      } else {
        return std::move(more).error();
      }
    }
    if (!again) return out;
  }
}

}  // namespace

int run_server(const ServeConfig& cfg) {
  const ServerLog log(cfg.log_format == "json");
  auto addr = parse_listen_address(cfg.listen);
  if (!addr.ok()) {
    log("cannot start: " + addr.error().message);
    return kExitUsage;
  }
  if (cfg.no_auth && !addr->loopback) {
    log("cannot start: refusing --no-auth on " + cfg.listen +
        ": without authentication ichido only listens on a loopback address (127.0.0.1 or ::1).");
    return kExitUsage;
  }
  if (cfg.tls_cert.empty() != cfg.tls_key.empty()) {
    log("cannot start: --tls-cert and --tls-key go together: give both or neither.");
    return kExitUsage;
  }
  if (auto zone = core::local_date(cfg.default_timezone, 0); !zone.ok()) {
    log("cannot start: --default-timezone: " + zone.error().message);
    return kExitUsage;
  }
  std::vector<std::string> cors_origins;
  for (const auto& text : cfg.cors_origins) {
    auto origin = core::parse_origin_pattern(text);
    if (!origin.ok()) {
      log("cannot start: --cors-origin: " + origin.error().message);
      return kExitUsage;
    }
    cors_origins.push_back(std::move(*origin));
  }
  const int threads =
      cfg.threads > 0 ? cfg.threads : std::max(1u, std::thread::hardware_concurrency());
  // I/O threads (decision 139): one io_context per thread, each run by that thread alone
  // (concurrency hint 1). Connections are spread over them in turn, so a connection's handlers
  // always run on one thread — an implicit strand: no strand queue and lock per handler, and
  // the threads share no scheduler. `ioc`, the first, also runs the listener, the signals and
  // the background coroutines.
  boost::asio::io_context ioc(1);
  // SIGHUP (systemctl reload, certbot's deploy hook) reloads the TLS certificate and key; it is
  // caught from here on, so one that arrives while the store opens is answered once serving
  // instead of ending the process (its default action).
  boost::asio::signal_set hup(ioc, SIGHUP);
  std::vector<std::unique_ptr<boost::asio::io_context>> more_ioc;  // threads 2..N
  for (int i = 1; i < threads; ++i)
    more_ioc.push_back(std::make_unique<boost::asio::io_context>(1));
  // The port first: a start that cannot listen must not create a data directory or a token.
  auto listeners = bind_listeners(ioc, *addr, log);
  if (!listeners.ok()) {
    log("cannot start: " + listeners.error().message +
        " (is another server running there? choose another --listen)");
    return listeners.error().code == errc::invalid_request ? kExitUsage : kExitCannotListen;
  }
  raise_fd_limit(log, cfg.max_connections);

  if (!cfg.store_url.empty() && cfg.min_free_disk > 0) {
    log("cannot start: --min-free-disk is for the embedded store (--data); with --store the "
        "database server watches its own disk.");
    return kExitUsage;
  }
  auto store = open_store(log, cfg);
  if (!store.ok()) {
    const Error& e = store.error();
    log("cannot start: " + e.message);
    const bool operator_needed =
        e.code == errc::store_corrupt || e.details.count("needs_operator") > 0;
    return operator_needed ? kExitNeedsOperator : kExitStoreFailed;
  }
  http::Metrics metrics;
  service::AuthOptions auth_opt;
  // A3: token changes made outside this process. The data directory's revision counter, mapped
  // (`ichido token --data`; decision 144); on PostgreSQL, the change feed's "tokens changed"
  // (other nodes and `ichido token --store` announce them in their transaction, decision 075).
  std::atomic<std::uint64_t> external_token_changes{0};
  if (cfg.store_url.empty()) {
    auto rev = std::make_shared<store::sqlite::TokensRevision>(cfg.data_dir);
    auth_opt.external_revision = [rev] { return (*rev)(); };
    auth_opt.recheck_revision = [rev] { rev->recheck(); };
  } else {
    auth_opt.external_revision = [&external_token_changes] {
      return external_token_changes.load();
    };
  }
  service::Authenticator auth(**store, SystemClock::instance(), std::move(auth_opt));
  if (cfg.no_auth) {
    log("WARNING: --no-auth: every caller on this machine can use every call, admin ones too");
  } else {
    if (auto r = auth.load_blocking(); !r.ok()) {
      log("cannot start: cannot read the tokens: " + r.error().message);
      (*store)->close();
      return kExitStoreFailed;
    }
    if (auth.token_count() == 0) {
      auto made = create_first_admin_token(**store, cfg.data_dir);
      if (!made.ok()) {
        log("cannot start: cannot create the first admin token: " + made.error().message);
        (*store)->close();
        return kExitStoreFailed;
      }
      if (made->empty()) {
        log("another node created the first admin token (in its --data directory); make more "
            "with: ichido token create --store URL --ns NS --role ROLE");
      } else {
        log("first start: an admin token was written to " + *made +
            " (mode 0600); use it as \"Authorization: Bearer <token>\" or "
            "export ICHIDO_TOKEN=$(cat " +
            *made + ")");
      }
      (void)auth.load_blocking();
    }
  }
  http::ApiOptions api_opt;
  api_opt.locks.max_waiters_per_lock = cfg.max_waiters_per_lock;
  api_opt.locks.max_waiters_total = cfg.max_waiters;
  api_opt.auth = cfg.no_auth ? nullptr : &auth;
  api_opt.metrics_open = cfg.metrics_open;
  api_opt.default_once_retention_ms = cfg.once_retention_ms;
  api_opt.default_timezone = cfg.default_timezone;
  if (!cors_origins.empty()) {
    std::string list;
    for (const auto& o : cors_origins) list += (list.empty() ? "" : ", ") + o;
    log("CORS: web pages from " + list + " may call the API (--cors-origin)");
  }
  api_opt.cors_origins = std::move(cors_origins);
  // Declared before the Api and the server so it outlives every request that writes to it.
  std::unique_ptr<http::RequestLog> request_log;
  if (cfg.request_log) {
    request_log = std::make_unique<http::RequestLog>(
        STDERR_FILENO, cfg.log_format == "json" ? http::LogFormat::json : http::LogFormat::text);
    api_opt.request_log = request_log.get();
  }
  http::Api api(**store, metrics, api_opt);
  // Other nodes' changes wake this node's waiters and reload its tokens (PostgreSQL only; the
  // embedded store never calls it). Unregistered before the Api goes away.
  (*store)->watch_external_changes([&api, &external_token_changes](const ExternalChanges& c) {
    if (c.tokens) external_token_changes.fetch_add(1);
    api.on_external_changes(c);
  });
  http::Limits limits;
  limits.max_body_bytes = cfg.max_body_bytes;
  limits.max_header_bytes = cfg.max_header_bytes;
  limits.read_timeout_ms = cfg.read_timeout_ms;
  limits.idle_timeout_ms = cfg.idle_timeout_ms;
  limits.max_connections = cfg.max_connections;
  http::HttpServer server(ioc, api, metrics, limits);
  if (!cfg.tls_cert.empty()) {
    auto r = server.enable_tls(cfg.tls_cert, cfg.tls_key);
    if (!r.ok()) {
      log("cannot start: " + r.error().message);
      (*store)->close();
      return kExitUsage;
    }
    log("TLS certificate: " + *r);
  }
  {
    std::vector<boost::asio::io_context*> contexts{&ioc};
    for (auto& c : more_ioc) contexts.push_back(c.get());
    server.serve_connections_on(std::move(contexts));
  }
  std::vector<boost::asio::ip::tcp::endpoint> endpoints;
  for (auto& l : *listeners) endpoints.push_back(server.adopt(std::move(l)));
  server.start();
  boost::asio::co_spawn(ioc, purge_once_records(log, api.once(), cfg.once_retention_ms),
                        boost::asio::detached);
  boost::asio::co_spawn(boost::asio::make_strand(ioc), refresh_overview(log, api.overview()),
                        boost::asio::detached);
  if (!cfg.no_auth) {
    auth.start_refresh(boost::asio::make_strand(ioc), std::chrono::milliseconds(1000));
  }

  // SIGTERM/SIGINT: stop accepting, let in-flight requests finish (up to drain_timeout_ms),
  // then stop the I/O threads; the store is closed after them. A second signal stops at once.
  boost::asio::signal_set signals(ioc, SIGINT, SIGTERM);
  boost::asio::steady_timer drain_timer(ioc);
  const auto drain_deadline_ms = cfg.drain_timeout_ms;
  std::function<void(int)> on_signal;
  std::function<void()> watch;
  auto deadline = std::chrono::steady_clock::time_point::max();
  watch = [&] {
    if (server.active() == 0 || std::chrono::steady_clock::now() >= deadline) {
      ioc.stop();
      return;
    }
    drain_timer.expires_after(std::chrono::milliseconds(20));
    drain_timer.async_wait([&](boost::system::error_code) { watch(); });
  };
  on_signal = [&](int sig) {
    if (deadline != std::chrono::steady_clock::time_point::max()) {
      log("second signal: stopping now");
      ioc.stop();
      return;
    }
    log(std::string("received ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") +
        ": draining connections");
    deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(drain_deadline_ms);
    api.shutdown_waiters();  // parked requests get their "not now" answer before the drain
    server.begin_drain();
    watch();
    signals.async_wait([&](boost::system::error_code ec, int s) {
      if (!ec) on_signal(s);
    });
  };
  signals.async_wait([&](boost::system::error_code ec, int s) {
    if (!ec) on_signal(s);
  });
  // SIGHUP: new TLS connections get the certificate and key read again from their files; open
  // ones keep theirs. A replacement that cannot be loaded (unreadable, not PEM, a key that does
  // not match) is logged and the current certificate stays in use (decision 171).
  std::function<void()> on_hup = [&] {
    hup.async_wait([&](boost::system::error_code ec, int) {
      if (ec) return;
      if (!server.tls_enabled()) {
        log("received SIGHUP: nothing to reload (no --tls-cert)");
      } else if (auto r = server.reload_tls(); r.ok()) {
        log("received SIGHUP: reloaded the TLS certificate: " + *r);
      } else {
        log("received SIGHUP: cannot reload the TLS certificate, still serving the previous one: " +
            r.error().message);
      }
      on_hup();
    });
  };
  on_hup();

  std::vector<std::thread> pool;
  // An exception escaping a handler must not unwind past joinable threads (std::terminate);
  // log it and keep serving (Asio's documented pattern: run() again after an exception).
  auto run_io = [&](boost::asio::io_context& c) {
    for (;;) {
      try {
        c.run();
        return;
      } catch (const std::exception& e) {
        log(std::string("an I/O handler threw (") + e.what() + "); continuing");
      }
    }
  };
  // The other threads' io_contexts have nothing to do between connections: kept running until
  // `ioc` stops (drained, or a second signal), then stopped with it.
  std::vector<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> keep;
  for (std::size_t i = 0; i < more_ioc.size(); ++i) {
    keep.push_back(boost::asio::make_work_guard(*more_ioc[i]));
    // The main thread, the first I/O thread, keeps the process's name ("ichido").
    pool.push_back(named_thread("ichido-io-" + std::to_string(i + 1),
                                [&run_io, c = more_ioc[i].get()] { run_io(*c); }));
  }
  // Announced once every I/O thread is running: a supervisor or test that sees the line finds
  // the process complete.
  const std::string auth_note = std::string(cfg.tls_cert.empty() ? "" : " (TLS)") +
                                (cfg.no_auth ? " (no authentication)" : "");
  std::string shown_all;
  for (const auto& ep : endpoints) {
    const std::string shown =
        (ep.address().is_v6() ? "[" + ep.address().to_string() + "]" : ep.address().to_string()) +
        ":" + std::to_string(ep.port());
    std::printf("ichido listening on %s\n", shown.c_str());
    shown_all += (shown_all.empty() ? "" : " and ") + shown;
  }
  std::fflush(stdout);
  log("listening on " + shown_all + " with " + std::to_string(threads) + " I/O threads" +
      auth_note + "; counters default to " + cfg.default_timezone + " time");
  run_io(ioc);
  keep.clear();
  for (auto& c : more_ioc) c->stop();
  for (auto& t : pool) t.join();

  auth.stop();
  (*store)->watch_external_changes({});
  (*store)->close();
  log("stopped cleanly");
  return 0;
}

}  // namespace ichido::server
