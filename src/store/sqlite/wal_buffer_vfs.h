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
//
// Zero-filling ahead (decision 132). A commit that makes the WAL longer costs its fdatasync more
// than one that writes over bytes the file already has: the file system must also write the new
// size and the blocks it allocated (and, on a journaling file system, commit its journal). A WAL
// grows until it starts over at the writer's checkpoint (≈ 40 MiB, sqlite_store.h), which a
// lightly used server takes days to reach, and SQLite deletes it at every clean close. So the
// store asks the shim (wal_extent, wal_zero_fill) to append zeros past the file's end and sync
// them while the writer is idle and holds the WAL's write lock, as PostgreSQL fills each new WAL
// segment with zeros before it uses it (wal_init_zero); the commits after that write over allocated
// blocks. Zeros past the last frame are what SQLite's recovery expects anyway: it reads frames
// until one whose salt and checksum do not match, as it does over a WAL that started over.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>

namespace ichido::store::sqlite {

// The name of the shim over the VFS named `base` ("" = the default VFS), registered on first
// use (not as the default). Returns "" when `base` is not a registered VFS.
std::string wal_buffer_vfs(const std::string& base);

// Counters over every shim, for tests and benchmarks.
struct WalBufferStats {
  std::uint64_t writes_buffered = 0;  // xWrite calls to a WAL kept in a buffer
  std::uint64_t writes_out = 0;       // writes handed to the wrapped VFS for those files
  std::uint64_t bytes_zeroed = 0;     // zeros appended by wal_zero_fill
};

// The WAL of the connection `db` (its main database) as its shim file has seen it: the end of
// the furthest byte written through it, and the file's length (at least that). nullopt when `db`
// was not opened through a shim or has no WAL open.
struct WalExtent {
  std::int64_t written_end = 0;
  std::int64_t file_end = 0;
};
std::optional<WalExtent> wal_extent(sqlite3* db);

// Appends zeros to the WAL of `db` from the file's real end (asked of the file system: another
// connection may have lengthened it) until it is `until` bytes long, through the wrapped VFS (so
// the tests' fault VFS sees them), then syncs it as a commit would. Does nothing when the file is
// that long already. Returns SQLite's code: SQLITE_MISUSE when wal_extent() would be nullopt; on
// a failed write, the zeros written before it stay (wal_extent counts them).
// Precondition: `db` holds the WAL's write lock (BEGIN IMMEDIATE) and has written nothing in
// that transaction, so that no connection of any process writes the WAL meanwhile.
int wal_zero_fill(sqlite3* db, std::int64_t until);
WalBufferStats wal_buffer_stats();

constexpr std::int64_t kMaxWalBuffer = 4 << 20;  // bytes kept at most before a write-out
constexpr std::int64_t kMaxWalWrite = 64 << 10;  // bytes per write handed to the wrapped VFS

}  // namespace ichido::store::sqlite
