#include "store/testing/power_loss_vfs.h"

#include <sqlite3.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <mutex>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "store/sqlite/vfs_shim.h"
#include "store/testing/io_shim.h"

namespace ichido::store_testing {
namespace {

using store::sqlite::shim_real;
using store::sqlite::ShimFile;

// What the disk holds of one file: its bytes as of the last fsync, and the ranges written since.
struct Kept {
  bool wal = false;
  std::string durable;
  std::vector<std::pair<sqlite3_int64, sqlite3_int64>> dirty;  // [offset, end)
  sqlite3_int64 cut_to = -1;  // the shortest length a truncate left since the last fsync
};

PowerLoss g_power;
sqlite3_vfs g_vfs;
sqlite3_io_methods g_methods;
std::mutex g_mu;                          // every write and fsync of a kept file, and cut()
std::map<std::string, Kept> g_kept;       // by path; nodes are stable while a file is open
std::optional<std::uint64_t> g_cut_seed;  // a cut_at_next_sync waiting
std::optional<std::map<std::string, std::string>> g_cut_taken;  // and what it found
std::condition_variable g_cut_cv;
std::mutex g_cut_request_mu;  // one cut_at_next_sync at a time (they share the slots above)

struct PlFile {
  ShimFile head;  // the base VFS's file in the memory right after this struct
  Kept* kept;     // nullptr: not a database or a WAL, passed through
};

sqlite3_file* real(sqlite3_file* f) { return shim_real(f); }
Kept* kept(sqlite3_file* f) { return reinterpret_cast<PlFile*>(f)->kept; }

// Reads [off, off + n) of the file as it is now into `out` at the same offset.
int read_into(sqlite3_file* f, std::string& out, sqlite3_int64 off, sqlite3_int64 n) {
  if (n <= 0) return SQLITE_OK;
  if (static_cast<sqlite3_int64>(out.size()) < off + n) out.resize(off + n);
  return real(f)->pMethods->xRead(real(f), out.data() + off, static_cast<int>(n), off);
}

// cut_keeping_some with g_mu held: no write or fsync of a kept file runs while the files are read.
std::map<std::string, std::string> cut_keeping_some_locked(std::uint64_t seed) {
  constexpr sqlite3_int64 kSector = 512;
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution coin(0.5);
  std::map<std::string, std::string> out;
  for (const auto& [path, k] : g_kept) {
    std::string disk = k.durable;
    if (k.cut_to >= 0 && coin(rng) && k.cut_to < static_cast<sqlite3_int64>(disk.size())) {
      disk.resize(static_cast<std::size_t>(k.cut_to));
    }
    if (!k.dirty.empty()) {
      // The file as it is now holds the last write to every sector.
      std::ifstream in(path, std::ios::binary);
      const std::string now{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      const auto now_size = static_cast<sqlite3_int64>(now.size());
      for (const auto& [from, to] : k.dirty) {
        for (sqlite3_int64 s = from / kSector * kSector; s < to; s += kSector) {
          const sqlite3_int64 a = std::max(s, from);
          const sqlite3_int64 b = std::min({s + kSector, to, now_size});
          if (a >= b || !coin(rng)) continue;
          if (static_cast<sqlite3_int64>(disk.size()) < b) disk.resize(static_cast<std::size_t>(b));
          disk.replace(static_cast<std::size_t>(a), static_cast<std::size_t>(b - a), now,
                       static_cast<std::size_t>(a), static_cast<std::size_t>(b - a));
          g_power.unsynced_sectors_kept.fetch_add(1);
        }
      }
    }
    out.emplace(path, std::move(disk));
  }
  return out;
}

int x_write(sqlite3_file* f, const void* p, int n, sqlite3_int64 off) {
  Kept* k = kept(f);
  if (!k) return real(f)->pMethods->xWrite(real(f), p, n, off);
  std::lock_guard lk(g_mu);
  const int rc = real(f)->pMethods->xWrite(real(f), p, n, off);
  if (rc == SQLITE_OK) {
    k->dirty.emplace_back(off, off + n);
    if (k->wal && off == 0) g_power.wal_headers.fetch_add(1);
  }
  return rc;
}
int x_truncate(sqlite3_file* f, sqlite3_int64 size) {
  if (!kept(f)) return real(f)->pMethods->xTruncate(real(f), size);
  std::lock_guard lk(g_mu);
  const int rc = real(f)->pMethods->xTruncate(real(f), size);
  if (rc == SQLITE_OK) {
    auto* k = kept(f);
    k->cut_to = k->cut_to < 0 ? size : std::min(k->cut_to, size);
  }
  return rc;
}
// A completed fsync makes the whole file durable as it is: the ranges written since the last one
// are read back from the file, and its length is the file's length now.
int x_sync(sqlite3_file* f, int flags) {
  Kept* k = kept(f);
  if (!k) return real(f)->pMethods->xSync(real(f), flags);
  std::lock_guard lk(g_mu);
  if (g_cut_seed) {  // cut_at_next_sync: the power fails as this fsync starts
    g_cut_taken = cut_keeping_some_locked(*g_cut_seed);
    g_cut_seed.reset();
    g_cut_cv.notify_all();
  }
  int rc = real(f)->pMethods->xSync(real(f), flags);
  if (rc != SQLITE_OK) return rc;
  sqlite3_int64 size = 0;
  if ((rc = real(f)->pMethods->xFileSize(real(f), &size)) != SQLITE_OK) return rc;
  // Bytes a truncate removed are gone even where the file has grown again since (zeros there,
  // unless written again).
  if (k->cut_to >= 0 && k->cut_to < static_cast<sqlite3_int64>(k->durable.size())) {
    k->durable.resize(static_cast<std::size_t>(k->cut_to));
  }
  k->cut_to = -1;
  for (const auto& [from, to] : k->dirty) {
    const auto end = std::min(to, size);
    if ((rc = read_into(f, k->durable, from, end - from)) != SQLITE_OK) return rc;
  }
  k->durable.resize(static_cast<std::size_t>(size));
  k->dirty.clear();
  return SQLITE_OK;
}

int x_open(sqlite3_vfs* vfs, sqlite3_filename name, sqlite3_file* file, int flags, int* out_flags) {
  auto* f = reinterpret_cast<PlFile*>(file);
  f->head.real = reinterpret_cast<sqlite3_file*>(f + 1);
  f->kept = nullptr;
  const int rc = store::sqlite::open_shim_file(vfs, name, &f->head, flags, out_flags, &g_methods);
  if (rc != SQLITE_OK || !f->head.base.pMethods || !name ||
      (flags & (SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_WAL)) == 0) {
    return rc;
  }
  std::lock_guard lk(g_mu);
  auto [it, fresh] = g_kept.try_emplace(name);
  if (fresh) {
    // What is on the disk when a file is first seen counts as durable (a test starts from a
    // fresh directory, or from files a finished store left).
    sqlite3_int64 size = 0;
    if (real(file)->pMethods->xFileSize(real(file), &size) == SQLITE_OK) {
      (void)read_into(file, it->second.durable, 0, size);
    }
  }
  it->second.wal = (flags & SQLITE_OPEN_WAL) != 0;
  f->kept = &it->second;
  return rc;
}

int x_delete(sqlite3_vfs* vfs, const char* name, int sync_dir) {
  {
    std::lock_guard lk(g_mu);
    g_kept.erase(name);
  }
  sqlite3_vfs* base = store::sqlite::wrapped_vfs(vfs);
  return base->xDelete(base, name, sync_dir);
}

}  // namespace

std::map<std::string, std::string> PowerLoss::cut() {
  std::lock_guard lk(g_mu);
  std::map<std::string, std::string> out;
  for (const auto& [path, k] : g_kept) out.emplace(path, k.durable);
  return out;
}

std::map<std::string, std::string> PowerLoss::cut_keeping_some(std::uint64_t seed) {
  std::lock_guard lk(g_mu);
  return cut_keeping_some_locked(seed);
}

std::optional<std::map<std::string, std::string>> PowerLoss::cut_at_next_sync(
    std::uint64_t seed, std::chrono::milliseconds timeout) {
  std::lock_guard one_at_a_time(g_cut_request_mu);  // never taken under g_mu
  std::unique_lock lk(g_mu);
  g_cut_taken.reset();
  g_cut_seed = seed;
  if (!g_cut_cv.wait_for(lk, timeout, [] { return g_cut_taken.has_value(); })) {
    g_cut_seed.reset();
    return std::nullopt;
  }
  auto out = std::move(g_cut_taken);
  g_cut_taken.reset();
  return out;
}

void PowerLoss::reset() {
  std::lock_guard lk(g_mu);
  g_kept.clear();
  wal_headers = 0;
  unsynced_sectors_kept = 0;
  g_cut_seed.reset();
  g_cut_taken.reset();
}

PowerLoss& power_loss() { return g_power; }

PowerLoss& register_power_loss_vfs() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_io_shim({kPowerLossVfs, static_cast<int>(sizeof(PlFile)), x_open, x_write, x_truncate,
                      x_sync, x_delete},
                     g_vfs, g_methods);
  });
  return g_power;
}

}  // namespace ichido::store_testing
