// ichido-fsync-baseline: the physical limit of "one fsync per request" on a filesystem.
//
// Each operation is pwrite(BLOCK bytes) + fdatasync on one file in --dir, timed individually.
// --threads 1: one writer, serially: the most requests per second a server that syncs once per
//   request, one at a time, could ever answer (ichido's group commit should beat it under load).
// --threads N: N writers on the same file, each doing write+fdatasync independently: what N
//   concurrent committers get without group commit (whatever the kernel and device coalesce).
// --mode overwrite (default): writes cycle through a preallocated, synced region (like a reused
//   WAL), so fdatasync flushes data only. --mode append: the file grows, so each fdatasync must
//   also commit the new size (a journal commit on ext4/xfs).
// A failed write or fdatasync stops the run with exit code 1: numbers after that mean nothing.
#include <fcntl.h>
#include <sys/statfs.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "histogram.h"
#include "options.h"

namespace {

using Clock = std::chrono::steady_clock;
using ichido::bench::Histogram;
using std::chrono::microseconds;

constexpr unsigned kMaxThreads = 1024;

struct Options {
  std::string dir = ".";
  microseconds duration = std::chrono::seconds(5);
  microseconds warmup = std::chrono::seconds(1);
  unsigned threads = 1;
  std::uint64_t block = 4096;
  std::uint64_t region = 64ull << 20;  // overwrite mode: bytes cycled through
  bool append = false;
  bool json = false;
};

std::string fs_name(const std::string& dir) {
  struct statfs s{};
  if (statfs(dir.c_str(), &s) != 0) return "unknown";
  switch (static_cast<unsigned long>(s.f_type)) {
    case 0xEF53:
      return "ext4";
    case 0x58465342:
      return "xfs";
    case 0x9123683E:
      return "btrfs";
    case 0x01021994:
      return "tmpfs";
    case 0x794C7630:
      return "overlayfs";
    case 0x2FC12FC1:
      return "zfs";
    case 0xF2F52010:
      return "f2fs";
    default: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "0x%lx", static_cast<unsigned long>(s.f_type));
      return buf;
    }
  }
}

