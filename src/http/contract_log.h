// ContractLog: a test hook that appends every answer the server sends (method, target, matched
// route pattern, status, headers, body) as one JSON line to DIR/exchanges-PID.jsonl, where DIR is
// the environment variable ICHIDO_CONTRACT_LOG. CTest sets it for the tests that talk to a live
// server; tests/openapi/check.mjs then validates every recorded answer against docs/openapi.yaml
// (docs/decisions/110-contract-testing.md). Unset (the default, and in production): nothing is
// opened and record() is never called.
//
// Bodies of JSON and text answers are kept (cut at 1 MiB, with "body_truncated": true); of other
// content types only their size. A line is written with one write(2) on an O_APPEND file, so
// several servers may share a directory. Write errors are ignored (the checker then misses
// answers; it never sees half a line from a failed write of ours because a line is one write).
// Thread-safety: record() may be called from any thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/mutex.h"
#include "http/answer.h"

namespace ichido::http {

class ContractLog {
 public:
  // The log named by ICHIDO_CONTRACT_LOG, or nullptr when it is unset or empty, or when the file
  // cannot be opened (then a line on stderr says why).
  static std::unique_ptr<ContractLog> from_environment();
  ~ContractLog();

  // `route` is the matched pattern ("" when none matched; then the checker matches `target`).
  void record(std::string_view method, std::string_view target, std::string_view route,
              const Answer& res);

 private:
  explicit ContractLog(int fd) : fd_(fd) {}
  const int fd_;
  Mutex mu_;  // one line at a time (the fd is O_APPEND; this keeps lines whole within a process)
};

}  // namespace ichido::http
