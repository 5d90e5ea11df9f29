// Building blocks for SQLite VFS shims that wrap another VFS file by file (the WAL write buffer,
// wal_buffer_vfs.h, and the tests' fault VFS, store/testing/fault_vfs.h), after SQLite's own
// "demovfs"/test_vfs pattern: the shim's file struct starts with ShimFile, the wrapped VFS's file
// lives in the memory right after the shim's struct, and every method the shim does not change
// passes straight through.
#pragma once

#include <sqlite3.h>

namespace ichido::store::sqlite {

// The head of every shim file struct (standard layout: a pointer to it is a sqlite3_file*).
struct ShimFile {
  sqlite3_file base;   // pMethods = the shim's methods, or nullptr when the open failed
  sqlite3_file* real;  // the wrapped VFS's file
};
inline sqlite3_file* shim_real(sqlite3_file* f) { return reinterpret_cast<ShimFile*>(f)->real; }

// A method table whose every method forwards to shim_real(f); a shim overrides what it needs.
sqlite3_io_methods passthrough_io_methods();

// A VFS like `base` (its dlopen, randomness, sleep and time), named `name` (which must outlive
// it), whose files are `shim_file_size` bytes of the shim's own followed by the base's file, and
// whose xOpen is `open`. xDelete, xAccess and xFullPathname go to `base`, found through
// pAppData (the shim must not change it). Not registered: pass it to sqlite3_vfs_register.
sqlite3_vfs wrapping_vfs(sqlite3_vfs* base, const char* name, int shim_file_size,
                         int (*open)(sqlite3_vfs*, sqlite3_filename, sqlite3_file*, int, int*));
// The VFS a wrapping_vfs wraps.
inline sqlite3_vfs* wrapped_vfs(sqlite3_vfs* vfs) {
  return static_cast<sqlite3_vfs*>(vfs->pAppData);
}

// Opens `name` on the wrapped VFS into file->real (which the caller points at the memory right
// after its own struct, inside what SQLite allocated for `file`). SQLite calls xClose exactly when
// pMethods is set, so `methods` is installed only when the wrapped VFS opened a file; returns
// the wrapped VFS's answer.
int open_shim_file(sqlite3_vfs* vfs, sqlite3_filename name, ShimFile* file, int flags,
                   int* out_flags, const sqlite3_io_methods* methods);

}  // namespace ichido::store::sqlite
