#include "cli/serve_cmd.h"

#include <CLI/CLI.hpp>
#include <memory>
#include <utility>

#include "cli/duration.h"
#include "cli/serve_config.h"
#include "core/counter.h"
#include "core/origin.h"

namespace ichido::cli {

void add_serve_command(CommandTree& tree, ServeFunction serve) {
  auto cfg = std::make_shared<server::ServeConfig>();
  CLI::App* cmd = tree.add_local_command(
      tree.root(), "serve",
      "Run the ichido server in the foreground until SIGINT/SIGTERM (then drain and exit); SIGHUP "
      "reloads the TLS certificate",
      "ichido serve --listen 127.0.0.1:7878 --data ./ichido-data --no-auth",
      [cfg, serve = std::move(serve)] { return serve(*cfg); });
  auto config_file = std::make_shared<std::string>();
  cmd->add_option("--config", *config_file,
                  "Read settings from this file (key = value, keys are these flags without "
                  "dashes; flags given here win; see README, Operations)");
  cmd->parse_complete_callback([cmd, config_file] {
    if (!config_file->empty()) apply_config_file(*cmd, *config_file);
  });
  cmd->add_option("--listen", cfg->listen,
                  "HOST:PORT to listen on; localhost listens on 127.0.0.1 and ::1; port 0 picks "
                  "a free port")
      ->capture_default_str();
  cmd->add_option("--data", cfg->data_dir,
                  "Directory of the embedded store (created if missing); with --store it only "
                  "holds this node's files (the first admin token)")
      ->capture_default_str();
  cmd->add_option("--store", cfg->store_url,
                  "PostgreSQL instead of the embedded store, shared by any number of nodes: a "
                  "libpq URI or conninfo, e.g. postgres://ichido@db1:5432/ichido or "
                  "'host=db1,db2 dbname=ichido target_session_attrs=read-write' (password: "
                  "PGPASSWORD or ~/.pgpass rather than the URI; env ICHIDO_STORE)")
      ->envname("ICHIDO_STORE");
  cmd->add_option("--store-schema", cfg->store_schema,
                  "PostgreSQL schema holding ichido's tables (created on first start)")
      ->capture_default_str();
  cmd->add_option("--store-connections", cfg->store_connections,
                  "PostgreSQL write connections of this node (batches on different keys commit "
                  "in parallel)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--listen-store", cfg->listen_store_url,
                  "With --store: the URL of the connection that LISTENs for other nodes' changes "
                  "(default: --store). Give the database itself when --store is a PgBouncer in "
                  "transaction mode, which cannot carry LISTEN (env ICHIDO_LISTEN_STORE)")
      ->envname("ICHIDO_LISTEN_STORE");
  cmd->add_option_function<std::string>(
      "--store-timeout",
      [cfg](const std::string& text) {
        auto ms = parse_duration_ms(text);
        if (!ms || *ms < 1000 || *ms > 600000) {
          throw CLI::ValidationError("--store-timeout",
                                     "'" + text + "' is not a duration from 1s to 10m like 5s");
        }
        cfg->store_timeout_ms = *ms;
      },
      "With --store: the longest a request waits for PostgreSQL (default 5s); then it answers "
      "503 store_unavailable (details.outcome \"unknown\" when its commit may have happened: "
      "retry with the same key). A node whose database stops answering also reports /readyz 503 "
      "within about 3 s, and is ready again a moment after the database answers");
  cmd->add_flag("--store-no-prepare", cfg->store_no_prepare,
                "Send PostgreSQL statements unnamed instead of preparing them once per "
                "connection: needed behind PgBouncer older than 1.21 in transaction pooling mode");
  cmd->add_flag("--init", cfg->init,
                "Start a new, empty store in --data although its database was lost (it held a "
                "store: ichido.id is there). Counters and records start over; fencing tokens "
                "continue above the old ones. Without it, ichido refuses to start from zero. "
                "With --store: this node forgets the store it served (--data DIR/store.id) and "
                "serves what the database holds, creating a new store when it is empty");
  cmd->add_option_function<std::string>(
      "--min-free-disk",
      [cfg](const std::string& text) {
        auto bytes = parse_size_bytes(text);
        if (!bytes) {
          throw CLI::ValidationError("--min-free-disk",
                                     "'" + text + "' is not a size like 64MiB, 1GB or 0");
        }
        cfg->min_free_disk = *bytes;
      },
      "/readyz reports not ready while the data directory's disk has less free space than "
      "this (default 0: never; writes fail cleanly with 503 when the disk is full anyway). Not "
      "with --store: PostgreSQL's disk is the database server's to watch");
  cmd->footer(cmd->get_footer() +
              "\n\nExit codes of serve: 0 stopped cleanly; 1 the store could not be opened (the "
              "log says why; may pass); 2 bad flags or configuration; 3 cannot listen on the "
              "address; 4 the data needs an operator (a lost or damaged database, a newer "
              "schema) - do not restart automatically.");
  cmd->add_flag("--no-auth", cfg->no_auth,
                "Accept requests without a token (allowed only when listening on loopback)");
  cmd->add_option(
      "--tls-cert", cfg->tls_cert,
      "PEM certificate chain: serve HTTPS (TLS 1.2+) instead of HTTP (needs --tls-key). SIGHUP "
      "reads it and the key again (after a renewal); a replacement that does not load is "
      "logged and the current one kept");
  cmd->add_option("--tls-key", cfg->tls_key, "PEM private key of --tls-cert");
  cmd->add_flag("--metrics-open", cfg->metrics_open,
                "Serve /metrics without a token (otherwise it needs a reader token)");
  cmd->add_option("--threads", cfg->threads, "I/O threads; 0 = number of cores")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--max-body", cfg->max_body_bytes,
                  "Largest request body in bytes (larger: 413 body_too_large)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--max-header", cfg->max_header_bytes, "Largest request header block in bytes")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--read-timeout-ms", cfg->read_timeout_ms,
                  "A request must arrive whole within this many ms")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--idle-timeout-ms", cfg->idle_timeout_ms,
                  "Keep-alive connections idle longer than this are closed")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--drain-timeout-ms", cfg->drain_timeout_ms,
                  "On SIGTERM/SIGINT, in-flight requests get this long to finish")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option_function<std::string>(
      "--once-retention",
      [cfg](const std::string& text) {
        auto ms = parse_duration_ms(text);
        if (!ms || *ms < 1000) {
          throw CLI::ValidationError("--once-retention",
                                     "'" + text + "' is not a duration of at least 1s like 30d");
        }
        cfg->once_retention_ms = *ms;
      },
      "Completed and dead once records older than this are purged (default 30d), unless their "
      "namespace sets its own (PUT /v1/ns/{ns}/settings)");
  cmd->add_option_function<std::string>(
         "--default-timezone",
         [cfg](const std::string& zone) {
           auto known = core::local_date(zone, 0);
           if (!known.ok()) throw CLI::ValidationError("--default-timezone", known.error().message);
           cfg->default_timezone = zone;
         },
         "Time zone (IANA name, e.g. Asia/Tokyo) of a counter created without \"timezone\": "
         "its year, month, day and fiscal-year periods roll over at midnight there (default "
         "UTC). A counter keeps the zone it was created with")
      ->type_name("ZONE");
  cmd->add_option_function<std::string>(
         "--request-log", [cfg](const std::string& v) { cfg->request_log = v == "on"; },
         "One line per request on stderr: method, route, namespace, status, duration, token id "
         "(on|off; default on)")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--log-format", cfg->log_format,
                  "Format of the request log and the server's messages: text or json (one JSON "
                  "object per line)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmd->add_option_function<std::vector<std::string>>(
         "--cors-origin",
         [cfg](const std::vector<std::string>& values) {
           cfg->cors_origins.clear();  // all values each time: the callback may run again
           for (std::string_view text : values) {
             while (!text.empty() && (text.front() == ' ' || text.front() == '\t'))
               text.remove_prefix(1);
             while (!text.empty() && (text.back() == ' ' || text.back() == '\t'))
               text.remove_suffix(1);
             if (text.empty()) continue;  // "a,b," or a blank entry
             auto origin = core::parse_origin_pattern(text);
             if (!origin.ok()) throw CLI::ValidationError("--cors-origin", origin.error().message);
             cfg->cors_origins.push_back(std::move(*origin));
           }
         },
         "Let web pages from this origin call the API from a browser (CORS), e.g. "
         "https://intranet.example.com or https://*.example.com (its subdomains); repeat it or "
         "separate origins with ',' for several. Preflights (OPTIONS) from it are answered "
         "without a token; answers to it carry Access-Control-Allow-Origin. Default: none "
         "(CORS off). '*' is refused: name each origin")
      ->delimiter(',')
      ->type_name("ORIGIN");
  cmd->add_option("--max-connections", cfg->max_connections, "Connections beyond this are refused")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--max-waiters-per-lock", cfg->max_waiters_per_lock,
                  "Requests waiting for one lock at most (more: 429 too_many_waiters)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--max-waiters", cfg->max_waiters,
                  "Requests waiting for any lock at most (more: 429 too_many_waiters)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  // Every setting can also come from the environment (a container's usual way): ICHIDO_ and
  // the flag's name in capitals, '-' as '_' (ICHIDO_LISTEN, ICHIDO_TLS_CERT, ICHIDO_CONFIG).
  // A flag on the command line wins, then the environment, then --config. Not --init: it is one
  // start's decision, and a variable would repeat it at every start (decision 174).
  for (CLI::Option* opt : cmd->get_options()) {
    const std::string name = opt->get_single_name();
    if (name.empty() || name == "help" || name == "init" || !opt->get_envname().empty()) continue;
    std::string env = "ICHIDO_";
    for (const char c : name) {
      env += c == '-' ? '_' : static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
    }
    opt->envname(env);
  }
}

}  // namespace ichido::cli
