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
  // `once begin`: the item was completed already (the stored result is on stdout). Not 0, so that
  // `token=$(ichido once begin K) && work` never does the work twice.
  kExitCompleted = 10,
  kExitDead = 65,            // `once begin`/`once run`: the item failed too often (EX_DATAERR)
  kExitTempFail = 75,        // not acquired within the wait / in progress elsewhere (EX_TEMPFAIL)
  kExitLockLost = 76,        // `lock run`: the lease was lost while the command ran
  kExitCannotExecute = 126,  // `run`: the command was found but cannot be executed
  kExitNotFound = 127,       // `run`: the command was not found
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

// The exit code a 2xx answer stands for (e.g. `lock acquire` answered acquired:false: 75).
using ExitCodeOf = std::function<int(const boost::json::value& body)>;

// The command line's words for an error the server answered: returns a sentence that replaces the
// server's message (which speaks of JSON fields), or "" to keep it. `details` is the error's
// details object (null when absent).
using Explainer =
    std::function<std::string(std::string_view code, const boost::json::value& details)>;

// One call to the server and how to show its answer.
struct HttpCall {
  Request request;
  Renderer render;
  ExitCodeOf exit_code;  // null: every 2xx answer is kExitOk
  Explainer explain;     // null: the server's message as it is
  // Safe to send again when no answer came (see retry.h): GETs, keyed `next`, `complete`,
  // `renew`, and `acquire`/`begin` carrying a request_id.
  bool retry = false;
  // Changes the request before a retry (null: resend it as it is); see retry.h's Adjust.
  std::function<void(Request&, std::chrono::milliseconds elapsed)> adjust;
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
  std::string cacert;  // https: trust these CAs instead of the system's ($ICHIDO_CACERT)
  bool json = false;   // print the server's JSON answer verbatim
};

ConnectionOptions default_connection_options();

// The HttpClient options these connection options ask for (the CA file).
ClientOptions client_options(const ConnectionOptions& c);

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

  // Adds --url, --ns, --cacert and --json to `app` (done for the root and every HTTP command).
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

// Runs `call` over `transport` (retrying it by retry.h's rules when call.retry), prints the
// outcome and returns the exit code:
//   2xx: --json prints the body verbatim on one line, otherwise call.render prints it; the exit
//        code is call.exit_code's (kExitOk without one);
//   4xx/5xx: "error: <code>: <message>" on stderr (and with --json the body on stdout);
//   no answer: "error: unreachable: <why>" on stderr.
int execute(const HttpCall& call, bool json, const Transport& transport, Output& o,
            const std::function<void(std::chrono::milliseconds)>& sleep = nullptr);

// "'text'" quoted for a POSIX shell when it holds anything but [A-Za-z0-9._/:@%+=,-] ("" too),
// else the text: for the commands a hint tells the user to run.
std::string shell_quote(std::string_view text);

// " --ns NS" (shell-quoted) for hints: the namespace the command used, so that the suggested
// command acts on the same records.
std::string ns_hint(std::string_view ns);

}  // namespace ichido::cli