// Writes `len` bytes at `off`, retrying short writes and EINTR. False with errno set on failure.
bool pwrite_all(int fd, const char* data, std::size_t len, off_t off) {
  while (len > 0) {
    const ssize_t n = ::pwrite(fd, data, len, off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    len -= static_cast<std::size_t>(n);
    off += n;
  }
  return true;
}

struct Worker {
  Histogram latency_us;
  std::uint64_t ops_in_window = 0;
};

int run(const Options& opt) {
  std::string path = opt.dir + "/ichido-fsync-baseline-XXXXXX";
  const int fd = ::mkostemp(path.data(), O_CLOEXEC);
  if (fd < 0) {
    std::fprintf(stderr, "ichido-fsync-baseline: cannot create a file in %s: %s\n", opt.dir.c_str(),
                 std::strerror(errno));
    return 1;
  }
  ::unlink(path.c_str());  // the open descriptor keeps it; nothing is left behind on any exit

  const std::vector<char> block(opt.block, 'x');
  const std::uint64_t nblocks = opt.region / opt.block;
  if (!opt.append) {
    // Preallocate and sync the region so that measured fdatasyncs flush data, not metadata.
    const std::vector<char> chunk(1 << 20, 0);
    for (std::uint64_t off = 0; off < nblocks * opt.block; off += chunk.size()) {
      const auto len = std::min<std::uint64_t>(chunk.size(), nblocks * opt.block - off);
      if (!pwrite_all(fd, chunk.data(), len, static_cast<off_t>(off))) {
        std::fprintf(stderr, "ichido-fsync-baseline: preallocate: %s\n", std::strerror(errno));
        ::close(fd);
        return 1;
      }
    }
    if (::fsync(fd) != 0) {
      std::fprintf(stderr, "ichido-fsync-baseline: fsync: %s\n", std::strerror(errno));
      ::close(fd);
      return 1;
    }
  }

  std::vector<Worker> workers(opt.threads);
  std::atomic<bool> failed{false};
  std::atomic<std::uint64_t> append_at{0};
  std::mutex err_mu;
  std::string first_error;
  const auto start = Clock::now();
  const auto measure_start = start + opt.warmup;
  const auto end = measure_start + opt.duration;

  auto work = [&](unsigned t) {
    Worker& w = workers[t];
    for (std::uint64_t i = 0; !failed.load(std::memory_order_relaxed); ++i) {
      const auto t0 = Clock::now();
      if (t0 >= end) break;
      const std::uint64_t off = opt.append ? append_at.fetch_add(opt.block)
                                           : ((i * opt.threads + t) % nblocks) * opt.block;
      const char* what = nullptr;
      if (!pwrite_all(fd, block.data(), block.size(), static_cast<off_t>(off)))
        what = "pwrite";
      else if (::fdatasync(fd) != 0)
        what = "fdatasync";
      if (what) {
        const int e = errno;
        std::lock_guard lock(err_mu);
        if (first_error.empty()) first_error = std::string(what) + ": " + std::strerror(e);
        failed = true;
        break;
      }
      const auto t1 = Clock::now();
      if (t1 >= measure_start && t1 < end) {
        ++w.ops_in_window;
        w.latency_us.record(
            static_cast<std::uint64_t>(std::chrono::duration_cast<microseconds>(t1 - t0).count()));
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < opt.threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool) th.join();
  ::close(fd);
  if (failed) {
    std::fprintf(stderr, "ichido-fsync-baseline: %s (stopped: a failed sync invalidates the run)\n",
                 first_error.c_str());
    return 1;
  }

  Histogram h;
  std::uint64_t ops = 0;
  for (const auto& w : workers) {
    h.merge(w.latency_us);
    ops += w.ops_in_window;
  }
  const double secs = std::chrono::duration<double>(opt.duration).count();
  const double ops_s = static_cast<double>(ops) / secs;
  const auto ms = [](std::uint64_t us) { return static_cast<double>(us) / 1000.0; };
  const char* mode = opt.append ? "append" : "overwrite";
  const std::string fs = fs_name(opt.dir);
  const std::string workload = opt.threads == 1 ? "fsync-serial" : "fsync-threads";
  std::fprintf(opt.json ? stderr : stdout,
               "%s: %u thread(s), %s %llu B + fdatasync on %s (%s), %.1fs: %.0f ops/s; latency ms "
               "p50=%.3f p99=%.3f p99.9=%.3f max=%.3f\n",
               workload.c_str(), opt.threads, mode, static_cast<unsigned long long>(opt.block),
               opt.dir.c_str(), fs.c_str(), secs, ops_s, ms(h.quantile(0.5)), ms(h.quantile(0.99)),
               ms(h.quantile(0.999)), ms(h.max()));
  if (opt.json) {
    std::printf(
        "{\"system\":\"fsync\",\"workload\":\"%s\",\"conc\":%u,\"mode\":\"%s\",\"block\":%llu,"
        "\"fs\":\"%s\",\"duration_s\":%.3f,\"ops_s\":%.1f,\"ops\":%llu,\"errors\":0,"
        "\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"p999_ms\":%.3f,\"max_ms\":%.3f}\n",
        workload.c_str(), opt.threads, mode, static_cast<unsigned long long>(opt.block), fs.c_str(),
        secs, ops_s, static_cast<unsigned long long>(ops), ms(h.quantile(0.5)),
        ms(h.quantile(0.99)), ms(h.quantile(0.999)), ms(h.max()));
  } else {
    std::printf(
        "system=fsync workload=%s conc=%u ops_s=%.1f p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f "
        "errors=0 max_ms=%.3f mode=%s block=%llu fs=%s duration_s=%.3f\n",
        workload.c_str(), opt.threads, ops_s, ms(h.quantile(0.5)), ms(h.quantile(0.99)),
        ms(h.quantile(0.999)), ms(h.max()), mode, static_cast<unsigned long long>(opt.block),
        fs.c_str(), secs);
  }
  return 0;
}

void usage(std::FILE* to) {
  std::fprintf(
      to,
      "usage: ichido-fsync-baseline --dir DIR [options]\n"
      "  --dir DIR          directory on the filesystem to measure (a temp file is made there)\n"
      "  --duration D       measured time (default 5s, max 1h)\n"
      "  --warmup D         unmeasured time before it (default 1s)\n"
      "  --threads N        concurrent writers on the same file (1-%u, default 1 = serial)\n"
      "  --block BYTES      bytes written per operation (512-1048576, default 4096)\n"
      "  --mode M           overwrite (default: preallocated 64 MiB ring) | append\n"
      "  --json             print a JSON object instead of the machine line\n",
      kMaxThreads);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    using ichido::bench::parse_duration;
    using ichido::bench::parse_uint;
    Options opt;
    bool have_dir = false;
    for (int i = 1; i < argc; ++i) {
      const std::string_view a = argv[i];
      if (a == "-h" || a == "--help") {
        usage(stdout);
        return 0;
      }
      if (a == "--json") {
        opt.json = true;
        continue;
      }
      if (i + 1 >= argc) {
        std::fprintf(stderr, "ichido-fsync-baseline: %s needs a value (or is unknown)\n", argv[i]);
        return 2;
      }
      const std::string_view v = argv[++i];
      bool ok = true;
      if (a == "--dir") {
        opt.dir = v;
        have_dir = ok = !v.empty();
      } else if (a == "--duration" || a == "--warmup") {
        const auto d =
            parse_duration(v, a == "--duration" ? microseconds(1000) : microseconds(0),
                           a == "--duration" ? std::chrono::hours(1) : std::chrono::minutes(10));
        ok = d.has_value();
        if (ok) (a == "--duration" ? opt.duration : opt.warmup) = *d;
      } else if (a == "--threads") {
        const auto n = parse_uint(v, 1, kMaxThreads);
        ok = n.has_value();
        if (ok) opt.threads = static_cast<unsigned>(*n);
      } else if (a == "--block") {
        const auto n = parse_uint(v, 512, 1 << 20);
        ok = n.has_value();
        if (ok) opt.block = *n;
      } else if (a == "--mode") {
        ok = v == "overwrite" || v == "append";
        opt.append = v == "append";
      } else {
        std::fprintf(stderr, "ichido-fsync-baseline: unknown option %s\n", argv[i - 1]);
        usage(stderr);
        return 2;
      }
      if (!ok) {
        std::fprintf(stderr, "ichido-fsync-baseline: bad value for %s: '%s'\n", argv[i - 1],
                     argv[i]);
        return 2;
      }
    }
    if (!have_dir) {
      usage(stderr);
      return 2;
    }
    return run(opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ichido-fsync-baseline: %s\n", e.what());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "ichido-fsync-baseline: unknown failure\n");
    return 1;
  }
}
