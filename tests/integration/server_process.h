// ServerProcess: runs the real `ichido serve` binary for integration tests — port 0 (the kernel
// picks a free port), its own data directory, output captured to a log file. Tests stop it with
// SIGTERM (clean) or SIGKILL (crash) and start it again on the same data directory.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
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

class ServerProcess {
 public:
  // `data_dir`: the store's directory; the log goes to data_dir + ".log". Without `auth` the
  // server runs with --no-auth.
  explicit ServerProcess(std::string data_dir, std::vector<std::string> extra_args = {},
                         bool auth = false);
  ~ServerProcess();  // kills the server if it still runs

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
  std::vector<std::string> extra_args_;
  bool auth_ = false;
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
};

// The path of the ichido binary under test (compiled in by CMake).
const char* ichido_binary();

}  // namespace ichido::testing
