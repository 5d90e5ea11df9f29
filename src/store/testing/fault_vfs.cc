#include "store/testing/fault_vfs.h"

#include <sqlite3.h>

#include <mutex>

#include "store/sqlite/vfs_shim.h"
#include "store/testing/io_shim.h"

namespace ichido::store_testing {
namespace {

using store::sqlite::shim_real;
using store::sqlite::ShimFile;

FaultPlan g_plan;
sqlite3_vfs g_vfs;
sqlite3_io_methods g_methods;

struct FaultFile {
  ShimFile head;  // the base VFS's file in the memory right after this struct
  int kind;
};

sqlite3_file* real(sqlite3_file* f) { return shim_real(f); }
bool targeted(sqlite3_file* f) {
  return (reinterpret_cast<FaultFile*>(f)->kind & g_plan.kinds.load()) != 0;
}
// Consumes one from a countdown; true when a fault fires.
bool take(std::atomic<int>& n) {
  int v = n.load();
  while (v > 0) {
    if (n.compare_exchange_weak(v, v - 1)) {
      g_plan.injected.fetch_add(1);
      return true;
    }
  }
  return false;
}

int x_write(sqlite3_file* f, const void* p, int n, sqlite3_int64 off) {
  if (targeted(f)) {
    g_plan.writes.fetch_add(1);
    if (g_plan.disk_full.load()) {
      g_plan.injected.fetch_add(1);
      return SQLITE_FULL;
    }
    if (g_plan.no_free_blocks.load()) {
      sqlite3_int64 size = 0;
      if (real(f)->pMethods->xFileSize(real(f), &size) == SQLITE_OK && off + n > size) {
        g_plan.injected.fetch_add(1);
        return SQLITE_FULL;
      }
    }
    if (take(g_plan.fail_writes)) return SQLITE_IOERR_WRITE;
  }
  return real(f)->pMethods->xWrite(real(f), p, n, off);
}
int x_truncate(sqlite3_file* f, sqlite3_int64 size) {
  if (targeted(f) && take(g_plan.fail_truncates)) return SQLITE_IOERR_TRUNCATE;
  return real(f)->pMethods->xTruncate(real(f), size);
}
int x_sync(sqlite3_file* f, int flags) {
  if (targeted(f)) {
    g_plan.syncs.fetch_add(1);
    if (take(g_plan.fail_syncs)) return SQLITE_IOERR_FSYNC;
  }
  return real(f)->pMethods->xSync(real(f), flags);
}

int x_open(sqlite3_vfs* vfs, sqlite3_filename name, sqlite3_file* file, int flags, int* out_flags) {
  auto* f = reinterpret_cast<FaultFile*>(file);
  f->head.real = reinterpret_cast<sqlite3_file*>(f + 1);
  f->kind = (flags & SQLITE_OPEN_MAIN_DB) ? FaultPlan::kMainDb
            : (flags & SQLITE_OPEN_WAL)   ? FaultPlan::kWal
                                          : 0;
  if (g_plan.read_only.load() && (flags & SQLITE_OPEN_MAIN_DB)) {
    flags = (flags & ~(SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)) | SQLITE_OPEN_READONLY;
  }
  return store::sqlite::open_shim_file(vfs, name, &f->head, flags, out_flags, &g_methods);
}

}  // namespace

FaultPlan& fault_plan() { return g_plan; }

FaultPlan& register_fault_vfs() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_io_shim(
        {kFaultVfs, static_cast<int>(sizeof(FaultFile)), x_open, x_write, x_truncate, x_sync},
        g_vfs, g_methods);
  });
  return g_plan;
}

}  // namespace ichido::store_testing
