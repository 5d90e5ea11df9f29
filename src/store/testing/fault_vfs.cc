#include "store/testing/fault_vfs.h"

#include <sqlite3.h>

#include <mutex>

namespace ichido::store_testing {
namespace {

FaultPlan g_plan;
sqlite3_vfs g_vfs;
sqlite3_vfs* g_base = nullptr;
sqlite3_io_methods g_methods;

struct FaultFile {
  sqlite3_file base;   // pMethods = &g_methods
  sqlite3_file* real;  // the base VFS's file, in the memory right after this struct
  int kind;
};

sqlite3_file* real(sqlite3_file* f) { return reinterpret_cast<FaultFile*>(f)->real; }
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

int x_close(sqlite3_file* f) { return real(f)->pMethods->xClose(real(f)); }
int x_read(sqlite3_file* f, void* p, int n, sqlite3_int64 off) {
  return real(f)->pMethods->xRead(real(f), p, n, off);
}
int x_write(sqlite3_file* f, const void* p, int n, sqlite3_int64 off) {
  if (targeted(f)) {
    g_plan.writes.fetch_add(1);
    if (g_plan.disk_full.load()) {
      g_plan.injected.fetch_add(1);
      return SQLITE_FULL;
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
int x_file_size(sqlite3_file* f, sqlite3_int64* size) {
  return real(f)->pMethods->xFileSize(real(f), size);
}
int x_lock(sqlite3_file* f, int l) { return real(f)->pMethods->xLock(real(f), l); }
int x_unlock(sqlite3_file* f, int l) { return real(f)->pMethods->xUnlock(real(f), l); }
int x_check_reserved(sqlite3_file* f, int* out) {
  return real(f)->pMethods->xCheckReservedLock(real(f), out);
}
int x_file_control(sqlite3_file* f, int op, void* arg) {
  return real(f)->pMethods->xFileControl(real(f), op, arg);
}
int x_sector_size(sqlite3_file* f) { return real(f)->pMethods->xSectorSize(real(f)); }
int x_device_characteristics(sqlite3_file* f) {
  return real(f)->pMethods->xDeviceCharacteristics(real(f));
}
int x_shm_map(sqlite3_file* f, int region, int size, int extend, void volatile** p) {
  return real(f)->pMethods->xShmMap(real(f), region, size, extend, p);
}
int x_shm_lock(sqlite3_file* f, int offset, int n, int flags) {
  return real(f)->pMethods->xShmLock(real(f), offset, n, flags);
}
void x_shm_barrier(sqlite3_file* f) { real(f)->pMethods->xShmBarrier(real(f)); }
int x_shm_unmap(sqlite3_file* f, int del) { return real(f)->pMethods->xShmUnmap(real(f), del); }
int x_fetch(sqlite3_file* f, sqlite3_int64 off, int n, void** p) {
  return real(f)->pMethods->xFetch(real(f), off, n, p);
}
int x_unfetch(sqlite3_file* f, sqlite3_int64 off, void* p) {
  return real(f)->pMethods->xUnfetch(real(f), off, p);
}

int x_open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* file, int flags, int* out_flags) {
  auto* f = reinterpret_cast<FaultFile*>(file);
  f->real = reinterpret_cast<sqlite3_file*>(f + 1);
  f->kind = (flags & SQLITE_OPEN_MAIN_DB) ? FaultPlan::kMainDb
            : (flags & SQLITE_OPEN_WAL)   ? FaultPlan::kWal
                                          : 0;
  if (g_plan.read_only.load() && (flags & SQLITE_OPEN_MAIN_DB)) {
    flags = (flags & ~(SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)) | SQLITE_OPEN_READONLY;
  }
  const int rc = g_base->xOpen(g_base, name, f->real, flags, out_flags);
  // Methods only for a file the base opened: SQLite calls xClose exactly when pMethods is set.
  f->base.pMethods = (rc == SQLITE_OK && f->real->pMethods) ? &g_methods : nullptr;
  return rc;
}

int x_delete(sqlite3_vfs*, const char* name, int sync) {
  return g_base->xDelete(g_base, name, sync);
}
int x_access(sqlite3_vfs*, const char* name, int flags, int* out) {
  return g_base->xAccess(g_base, name, flags, out);
}
int x_full_pathname(sqlite3_vfs*, const char* name, int n, char* out) {
  return g_base->xFullPathname(g_base, name, n, out);
}

}  // namespace

FaultPlan& fault_plan() { return g_plan; }

FaultPlan& register_fault_vfs() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_base = sqlite3_vfs_find(nullptr);
    g_vfs = *g_base;  // dlopen, randomness, sleep, time: the base's
    g_vfs.pNext = nullptr;
    g_vfs.zName = kFaultVfs;
    g_vfs.szOsFile = static_cast<int>(sizeof(FaultFile)) + g_base->szOsFile;
    g_vfs.xOpen = x_open;
    g_vfs.xDelete = x_delete;
    g_vfs.xAccess = x_access;
    g_vfs.xFullPathname = x_full_pathname;
    g_methods = sqlite3_io_methods{3,
                                   x_close,
                                   x_read,
                                   x_write,
                                   x_truncate,
                                   x_sync,
                                   x_file_size,
                                   x_lock,
                                   x_unlock,
                                   x_check_reserved,
                                   x_file_control,
                                   x_sector_size,
                                   x_device_characteristics,
                                   x_shm_map,
                                   x_shm_lock,
                                   x_shm_barrier,
                                   x_shm_unmap,
                                   x_fetch,
                                   x_unfetch};
    sqlite3_vfs_register(&g_vfs, /*makeDflt=*/0);
  });
  return g_plan;
}

}  // namespace ichido::store_testing
