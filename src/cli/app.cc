#include "cli/app.h"

#include <sqlite3.h>

#include <exception>
#include <iostream>
#include <string>
#include <utility>

#include "cli/counter_cmd.h"
#include "cli/lock_cmd.h"
#include "cli/once_cmd.h"
#include "cli/output.h"
#include "cli/store_cmd.h"
#include "cli/token_cmd.h"

#ifndef ICHIDO_VERSION
#define ICHIDO_VERSION "dev"
#endif

namespace ichido::cli {
namespace {

constexpr const char* kRootFooter = R"(
Environment:
  ICHIDO_URL     server URL used when --url is not given (else http://127.0.0.1:7878);
                 https://... verifies the server's certificate against the system's CAs
  ICHIDO_CACERT  a PEM file of CAs to trust instead (when --cacert is not given)
  ICHIDO_NS      namespace used when --ns is not given (else default)
  ICHIDO_TOKEN   token sent as "Authorization: Bearer ..." on every request

Exit codes:
  0    success (acquired, issued, done)
  1    the server answered with an error (4xx/5xx); "error: <code>: <message>" on stderr
  2    usage error: the command line is wrong
  3    the server could not be reached (connect failed, timed out, connection lost)
  10   once begin: already completed (its stored result on stdout)
  65   once begin, once run: dead (failed too often; an admin must reset it)
  75   lock acquire, lock run: not acquired within --wait;
       once begin, once run: in progress elsewhere (try again later)
  76   lock run: the lease was lost while the command ran (it was stopped)
  126  lock run, once run: the command is not executable (nothing was claimed)
  127  lock run, once run: the command was not found (nothing was claimed)
  lock run and once run otherwise exit with the command's own code.
  Without an answer, or on 503/429, calls that are safe to repeat are retried a few times
  (acquire and begin with the same request_id).

Examples:
  ichido serve --listen 127.0.0.1:7878 --data ./ichido-data --no-auth
  ichido counter create receipts --format 'R-{seq:4}' --max 9999
  ichido counter next receipts --key form-123
  ichido counter get receipts --json
  ichido once run nightly-2026-04-01 --lease 60s -- ./nightly.sh
  ichido token create --data ./ichido-data --ns shop --role writer

Run "ichido COMMAND --help" (e.g. "ichido counter next --help") for a command's options.
)";

}  // namespace

Cli::Cli(CliDeps deps)
    : app_(
          "ichido: durable locks, counters and once-records for business automations.\n"
          "Runs the server (serve) or calls a running one over HTTP.",
          "ichido"),
      connection_(default_connection_options()),
      tree_(app_, connection_, plan_),
      sleep_(std::move(deps.sleep)) {
  app_.require_subcommand(1);
  // The SQLite built into the embedded store (third_party/sqlite, decision 138), for bug reports.
  app_.set_version_flag("--version", std::string("ichido ") + ICHIDO_VERSION + " (SQLite " +
                                         sqlite3_libversion() + ")");
  app_.footer(kRootFooter);
  tree_.add_connection_options(app_);
  // One call per command group.
  add_serve_command(tree_, std::move(deps.serve));
  add_counter_commands(tree_);
  add_once_commands(tree_);
  add_lock_commands(tree_);
  add_token_commands(tree_);
  add_store_commands(tree_);
}

namespace {

// When the command line stopped at a command group ("ichido lock", "ichido lock frob"): the
// group's path, its subcommands' names and the first word after it that is not an option ("" when
// none). nullopt when a leaf command was reached.
struct GroupStop {
  std::string path, names, word;
};
std::optional<GroupStop> stopped_at_group(CLI::App& root) {
  CLI::App* cur = &root;
  GroupStop out{root.get_name(), {}, {}};
  for (std::vector<CLI::App*> chosen = cur->get_subcommands(); !chosen.empty();
       chosen = cur->get_subcommands()) {
    cur = chosen.front();
    out.path += " " + cur->get_name();
  }
  const std::vector<CLI::App*> subs = cur->get_subcommands({});
  if (subs.empty()) return std::nullopt;
  for (const CLI::App* sub : subs) out.names += (out.names.empty() ? "" : ", ") + sub->get_name();
  for (const std::string& word : cur->remaining()) {
    if (!word.empty() && word.front() != '-') {
      out.word = word;
      break;
    }
  }
  return out;
}

}  // namespace

std::optional<int> Cli::parse(int argc, const char* const* argv, Output& o) {
  try {
    app_.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) {
      if (std::optional<GroupStop> stop = stopped_at_group(app_);
          stop && (!stop->word.empty() || dynamic_cast<const CLI::RequiredError*>(&e))) {
        print_error(
            "usage",
            (stop->word.empty() ? "'" + stop->path + "' needs a command"
                                : "'" + stop->word + "' is not a command of '" + stop->path + "'") +
                " (" + stop->names + "); see " + stop->path + " --help",
            o.err);
        return kExitUsage;
      }
    }
    const int code = app_.exit(e, o.out, o.err);
    return code == 0 ? kExitOk : kExitUsage;
  }
  if (!plan_.http && !plan_.local) {  // a group without its subcommand is rejected by CLI11
    print_error("usage", "no command given; see ichido --help", o.err);
    return kExitUsage;
  }
  return std::nullopt;
}

std::optional<int> Cli::parse(const std::vector<std::string>& args, Output& o) {
  std::vector<const char*> argv;
  argv.reserve(args.size());
  for (const std::string& a : args) argv.push_back(a.c_str());
  return parse(static_cast<int>(argv.size()), argv.data(), o);
}

int Cli::run(Output& o, const Transport& transport) {
  if (plan_.local) return plan_.local();
  if (!plan_.http) return kExitUsage;
  if (transport) return execute(*plan_.http, connection_.json, transport, o, sleep_);
  BaseUrlResult url = parse_base_url(connection_.url);
  if (!url.ok()) {  // only $ICHIDO_URL can get here: --url is checked while parsing
    print_error("invalid_url", url.error, o.err);
    return kExitUsage;
  }
  HttpClient client(std::move(*url.url), client_options(connection_));
  return execute(
      *plan_.http, connection_.json, [&client](const Request& r) { return client.send(r); }, o,
      sleep_);
}

int run_main(int argc, const char* const* argv, CliDeps deps) {
  Output o{std::cout, std::cerr};
  try {
    Cli cli(std::move(deps));
    if (std::optional<int> done = cli.parse(argc, argv, o)) return *done;
    return cli.run(o);
  } catch (const std::exception& e) {
    print_error("internal", e.what(), o.err);
    return kExitServerError;
  }
}

}  // namespace ichido::cli
