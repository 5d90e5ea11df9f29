#include "base/thread_name.h"

#include <pthread.h>

#include <algorithm>
#include <cstring>

namespace ichido {

namespace {
void set_name(pthread_t t, std::string_view name) {
  char buf[16];  // the kernel's TASK_COMM_LEN, with the terminating NUL
  const std::size_t n = std::min(name.size(), sizeof buf - 1);
  std::memcpy(buf, name.data(), n);
  buf[n] = '\0';
  (void)pthread_setname_np(t, buf);
}
}  // namespace

void name_thread(std::thread& t, std::string_view name) { set_name(t.native_handle(), name); }

void name_this_thread(std::string_view name) { set_name(pthread_self(), name); }

}  // namespace ichido
