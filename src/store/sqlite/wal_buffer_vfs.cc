#include "store/sqlite/wal_buffer_vfs.h"

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "store/sqlite/vfs_shim.h"

namespace ichido::store::sqlite {
namespace {

std::atomic<std::uint64_t> g_buffered{0};
std::atomic<std::uint64_t> g_out{0};
std::atomic<std::uint64_t> g_zeroed{0};

// One registered shim. Never freed (SQLite keeps pointers to registered VFSes for the life of
// the process).
struct Shim {
  sqlite3_vfs vfs{};
  std::string name;
};

struct File {
  ShimFile head;
  bool wal;
  std::vector<char>* buf;  // wal only: the bytes not yet written, from offset `start`
  sqlite3_int64 start;
  // WAL only, as this handle has seen the file: the end of the furthest byte it ever wrote, and
  // the file's size (at least that; more where the file was longer when opened, or zero-filled).
  sqlite3_int64 written_end;
  sqlite3_int64 file_end;
};

sqlite3_io_methods g_methods;

File* as(sqlite3_file* f) { return reinterpret_cast<File*>(f); }
sqlite3_file* real(sqlite3_file* f) { return shim_real(f); }

// Records that bytes up to `end` were written through `f`.
void wrote(File* f, sqlite3_int64 end) {
  f->written_end = std::max(f->written_end, end);
  f->file_end = std::max(f->file_end, end);
}

// Writes the buffer out and empties it; on failure it is dropped too. In pieces of at most
// kMaxWalWrite bytes: SQLite's unix VFS cannot write 128 KiB or more in one call (it masks the
// length to 17 bits and reports a short write as SQLITE_FULL).
int flush(File* f) {
  if (!f->wal || f->buf->empty()) return SQLITE_OK;
  int rc = SQLITE_OK;
  const auto size = static_cast<sqlite3_int64>(f->buf->size());
  for (sqlite3_int64 done = 0; done < size && rc == SQLITE_OK;) {
    const auto n = std::min<sqlite3_int64>(size - done, kMaxWalWrite);
    g_out.fetch_add(1, std::memory_order_relaxed);
    rc = f->head.real->pMethods->xWrite(f->head.real, f->buf->data() + done, static_cast<int>(n),
                                        f->start + done);
    done += n;
    if (rc == SQLITE_OK) wrote(f, f->start + done);
  }
  f->buf->clear();
  return rc;
}

int x_close(sqlite3_file* file) {
  File* f = as(file);
  const int flushed = flush(f);
  const int rc = f->head.real->pMethods->xClose(f->head.real);
  delete f->buf;
  f->buf = nullptr;
  return flushed != SQLITE_OK ? flushed : rc;
}
int x_read(sqlite3_file* f, void* p, int n, sqlite3_int64 off) {
  if (int rc = flush(as(f)); rc != SQLITE_OK) return rc;
  return real(f)->pMethods->xRead(real(f), p, n, off);
}
int x_write(sqlite3_file* file, const void* p, int n, sqlite3_int64 off) {
  File* f = as(file);
  if (!f->wal) return f->head.real->pMethods->xWrite(f->head.real, p, n, off);
  auto& b = *f->buf;
  const auto end = f->start + static_cast<sqlite3_int64>(b.size());
  if (!b.empty() && off >= f->start && off + n <= end) {
    // A frame rewritten in place (same transaction): the buffer holds it.
    std::memcpy(b.data() + (off - f->start), p, static_cast<std::size_t>(n));
    g_buffered.fetch_add(1, std::memory_order_relaxed);
    return SQLITE_OK;
  }
  const bool appends = b.empty() || off == end;
  if (!appends || static_cast<sqlite3_int64>(b.size()) + n > kMaxWalBuffer) {
    if (int rc = flush(f); rc != SQLITE_OK) return rc;
  }
  if (n > kMaxWalWrite) {  // not a WAL frame (never larger than 64 KiB + 24): as it comes
    g_out.fetch_add(1, std::memory_order_relaxed);
    const int rc = f->head.real->pMethods->xWrite(f->head.real, p, n, off);
    if (rc == SQLITE_OK) wrote(f, off + n);
    return rc;
  }
  if (b.empty()) f->start = off;
  const auto* c = static_cast<const char*>(p);
  b.insert(b.end(), c, c + n);
  g_buffered.fetch_add(1, std::memory_order_relaxed);
  return SQLITE_OK;
}
int x_truncate(sqlite3_file* file, sqlite3_int64 size) {
  File* f = as(file);
  if (int rc = flush(f); rc != SQLITE_OK) return rc;
  const int rc = real(file)->pMethods->xTruncate(real(file), size);
  if (f->wal) {
    // Whether or not it failed, no byte past `size` is known to be there any more.
    f->file_end = std::min(f->file_end, size);
    f->written_end = std::min(f->written_end, size);
  }
  return rc;
}
int x_sync(sqlite3_file* f, int flags) {
  if (int rc = flush(as(f)); rc != SQLITE_OK) return rc;
  return real(f)->pMethods->xSync(real(f), flags);
}
int x_file_size(sqlite3_file* f, sqlite3_int64* size) {
  if (int rc = flush(as(f)); rc != SQLITE_OK) return rc;
  return real(f)->pMethods->xFileSize(real(f), size);
}
int x_file_control(sqlite3_file* f, int op, void* arg) {
  if (int rc = flush(as(f)); rc != SQLITE_OK) return rc;
  return real(f)->pMethods->xFileControl(real(f), op, arg);
}
int x_fetch(sqlite3_file* f, sqlite3_int64 off, int n, void** p) {
  if (int rc = flush(as(f)); rc != SQLITE_OK) return rc;
  return real(f)->pMethods->xFetch(real(f), off, n, p);
}
int x_open(sqlite3_vfs* vfs, sqlite3_filename name, sqlite3_file* file, int flags, int* out_flags) {
  auto* f = reinterpret_cast<File*>(file);
  f->head.real = reinterpret_cast<sqlite3_file*>(f + 1);
  f->wal = (flags & SQLITE_OPEN_WAL) != 0;
  f->buf = nullptr;
  f->start = 0;
  f->written_end = 0;
  f->file_end = 0;
  const int rc = open_shim_file(vfs, name, &f->head, flags, out_flags, &g_methods);
  if (rc != SQLITE_OK || !f->head.base.pMethods || !f->wal) return rc;
  sqlite3_int64 size = 0;
  if (f->head.real->pMethods->xFileSize(f->head.real, &size) == SQLITE_OK) f->file_end = size;
  f->buf = new (std::nothrow) std::vector<char>();
  if (!f->buf) {
    f->head.real->pMethods->xClose(f->head.real);
    f->head.base.pMethods = nullptr;
    return SQLITE_NOMEM;
  }
  return rc;
}

// The shim's WAL file of `db`'s main database, or nullptr (not opened through a shim, or no WAL
// open yet).
File* wal_of(sqlite3* db) {
  sqlite3_file* p = nullptr;
  if (sqlite3_file_control(db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &p) != SQLITE_OK || !p ||
      p->pMethods != &g_methods) {
    return nullptr;
  }
  File* f = as(p);
  return f->wal ? f : nullptr;
}

}  // namespace

std::optional<WalExtent> wal_extent(sqlite3* db) {
  const File* f = wal_of(db);
  if (!f) return std::nullopt;
  return WalExtent{f->written_end, f->file_end};
}

int wal_zero_fill(sqlite3* db, std::int64_t until) {
  File* f = wal_of(db);
  if (!f) return SQLITE_MISUSE;
  if (int rc = flush(f); rc != SQLITE_OK) return rc;
  // The file's real end: another connection (another process's, too) may have lengthened the
  // WAL, or truncated it, since this handle last wrote. Zeros go only past that end.
  sqlite3_file* r = f->head.real;
  sqlite3_int64 size = 0;
  if (int rc = r->pMethods->xFileSize(r, &size); rc != SQLITE_OK) return rc;
  f->file_end = size;
  f->written_end = std::min(f->written_end, size);
  if (until <= size) return SQLITE_OK;
  static const std::vector<char> zeros(kMaxWalWrite, 0);
  const sqlite3_int64 from = size;
  for (sqlite3_int64 off = from; off < until;) {
    const auto n = std::min<sqlite3_int64>(until - off, kMaxWalWrite);
    if (int rc = r->pMethods->xWrite(r, zeros.data(), static_cast<int>(n), off); rc != SQLITE_OK) {
      // Some of the zeros may be in the file: it is as long as the file system says.
      sqlite3_int64 now = 0;
      if (r->pMethods->xFileSize(r, &now) == SQLITE_OK) f->file_end = std::max(f->file_end, now);
      return rc;
    }
    off += n;
    f->file_end = off;
  }
  g_zeroed.fetch_add(static_cast<std::uint64_t>(until - from), std::memory_order_relaxed);
  return r->pMethods->xSync(r, SQLITE_SYNC_NORMAL);
}

std::string wal_buffer_vfs(const std::string& base_name) {
  static std::mutex mu;
  static std::map<std::string, Shim*> shims;  // by base name
  std::lock_guard lk(mu);
  if (auto it = shims.find(base_name); it != shims.end()) return it->second->name;
  sqlite3_vfs* base = sqlite3_vfs_find(base_name.empty() ? nullptr : base_name.c_str());
  if (!base) return "";
  static std::once_flag methods_once;
  std::call_once(methods_once, [] {
    g_methods = passthrough_io_methods();
    g_methods.xClose = x_close;
    g_methods.xRead = x_read;
    g_methods.xWrite = x_write;
    g_methods.xTruncate = x_truncate;
    g_methods.xSync = x_sync;
    g_methods.xFileSize = x_file_size;
    g_methods.xFileControl = x_file_control;
    g_methods.xFetch = x_fetch;
  });
  auto* shim = new Shim();
  shim->name = "ichido-walbuf:" + std::string(base->zName);
  shim->vfs = wrapping_vfs(base, shim->name.c_str(), static_cast<int>(sizeof(File)), x_open);
  if (sqlite3_vfs_register(&shim->vfs, /*makeDflt=*/0) != SQLITE_OK) {
    delete shim;
    return "";
  }
  shims.emplace(base_name, shim);
  return shim->name;
}

WalBufferStats wal_buffer_stats() {
  return {g_buffered.load(std::memory_order_relaxed), g_out.load(std::memory_order_relaxed),
          g_zeroed.load(std::memory_order_relaxed)};
}

}  // namespace ichido::store::sqlite
