// History: the soak run's record of every request and every answer (or the lack of one), and of
// every fault the driver injected, as JSON lines. The history checker
// (tests/soak/check_history.py) reads it; its format is described there.
//
// One line per attempt (one HTTP request on the wire):
//   {"i":17,"c":3,"lid":9,"op":"counter.next","a":{...args...},"t0":123,"t1":456,
//    "st":200,"b":"<answer body>"}                    an answer (any status)
//   {... "st":0,"err":"connection refused"}           no answer: the outcome is unknown
// One line per driver event:
//   {"ev":"kill","t":789,...}
// Times are microseconds on the driver's steady clock since the run began: they order the
// driver's own observations (sent before / answered before) and are never compared with the
// server's timestamps.
//
// Thread-safety: every method may be called from any thread (one mutex around the file).
#pragma once

#include <atomic>
#include <boost/json.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "base/mutex.h"

namespace ichido::soak {

class History {
 public:
  // Creates (truncates) `path`. nullptr with `error` set when it cannot.
  static std::unique_ptr<History> open(const std::string& path, std::string* error);
  ~History();

  // Microseconds since the run began (steady clock).
  std::int64_t now_us() const;
  // A fresh id for a record (attempt lines) or a logical operation (its retries share it).
  std::int64_t next_id() { return ids_.fetch_add(1) + 1; }

  void append(const boost::json::object& line);
  void event(std::string_view name, boost::json::object fields = {});
  void flush();

 private:
  History(std::FILE* f, std::chrono::steady_clock::time_point t0) : f_(f), t0_(t0) {}

  Mutex mu_;
  std::FILE* f_ GUARDED_BY(mu_);
  const std::chrono::steady_clock::time_point t0_;  // constant after construction
  std::atomic<std::int64_t> ids_{0};
};

}  // namespace ichido::soak
