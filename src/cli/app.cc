#include "cli/app.h"

#include <exception>
#include <iostream>
#include <string>
#include <utility>

#include "cli/counter_cmd.h"
#include "cli/lock_cmd.h"
#include "cli/once_cmd.h"
#include "cli/output.h"
#include "cli/token_cmd.h"

#ifndef ICHIDO_VERSION
#define ICHIDO_VERSION "dev"
#endif

namespace ichido::cli {
namespace {

constexpr const char* kRootFooter = R"(
Environment:
  ICHIDO_URL    server URL used when --url is not given (else http://127.0.0.1:7878)
  ICHIDO_NS     namespace used when --ns is not given (else default)
  ICHIDO_TOKEN  token sent as "Authorization: Bearer ..." on every request

Exit codes:
  0  success
  1  the server answered with an error (4xx/5xx); "error: <code>: <message>" on stderr
  2  usage error: the command line is wrong
  3  the server could not be reached (connect failed, timed out, connection lost)

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
      tree_(app_, connection_, plan_) {
  app_.require_subcommand(1);
  app_.set_version_flag("--version", std::string("ichido ") + ICHIDO_VERSION);
  app_.footer(kRootFooter);
  tree_.add_connection_options(app_);
  // One call per command group.
  add_serve_command(tree_, std::move(deps.serve));
  add_counter_commands(tree_);
  add_once_commands(tree_);
  add_lock_commands(tree_);
  add_token_commands(tree_);
}

std::optional<int> Cli::parse(int argc, const char* const* argv, Output& o) {
  try {
    app_.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
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
  if (transport) return execute(*plan_.http, connection_.json, transport, o);
  BaseUrlResult url = parse_base_url(connection_.url);
  if (!url.ok()) {  // only $ICHIDO_URL can get here: --url is checked while parsing
    print_error("invalid_url", url.error, o.err);
    return kExitUsage;
  }
  HttpClient client(std::move(*url.url));
  return execute(
      *plan_.http, connection_.json, [&client](const Request& r) { return client.send(r); }, o);
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
