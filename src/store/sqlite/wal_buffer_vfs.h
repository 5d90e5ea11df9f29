// A SQLite VFS shim that turns the many small writes of one WAL commit into a few large ones
// (decision 132).
//
// SQLite appends a commit to the WAL as two pwrite calls per page (a 24-byte frame header, then
// the page), then fsyncs. Under group commit a batch dirties tens of pages, so the writer thread
// spent more time entering the kernel for those writes than SQLite spent deciding them. This
// shim wraps another VFS (the default one, or a test's fault VFS) and, for files opened as a
// WAL only, keeps consecutive writes in memory and hands them to the wrapped VFS in a few large
// writes:
//
// - xWrite appends to the buffer when the write starts exactly where the buffer ends (the WAL is
//   written front to back), or copies into it when it rewrites bytes the buffer holds (a frame
//   written twice in one transaction); anything else first writes the buffer out. A buffer
//   never grows past kMaxWalBuffer: before that it is written out. A write-out hands the
//   buffer to the wrapped VFS in pieces of kMaxWalWrite (SQLite's unix VFS refuses a single
//   write of 128 KiB or more), so a commit of N pages costs about N / 16 writes instead of 2N.
// - Every other call that could observe or depend on the file's bytes writes the buffer out
//   first and then passes through: xSync (so a commit is durable exactly as before: SQLite syncs
//   the WAL before it publishes the commit in the wal-index, and only then may another
//   connection read those frames), xRead, xTruncate, xFileSize, xFileControl, xClose.
// - A failed write-out is reported by the call that caused it (xSync reports a failed write as
//   the write's error, never as success) and the buffer is dropped: the transaction fails, and
//   SQLite writes its frames again when it retries.
//
// Precondition: every connection that writes through it runs with synchronous=FULL (Db::open
// sets it), so every commit ends with xSync on the WAL. With synchronous=NORMAL a commit would
// publish frames that are still in this buffer, and other connections would read stale bytes.
//
// Files that are not a WAL pass straight through. Thread-safety: as for any SQLite file, one
// connection uses a file at a time; registration is thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace ichido::store::sqlite {

// The name of the shim over the VFS named `base` ("" = the default VFS), registered on first
// use (not as the default). Returns "" when `base` is not a registered VFS.
std::string wal_buffer_vfs(const std::string& base);

// Counters over every shim, for tests and benchmarks.
struct WalBufferStats {
  std::uint64_t writes_buffered = 0;  // xWrite calls to a WAL kept in a buffer
  std::uint64_t writes_out = 0;       // writes handed to the wrapped VFS for those files
};
WalBufferStats wal_buffer_stats();

constexpr std::int64_t kMaxWalBuffer = 4 << 20;  // bytes kept at most before a write-out
constexpr std::int64_t kMaxWalWrite = 64 << 10;  // bytes per write handed to the wrapped VFS

}  // namespace ichido::store::sqlite
