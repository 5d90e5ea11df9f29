// ServerControl: the real `ichido serve` process of a soak run, started, crashed (SIGKILL),
// frozen (SIGSTOP/SIGCONT), restarted and stopped by the cycle driver.
//
// Every start appends to one log file (a "=== start N" line first), so the whole run's server
// output survives the crashes. The first start listens on port 0 (the kernel picks a free port);
// restarts ask for the same port again so that clients that kept the old address find the
// server, and fall back to port 0 when another process took the port meanwhile. The current
// port is published through `port()` (an atomic) for the client threads.
//
// Thread-safety: start/kill9/stop/sigstop/sigcont are called by the cycle driver thread only;
// port() and pid() may be read from any thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ichido::soak {

// The outcome of running `ichido serve` (or any ichido subcommand) that is expected to exit, or
// to reach its listening line, within a bound.
struct ProcessOutcome {
  bool listening = false;  // printed "ichido listening on" (then it was killed by us)
  bool exited = false;     // exited by itself
  int exit_code = -1;      // when exited normally
  int signal = 0;          // when killed by a signal we did not send
  std::string output;      // stdout + stderr
};

// Runs `args` (argv[0] = the ichido binary) with stdout+stderr captured. Returns when the process
// exits or prints its listening line (the process is then SIGKILLed, and `listening` is true), or
// after `timeout` (then it is SIGKILLed and neither flag is set).
ProcessOutcome run_bounded(const std::vector<std::string>& args, std::chrono::milliseconds timeout);

class ServerControl {
 public:
  // `extra_args` are appended to `ichido serve --listen 127.0.0.1:PORT --data DIR`.
  ServerControl(std::string binary, std::string data_dir, std::string log_path,
                std::vector<std::string> extra_args);
  ~ServerControl();  // SIGKILLs a server that still runs
  ServerControl(const ServerControl&) = delete;
  ServerControl& operator=(const ServerControl&) = delete;

  // Starts the server and waits (at most `timeout`) for its listening line. Returns false with
  // `error` (including the tail of this start's log) when it exited or never became ready.
  bool start(std::string* error, std::chrono::milliseconds timeout = std::chrono::seconds(30));
  void kill9();    // SIGKILL and reap: a crash at an arbitrary point
  int stop();      // SIGTERM and reap; the exit code, or -1 after a signal/when not running
  void sigstop();  // freeze the process (it keeps its sockets; the kernel queues connections)
  void sigcont();  // and let it run again
  bool running() const { return pid_.load() > 0; }
  // Reaps the server if it exited by itself: true when it is still running. `how` says how it
  // ended otherwise ("code N" / "signal N").
  bool alive(std::string* how = nullptr);
  // Starts the server and SIGKILLs it `delay` later, whether or not it is ready by then: a
  // crash during start-up (recovery, checks, the first admin token).
  void start_then_kill(std::chrono::milliseconds delay);

  std::uint16_t port() const { return port_.load(); }
  pid_t pid() const { return pid_.load(); }
  int starts() const { return starts_; }
  const std::string& data_dir() const { return data_dir_; }
  // The text this start appended to the log so far.
  std::string log_since_start() const;

 private:
  bool start_on(std::uint16_t port, std::string* error, std::chrono::milliseconds timeout);
  pid_t launch(std::uint16_t port);  // fork/exec with output appended to the log; -1 on failure

  const std::string binary_;
  const std::string data_dir_;
  const std::string log_path_;
  const std::vector<std::string> extra_args_;
  std::atomic<pid_t> pid_{-1};
  std::atomic<std::uint16_t> port_{0};
  int starts_ = 0;            // driver thread only
  long long log_offset_ = 0;  // driver thread only: where this start's output begins
};

// The nodes a run's clients talk to: one, or several on one PostgreSQL store (index 0 first).
using Nodes = std::vector<const ServerControl*>;

}  // namespace ichido::soak
