// RequestLog: one line per answered request — when, from where, method, route pattern (never the
// query string: keys may be personal data), namespace, status, duration and the token id (never
// the secret) — as text or as JSON (one object per line), on a file descriptor (stderr).
//
// Cost on the request path: the line is formatted by the calling thread, then appended to an
// in-memory buffer under a mutex held only for that append (no wake-up, no system call); a
// writer thread of its own comes by every kFlushInterval, swaps the buffer out and does the
// write(2) with no lock held, so a slow terminal, pipe or journald never blocks a request, and a
// busy server writes its log in a few large writes a second instead of one per request. When the
// buffer holds more than `max_buffer_bytes` (the writer cannot keep up), new lines are dropped and
// counted (ichido_request_log_dropped_total) rather than growing memory or slowing answers.
//
// Lifecycle: constructed before serving, stop() (or the destructor) writes what is buffered and
// joins the writer. Thread-safety: write() and dropped() from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>

#include "base/mutex.h"
#include "ichido/clock.h"

namespace ichido::http {

enum class LogFormat { text, json };

class RequestLog {
 public:
  struct Entry {
    TimeMs at = 0;
    std::string_view remote;
    std::string_view method;
    std::string_view route;  // the pattern ("/v1/ns/{ns}/once/begin"), or the path if none matched
    std::string_view ns;
    unsigned status = 0;
    std::int64_t duration_us = 0;
    std::string_view token_id;  // "" when no token was presented or valid
  };

  static constexpr std::chrono::milliseconds kFlushInterval{50};

  RequestLog(int fd, LogFormat format, std::size_t max_buffer_bytes = 4 << 20);
  ~RequestLog();
  RequestLog(const RequestLog&) = delete;
  RequestLog& operator=(const RequestLog&) = delete;

  void write(const Entry& e);
  void stop();
  std::uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

  // The line write() appends for `e` (with its newline); exposed for tests.
  static std::string format(const Entry& e, LogFormat f);

 private:
  // format() into `line` (cleared first; its capacity kept for the next line).
  static void format_into(std::string& line, const Entry& e, LogFormat f);
  void run();

  const int fd_;
  const LogFormat format_;
  const std::size_t max_buffer_;
  Mutex mu_;
  CondVar cv_;
  std::string buffer_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::atomic<std::uint64_t> dropped_{0};
  std::thread writer_;  // started last, in the constructor
};

}  // namespace ichido::http
