// The shape every `ichido` subcommand shares, so that a command group (counter, once, lock,
// token…) is one file that only declares its options and maps them to a request.
//
// Parsing and running are separate steps: parsing the command line yields a Plan (one HTTP call
// with a renderer, or a local action such as `serve`); running the plan talks to the server. The
// mapping from options to a Request is therefore testable without a server (see cli_test.cc).
//
// To add a command group: write `foo_cmd.h/.cc` with `void add_foo_commands(CommandTree&)`, call
// it from Cli's constructor (app.cc), and add the file to src/cli/CMakeLists.txt.
#pragma once

#include <boost/json/value.hpp>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

#include "cli/client.h"

namespace CLI {
class App;
}

namespace ichido::cli {

// Process exit codes of `ichido` (also listed in the `ichido --help` footer).
enum ExitCode : int {
  kExitOk = 0,
  kExitServerError = 1,  // the server answered with an error (4xx/5xx)
  kExitUsage = 2,        // the command line is wrong
  kExitUnreachable = 3,  // no answer: could not connect, timed out, connection lost
};

// Where output goes; tests pass string streams.
struct Output {
  std::ostream& out;
  std::ostream& err;
};

// Prints a successful (2xx) answer for humans. `body` is the parsed JSON answer (null when the
// body was empty or not JSON).
using Renderer =
    std::function<void(const HttpResponse& response, const boost::json::value& body, Output& o)>;

// One call to the server and how to show its answer.
struct HttpCall {
  Request request;
  Renderer render;
};

// What a parsed command line asks for: exactly one of `http` and `local` is set.
struct Plan {
  std::optional<HttpCall> http;
  std::function<int()> local;  // returns the exit code
};

// Options of every command that talks to the server. Defaults come from $ICHIDO_URL and
// $ICHIDO_NS. They are accepted both before the subcommand and after it.
struct ConnectionOptions {
  std::string url;
  std::string ns;
  bool json = false;  // print the server's JSON answer verbatim
};

ConnectionOptions default_connection_options();

// Handed to each command group while the command tree is built. Does not own the CLI11 objects.
class CommandTree {
 public:
  CommandTree(CLI::App& root, ConnectionOptions& connection, Plan& plan)
      : root_(root), connection_(connection), plan_(plan) {}

  CLI::App& root() { return root_; }

  // Connection options as parsed; read them only inside the functions passed below (they run
  // after parsing).
  const ConnectionOptions& connection() const { return connection_; }

  // A command that only groups others ("counter"): requires one of its subcommands.
  CLI::App* add_group(CLI::App& parent, std::string name, std::string description,
                      std::string example);

  // A leaf command that sends one request. `make_call` runs once parsing has succeeded.
  CLI::App* add_http_command(CLI::App& parent, std::string name, std::string description,
                             std::string example, std::function<HttpCall()> make_call);

  // A leaf command that runs locally (serve, token admin on a data dir).
  CLI::App* add_local_command(CLI::App& parent, std::string name, std::string description,
                              std::string example, std::function<int()> action);

  // Adds --url, --ns and --json to `app` (done for the root and every HTTP command).
  void add_connection_options(CLI::App& app);

 private:
  CLI::App& root_;
  ConnectionOptions& connection_;
  Plan& plan_;
};

// "/v1/ns/{ns}" with `ns` percent-encoded.
std::string ns_path(std::string_view ns);

// Sends a request and returns its answer; HttpClient::send in production, a fake in tests.
using Transport = std::function<HttpResult(const Request&)>;

// Runs `call` over `transport`, prints the outcome and returns the exit code:
//   2xx: --json prints the body verbatim on one line, otherwise call.render prints it;
//   4xx/5xx: "error: <code>: <message>" on stderr (and with --json the body on stdout);
//   no answer: "error: unreachable: <why>" on stderr.
int execute(const HttpCall& call, bool json, const Transport& transport, Output& o);

}  // namespace ichido::cli
