#include "http/request_log.h"

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "base/thread_name.h"
#include "http/json_writer.h"

namespace ichido::http {
namespace {

bool splits_a_field(unsigned char c) { return c <= 0x20 || c == 0x7f; }

// True when some byte of `s` is a control character, a space or DEL. Eight bytes at a time
// (every request's line goes through here): a byte below 0x21 sets its top bit in
// (x - 0x21…) & ~x, a byte 0x7f is a zero byte of x ^ 0x7f…; either test is exact for "some
// byte" (a borrow starts only at a byte that itself qualifies).
bool has_splitting_byte(std::string_view s) {
  constexpr std::uint64_t kOnes = 0x0101010101010101u;
  constexpr std::uint64_t kHighs = 0x8080808080808080u;
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t x;
    std::memcpy(&x, s.data() + i, 8);
    const std::uint64_t del = x ^ (0x7f * kOnes);
    if ((((x - 0x21 * kOnes) & ~x) | ((del - kOnes) & ~del)) & kHighs) return true;
  }
  for (; i < s.size(); ++i) {
    if (splits_a_field(static_cast<unsigned char>(s[i]))) return true;
  }
  return false;
}

// Text fields are single tokens: anything that could split a line or a field is replaced.
void append_text_field(std::string& out, std::string_view s) {
  if (s.empty()) {
    out += '-';
    return;
  }
  const std::size_t from = out.size();
  out.append(s);
  if (!has_splitting_byte(s)) return;
  for (std::size_t i = from; i < out.size(); ++i) {
    if (splits_a_field(static_cast<unsigned char>(out[i]))) out[i] = '_';
  }
}

}  // namespace

RequestLog::RequestLog(int fd, LogFormat format, std::size_t max_buffer_bytes)
    : fd_(fd), format_(format), max_buffer_(max_buffer_bytes) {
  writer_ = named_thread("ichido-log", [this] { run(); });
}

RequestLog::~RequestLog() { stop(); }

std::string RequestLog::format(const Entry& e, LogFormat f) {
  std::string line;
  format_into(line, e, f);
  return line;
}

void RequestLog::format_into(std::string& line, const Entry& e, LogFormat f) {
  char at[kRfc3339Max];
  line.clear();
  line.reserve(160 + e.route.size());
  // Milliseconds with three decimals, and the status, without printf or temporary strings
  // (both showed in the profile of `next`).
  const std::uint64_t us = e.duration_us > 0 ? static_cast<std::uint64_t>(e.duration_us) : 0;
  auto append_ms = [&] {
    append_integer(line, us / 1000);
    const auto frac = static_cast<unsigned>(us % 1000);
    const char three[4] = {'.', static_cast<char>('0' + frac / 100),
                           static_cast<char>('0' + frac / 10 % 10),
                           static_cast<char>('0' + frac % 10)};
    line.append(three, sizeof three);
  };
  if (f == LogFormat::json) {
    line += "{\"at\":";
    append_json_string(line, format_rfc3339(e.at, at));
    line += ",\"remote\":";
    append_json_string(line, e.remote);
    line += ",\"method\":";
    append_json_string(line, e.method);
    line += ",\"route\":";
    append_json_string(line, e.route);
    line += ",\"ns\":";
    append_json_string(line, e.ns);
    line += ",\"status\":";
    append_integer(line, e.status);
    line += ",\"duration_ms\":";
    append_ms();
    line += ",\"token\":";
    append_json_string(line, e.token_id);
    line += "}\n";
  } else {
    line += format_rfc3339(e.at, at);
    line += ' ';
    append_text_field(line, e.remote);
    line += ' ';
    append_text_field(line, e.method);
    line += ' ';
    append_text_field(line, e.route);
    line += " ns=";
    append_text_field(line, e.ns);
    line += ' ';
    append_integer(line, e.status);
    line += ' ';
    append_ms();
    line += "ms token=";
    append_text_field(line, e.token_id);
    line += '\n';
  }
}

void RequestLog::write(const Entry& e) {
  // Formatted into this thread's reused string (no allocation per request), then copied into
  // the shared buffer under the lock.
  thread_local std::string line;
  format_into(line, e, format_);
  MutexLock lk(mu_);
  if (stopping_ || buffer_.size() + line.size() > max_buffer_) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  buffer_ += line;  // no wake-up: the writer comes by every kFlushInterval
}

void RequestLog::run() {
  std::string out;
  for (;;) {
    {
      MutexLock lk(mu_);
      if (!stopping_) cv_.wait_until(mu_, std::chrono::steady_clock::now() + kFlushInterval);
      if (buffer_.empty()) {
        if (stopping_) return;
        continue;
      }
      out.swap(buffer_);  // buffer_ gets the (cleared) old capacity back
    }
    std::size_t off = 0;
    while (off < out.size()) {
      const ssize_t n = ::write(fd_, out.data() + off, out.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // nowhere to log to (closed stderr): drop, never block requests
      off += static_cast<std::size_t>(n);
    }
    out.clear();
  }
}

void RequestLog::stop() {
  {
    MutexLock lk(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (writer_.joinable()) writer_.join();
}

}  // namespace ichido::http
