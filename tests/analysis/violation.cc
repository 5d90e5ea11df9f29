// Must not get through the `analysis` build: it reads a GUARDED_BY field without holding its
// mutex. tests/analysis/CMakeLists.txt builds it on purpose and expects the thread-safety error,
// so a change that switches the analysis off (a lost flag, a compiler without it) fails a test.
#include "base/mutex.h"

namespace {

class Counter {
 public:
  int read_without_the_lock() { return n_; }

 private:
  ichido::Mutex mu_;
  int n_ GUARDED_BY(mu_) = 0;
};

}  // namespace

int ichido_analysis_violation() {
  Counter c;
  return c.read_without_the_lock();
}
