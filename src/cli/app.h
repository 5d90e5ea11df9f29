// Cli: the whole `ichido` command line. Construction builds the command tree (one call per
// command group); parse() turns argv into a Plan; run() carries it out.
//
// Lifecycle: construct, parse once, run at most once. Not thread-safe (one per process or test).
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <functional>
#include <optional>
#include <vector>

#include "cli/command.h"
#include "cli/serve_cmd.h"

namespace ichido::cli {

// What the command line needs from outside the CLI library.
struct CliDeps {
  ServeFunction serve;  // server::run_server in the real binary
  // Waits between retries of a call (retry.h); null: really sleep. Tests record the delays.
  std::function<void(std::chrono::milliseconds)> sleep;
};

class Cli {
 public:
  explicit Cli(CliDeps deps);
  Cli(const Cli&) = delete;
  Cli& operator=(const Cli&) = delete;

  // Parses the command line. Returns the exit code when the process should stop already (help
  // was printed: 0; usage error was printed: kExitUsage), nullopt when plan() is ready to run.
  std::optional<int> parse(int argc, const char* const* argv, Output& o);
  std::optional<int> parse(const std::vector<std::string>& args, Output& o);  // args[0] = "ichido"

  const Plan& plan() const { return plan_; }
  const ConnectionOptions& connection() const { return connection_; }

  // Runs the parsed plan: sends its request through `transport` (a fresh HttpClient for the
  // --url when null) or runs its local action. Returns the exit code.
  int run(Output& o, const Transport& transport = nullptr);

 private:
  CLI::App app_;
  ConnectionOptions connection_;
  Plan plan_;
  CommandTree tree_;
  std::function<void(std::chrono::milliseconds)> sleep_;
};

// The whole program: parse argv, run, return the exit code. main() is a call to this.
int run_main(int argc, const char* const* argv, CliDeps deps);

}  // namespace ichido::cli
