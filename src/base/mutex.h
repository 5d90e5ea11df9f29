// Mutex, MutexLock, CondVar and SharedMutex (WriterLock, ReaderLock): std::mutex,
// std::condition_variable and std::shared_mutex with Clang's
// thread-safety annotations, so that "field F is only touched with mutex M held" is checked by
// the compiler (-Wthread-safety, on in every clang build: scripts/fuzz builds with clang in
// `make test`), not just stated in a comment. After LevelDB's port::Mutex and Abseil's Mutex.
//
//   Mutex mu_;
//   int n_ GUARDED_BY(mu_);
//   void bump() { MutexLock lk(mu_); ++n_; }
//   void bump_locked() REQUIRES(mu_) { ++n_; }
//
// Thread-safety: as std::mutex / std::condition_variable.
#pragma once

#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define ICHIDO_TSA(x) __attribute__((x))
#else
#define ICHIDO_TSA(x)
#endif

#define CAPABILITY(x) ICHIDO_TSA(capability(x))
#define SCOPED_CAPABILITY ICHIDO_TSA(scoped_lockable)
#define GUARDED_BY(x) ICHIDO_TSA(guarded_by(x))
#define PT_GUARDED_BY(x) ICHIDO_TSA(pt_guarded_by(x))
#define REQUIRES(...) ICHIDO_TSA(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) ICHIDO_TSA(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) ICHIDO_TSA(acquire_capability(__VA_ARGS__))
#define RELEASE(...) ICHIDO_TSA(release_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) ICHIDO_TSA(acquire_shared_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) ICHIDO_TSA(release_shared_capability(__VA_ARGS__))
#define TRY_ACQUIRE_SHARED(...) ICHIDO_TSA(try_acquire_shared_capability(__VA_ARGS__))
#define RELEASE_GENERIC(...) ICHIDO_TSA(unlock_function(__VA_ARGS__))
#define REQUIRES_SHARED(...) ICHIDO_TSA(requires_shared_capability(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) ICHIDO_TSA(assert_capability(x))
#define NO_THREAD_SAFETY_ANALYSIS ICHIDO_TSA(no_thread_safety_analysis)

namespace ichido {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;
  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` for its scope; unlock() ends that early (and lock() takes it again).
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;
  void unlock() RELEASE() {
    mu_.unlock();
    held_ = false;
  }
  void lock() ACQUIRE() {
    mu_.lock();
    held_ = true;
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

// A reader–writer lock: many holders of the shared side or one of the exclusive side.
// WriterLock / ReaderLock hold it for their scope. A waiting writer goes before readers that come
// after it (glibc's std::shared_mutex prefers readers: overlapping readers, such as the key
// index's lookups from several reader threads, could keep the one writer out for as long as
// they come). So a thread must never take the shared side twice: with a writer waiting between
// the two, it would wait for itself.
class CAPABILITY("shared mutex") SharedMutex {
 public:
  SharedMutex() {
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&mu_, &attr);
    pthread_rwlockattr_destroy(&attr);
  }
  ~SharedMutex() { pthread_rwlock_destroy(&mu_); }
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;
  void lock() ACQUIRE() { pthread_rwlock_wrlock(&mu_); }
  void unlock() RELEASE() { pthread_rwlock_unlock(&mu_); }
  void lock_shared() ACQUIRE_SHARED() { pthread_rwlock_rdlock(&mu_); }
  void unlock_shared() RELEASE_SHARED() { pthread_rwlock_unlock(&mu_); }
  // The shared side if it can be had now: not while a writer holds it or waits for it.
  bool try_lock_shared() TRY_ACQUIRE_SHARED(true) { return pthread_rwlock_tryrdlock(&mu_) == 0; }

 private:
  pthread_rwlock_t mu_;
};

class SCOPED_CAPABILITY WriterLock {
 public:
  explicit WriterLock(SharedMutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~WriterLock() RELEASE() { mu_.unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  SharedMutex& mu_;
};

class SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(SharedMutex& mu) ACQUIRE_SHARED(mu) : mu_(mu) { mu_.lock_shared(); }
  ~ReaderLock() RELEASE_GENERIC() { mu_.unlock_shared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex& mu_;
};

// A condition variable used with a Mutex the caller holds (REQUIRES: the analysis sees the
// mutex held before and after, which is what wait() guarantees).
class CondVar {
 public:
  void wait(Mutex& mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lk(mu.mu_, std::adopt_lock);
    cv_.wait(lk);
    lk.release();
  }
  // Waits until notified (or spuriously woken) or `deadline`; false when the deadline passed.
  // Callers loop on their condition, written where the analysis sees the mutex held (a
  // predicate lambda would be analysed as a function that does not hold it).
  bool wait_until(Mutex& mu, std::chrono::steady_clock::time_point deadline) REQUIRES(mu) {
    std::unique_lock<std::mutex> lk(mu.mu_, std::adopt_lock);
    const bool in_time = cv_.wait_until(lk, deadline) == std::cv_status::no_timeout;
    lk.release();
    return in_time;
  }
  void notify_one() { cv_.notify_one(); }
  void notify_all() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace ichido
