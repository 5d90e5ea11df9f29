// Clock: the wall-clock time source of the rulebook and the stores.
//
// Core rules never read the time themselves: the store reads its clock once per command and passes
// `now` in. Tests inject ManualClock and move time by hand instead of sleeping. Intervals the
// service waits for (wait_ms, lease timers) use Asio's steady timers, not this clock.
// Thread-safety: implementations must be safe to call from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ichido {

// Milliseconds since the Unix epoch, UTC.
using TimeMs = std::int64_t;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimeMs now_ms() const = 0;
};

class SystemClock final : public Clock {
 public:
  TimeMs now_ms() const override;
  // A process-wide instance (stateless, so sharing it is safe).
  static SystemClock& instance();
};

class ManualClock final : public Clock {
 public:
  explicit ManualClock(TimeMs start) : now_(start) {}
  TimeMs now_ms() const override { return now_.load(); }
  void set(TimeMs t) { now_.store(t); }
  void advance(TimeMs d) { now_.fetch_add(d); }

 private:
  std::atomic<TimeMs> now_;
};

// RFC 3339 UTC with milliseconds: "2026-04-01T09:30:00.123Z".
std::string format_rfc3339(TimeMs t);

// The same text written into `buf` (no heap allocation), returned as a view of it.
inline constexpr std::size_t kRfc3339Max = 40;
std::string_view format_rfc3339(TimeMs t, char (&buf)[kRfc3339Max]);

}  // namespace ichido
