// A slow disk for the tests that need a commit to take a while (LD_PRELOAD into the server):
// fsync and fdatasync wait $ICHIDO_SLOW_SYNC_MS milliseconds before they sync. A commit that waits
// for its fsync gives a test a window of known length in which to act "during the commit" — what
// a real disk gives by chance (a few milliseconds) and a tmpfs /tmp hardly at all.
#include <dlfcn.h>
#include <time.h>

#include <cerrno>
#include <cstdlib>

namespace {

long delay_ms() {
  static const long ms = [] {
    const char* v = std::getenv("ICHIDO_SLOW_SYNC_MS");
    return v ? std::strtol(v, nullptr, 10) : 0L;
  }();
  return ms;
}

void wait_a_while() {
  const long ms = delay_ms();
  if (ms <= 0) return;
  timespec left{ms / 1000, (ms % 1000) * 1000000L};
  const int saved = errno;
  while (::nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
  errno = saved;
}

template <class F>
F next_symbol(const char* name) {
  return reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" int fsync(int fd) {
  static const auto real = next_symbol<int (*)(int)>("fsync");
  wait_a_while();
  return real(fd);
}

extern "C" int fdatasync(int fd) {
  static const auto real = next_symbol<int (*)(int)>("fdatasync");
  wait_a_while();
  return real(fd);
}
