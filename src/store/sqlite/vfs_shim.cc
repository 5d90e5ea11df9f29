#include "store/sqlite/vfs_shim.h"

namespace ichido::store::sqlite {
namespace {

int x_close(sqlite3_file* f) { return shim_real(f)->pMethods->xClose(shim_real(f)); }
int x_read(sqlite3_file* f, void* p, int n, sqlite3_int64 off) {
  return shim_real(f)->pMethods->xRead(shim_real(f), p, n, off);
}
int x_write(sqlite3_file* f, const void* p, int n, sqlite3_int64 off) {
  return shim_real(f)->pMethods->xWrite(shim_real(f), p, n, off);
}
int x_truncate(sqlite3_file* f, sqlite3_int64 size) {
  return shim_real(f)->pMethods->xTruncate(shim_real(f), size);
}
int x_sync(sqlite3_file* f, int flags) {
  return shim_real(f)->pMethods->xSync(shim_real(f), flags);
}
int x_file_size(sqlite3_file* f, sqlite3_int64* size) {
  return shim_real(f)->pMethods->xFileSize(shim_real(f), size);
}
int x_lock(sqlite3_file* f, int l) { return shim_real(f)->pMethods->xLock(shim_real(f), l); }
int x_unlock(sqlite3_file* f, int l) { return shim_real(f)->pMethods->xUnlock(shim_real(f), l); }
int x_check_reserved(sqlite3_file* f, int* out) {
  return shim_real(f)->pMethods->xCheckReservedLock(shim_real(f), out);
}
int x_file_control(sqlite3_file* f, int op, void* arg) {
  return shim_real(f)->pMethods->xFileControl(shim_real(f), op, arg);
}
int x_sector_size(sqlite3_file* f) { return shim_real(f)->pMethods->xSectorSize(shim_real(f)); }
int x_device_characteristics(sqlite3_file* f) {
  return shim_real(f)->pMethods->xDeviceCharacteristics(shim_real(f));
}
int x_shm_map(sqlite3_file* f, int region, int size, int extend, void volatile** p) {
  return shim_real(f)->pMethods->xShmMap(shim_real(f), region, size, extend, p);
}
int x_shm_lock(sqlite3_file* f, int offset, int n, int flags) {
  return shim_real(f)->pMethods->xShmLock(shim_real(f), offset, n, flags);
}
void x_shm_barrier(sqlite3_file* f) { shim_real(f)->pMethods->xShmBarrier(shim_real(f)); }
int x_shm_unmap(sqlite3_file* f, int del) {
  return shim_real(f)->pMethods->xShmUnmap(shim_real(f), del);
}
int x_fetch(sqlite3_file* f, sqlite3_int64 off, int n, void** p) {
  return shim_real(f)->pMethods->xFetch(shim_real(f), off, n, p);
}
int x_unfetch(sqlite3_file* f, sqlite3_int64 off, void* p) {
  return shim_real(f)->pMethods->xUnfetch(shim_real(f), off, p);
}

int x_delete(sqlite3_vfs* vfs, const char* name, int sync) {
  return wrapped_vfs(vfs)->xDelete(wrapped_vfs(vfs), name, sync);
}
int x_access(sqlite3_vfs* vfs, const char* name, int flags, int* out) {
  return wrapped_vfs(vfs)->xAccess(wrapped_vfs(vfs), name, flags, out);
}
int x_full_pathname(sqlite3_vfs* vfs, const char* name, int n, char* out) {
  return wrapped_vfs(vfs)->xFullPathname(wrapped_vfs(vfs), name, n, out);
}

}  // namespace

sqlite3_io_methods passthrough_io_methods() {
  return sqlite3_io_methods{3,
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
}

sqlite3_vfs wrapping_vfs(sqlite3_vfs* base, const char* name, int shim_file_size,
                         int (*open)(sqlite3_vfs*, sqlite3_filename, sqlite3_file*, int, int*)) {
  sqlite3_vfs vfs = *base;  // dlopen, randomness, sleep, time: the base's
  vfs.pNext = nullptr;
  vfs.pAppData = base;
  vfs.zName = name;
  vfs.szOsFile = shim_file_size + base->szOsFile;
  vfs.xOpen = open;
  vfs.xDelete = x_delete;
  vfs.xAccess = x_access;
  vfs.xFullPathname = x_full_pathname;
  return vfs;
}

int open_shim_file(sqlite3_vfs* vfs, sqlite3_filename name, ShimFile* file, int flags,
                   int* out_flags, const sqlite3_io_methods* methods) {
  sqlite3_vfs* base = wrapped_vfs(vfs);
  const int rc = base->xOpen(base, name, file->real, flags, out_flags);
  file->base.pMethods = (rc == SQLITE_OK && file->real->pMethods) ? methods : nullptr;
  return rc;
}

}  // namespace ichido::store::sqlite
