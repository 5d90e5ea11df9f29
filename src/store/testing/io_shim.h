// The registration the tests' I/O shims share (fault_vfs.h, power_loss_vfs.h): a VFS over the
// default one whose files pass every method through (store/sqlite/vfs_shim.h) except the three
// that change what reaches the disk.
#pragma once

#include <sqlite3.h>

#include "store/sqlite/vfs_shim.h"

namespace ichido::store_testing {

struct IoShim {
  const char* name;
  int file_size;  // the shim's own struct, before the default VFS's file
  int (*open)(sqlite3_vfs*, sqlite3_filename, sqlite3_file*, int, int*);
  int (*write)(sqlite3_file*, const void*, int, sqlite3_int64);
  int (*truncate)(sqlite3_file*, sqlite3_int64);
  int (*sync)(sqlite3_file*, int);
  int (*remove)(sqlite3_vfs*, const char*, int) = nullptr;  // xDelete; nullptr: the default's
};

// Fills `vfs` and `methods` (which must live as long as the process) and registers the VFS, not
// as the default. Call it once (std::call_once).
inline void register_io_shim(const IoShim& shim, sqlite3_vfs& vfs, sqlite3_io_methods& methods) {
  methods = store::sqlite::passthrough_io_methods();
  methods.xWrite = shim.write;
  methods.xTruncate = shim.truncate;
  methods.xSync = shim.sync;
  vfs =
      store::sqlite::wrapping_vfs(sqlite3_vfs_find(nullptr), shim.name, shim.file_size, shim.open);
  if (shim.remove) vfs.xDelete = shim.remove;
  sqlite3_vfs_register(&vfs, /*makeDflt=*/0);
}

}  // namespace ichido::store_testing
