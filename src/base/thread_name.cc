#include "base/thread_name.h"

#include <pthread.h>

#include <algorithm>
#include <cstring>

namespace ichido {

void name_thread(std::thread& t, std::string_view name) {
  char buf[16];  // the kernel's TASK_COMM_LEN, with the terminating NUL
  const std::size_t n = std::min(name.size(), sizeof buf - 1);
  std::memcpy(buf, name.data(), n);
  buf[n] = '\0';
  (void)pthread_setname_np(t.native_handle(), buf);
}

}  // namespace ichido
