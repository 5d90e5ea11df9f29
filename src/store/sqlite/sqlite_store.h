// SqliteStore: the embedded store (the default). One file, DIR/ichido.db, in WAL mode.
//
// Writes: one writer thread owns the only write connection and does group commit (after
// LevelDB's DBImpl::Write): it takes every job queued so far (up to max_batch), runs them one
// after another in one transaction, commits once — one fsync of the WAL for the whole batch
// (synchronous=FULL) — and only then calls every job's `finish`. So an answer is never sent
// before its change is on disk, and the fsync cost is shared by everyone who queued while the
// previous batch was being synced. A job that fails has normally written nothing (the rules
// decide before they write); when one did write, the batch is rolled back and run again with a
// SAVEPOINT around each job, so the failed job's writes are undone alone. That protocol is the
// transaction engine's (store/batch_engine.h), shared with the PostgreSQL store; this store
// provides its BatchTransaction (WriteTransaction: SQL, deferred writes, key-index undo marks).
// A lone client's write (the writer idle, nothing queued, the last batch alone, and the caller's
// thread serving one client: Options::caller_may_commit) is run as that batch of one
// on the caller's thread instead, the same way; only the thread differs (decision 141).
//
// Failures (each tested with a fault-injecting VFS, sqlite_fault_test.cc):
//   - A commit that fails with an I/O error (a failed write or fsync): every job of the batch
//     gets store_unavailable with details.outcome "unknown" (the WAL may or may not hold it after
//     a restart), and the store stops accepting writes for good — the fatal latch: after a failed
//     fsync the file's state is not known, and carrying on could acknowledge writes that are not
//     durable. check_health() then fails (/healthz 503), so a supervisor restarts the process.
//   - Disk full: the batch is rolled back (all its jobs 503, nothing changed) and the store keeps
//     serving; space may come back. Until a write succeeds again check_ready() fails (/readyz
//     503, /healthz stays 200), so that a load balancer stops sending writes here — or until,
//     a second or more after the failure, the file system has kNoSpaceRecovered more bytes free
//     than it had then: space came back, and a node nobody writes to any more says so.
//   - Damage (SQLITE_CORRUPT/NOTADB) on any connection: that call answers store_corrupt and the
//     store is unhealthy (/healthz and /readyz 503) until an operator acts.
//   - Read-only (file, directory or mount): writes answer 503 saying so, /readyz fails; a later
//     successful write clears it.
//   - A job that throws: that job alone answers internal (500); the batch goes on without it.
//   - A savepoint that cannot be rolled back or released: the whole batch fails (nothing of it is
//     acknowledged), never a partial effect.
// Identity and token high-water mark: data_dir.h (D1–D4).
//
// Checkpoints (decision 136): the writer's commits do not copy the WAL into the database file
// (SQLite's autocheckpoint would, every 1,000 WAL pages, inside a COMMIT: a few milliseconds of
// page writes and an fsync of the database file that every request of that batch, and of the
// batches queued behind it, waited for). A checkpointer thread with its own connection runs a
// PASSIVE checkpoint whenever the WAL has grown by `checkpoint_frames` since it was last woken;
// the writer's WAL hook wakes it. PASSIVE never blocks the writer or a reader. After each of its
// checkpoints the checkpointer syncs the database file, so that the pages it copied go to disk
// a little at a time, beside the writer (decision 136). A WAL starts over only when it is
// completely copied at the start of a write, which a checkpointer running beside a busy writer
// never sees; so once the WAL holds `restart_frames` frames the writer itself runs a PASSIVE
// checkpoint right after its commit: it copies and syncs what the checkpointer has not (fewer
// than `checkpoint_frames` frames while the checkpointer keeps up), and the next write starts
// the WAL over. A checkpoint that fails changes nothing that is committed (the WAL still holds
// every frame); damage found by one marks the store damaged as on any other connection. A failed
// fsync of the database file latches the store as a failed commit does (writes refused until a
// restart): the kernel may have dropped the pages it could not write, and a later sync that
// succeeds would let the WAL start over without them.
//
// WAL zeros (decision 132): a commit that lengthens the WAL syncs the file's new size and its
// newly allocated blocks besides its frames; one that writes over bytes the file already has
// syncs only its frames. The WAL lengthens commit by commit until it first starts over (at
// `restart_frames`, which a lightly used server takes days to reach), and a clean close deletes
// it. So whoever commits looks at how far the file runs past the WAL's furthest frame, and when
// less than half of `wal_zero_ahead` is left the writer, once no commit has come for 100 ms
// (`wal_zero_fill_quiet`), takes the WAL's write lock (other processes write this WAL too: the
// CLI's token commands), appends zeros from the file's real end up to `wal_zero_ahead` past the
// furthest frame and syncs them (wal_buffer_vfs.h). A steady stream of writes never waits for
// that, not even a lone client's: its WAL lengthens as before until a quiet moment comes; a write
// that comes during a fill waits for it (about a millisecond). A fill that finds the write lock
// held by another connection past the busy timeout is skipped, not failed: the next commit asks
// again.
//
// Reads: `readers` threads, each with its own connection, run read jobs in a deferred
// transaction (a consistent WAL snapshot that sees every acknowledged commit).
//
// Keys (decision 143): the writer finds an issued number's key through KeyIndex (key_index.h),
// the table in memory, and confirms it by the row; every keyed row gets a kseq and its slot
// before its batch commits, and a rollback (of the batch, or of one job's savepoint) removes the
// slots it inserted. Readers probe the same index. The index is made durable by snapshots to
// DIR/keys.idx, each named by the database (key_index_snapshot) once its file is on disk: a
// snapshot thread writes one after `key_snapshot_every` new keys (default max(1 M, 10 % of the
// keys)), and a clean close writes one. open() loads the file the database names and adds the
// rows after it, or rebuilds from every keyed row and says why (Options::on_notice).
//
// Lifecycle: open() → use → close() (drains queued jobs). A DIR/LOCK file held with flock keeps
// a second process from opening the same data directory.
// Thread-safety: all public methods are safe from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "ichido/clock.h"
#include "store/batch_engine.h"
#include "store/sqlite/data_dir.h"
#include "store/sqlite/db.h"
#include "store/sqlite/key_index.h"
#include "store/sqlite/schema.h"
#include "store/sqlite/sqlite_tables.h"
#include "store/table_store.h"

namespace ichido::store::sqlite {

struct Options {
  std::string dir;    // data directory; created (mode 0700) when missing
  bool init = false;  // start a new store where ichido.db is gone (data_dir.h D2)
  std::string vfs;    // SQLite VFS ("" = default; tests inject faults)
  // Readiness fails while the data directory's file system has less free space than this
  // (0: never; writes still fail cleanly when the disk is full).
  std::uint64_t min_free_disk = 0;
  // PRAGMA quick_check at open, before anything is written (data_dir.h check_before_writing),
  // when the database is at most this large (0: never).
  std::uint64_t quick_check_max_bytes = 256ull << 20;
  int readers = 2;                 // read threads / connections
  std::size_t max_batch = 1024;    // jobs per commit at most
  std::size_t max_queue = 100000;  // queued jobs beyond this are refused (store_unavailable)
  Clock* clock = &SystemClock::instance();
  // Checkpoints (above): the checkpointer is woken every `checkpoint_frames` new WAL frames; the
  // writer checkpoints itself once the WAL holds `restart_frames` frames (10,000 4 KiB pages:
  // a WAL of ≈ 40 MiB at most under sustained writes).
  int checkpoint_frames = 1000;
  int restart_frames = 10000;
  // Zeros kept ahead of the WAL's furthest frame (decision 132; "WAL zeros" above): when fewer
  // than half of this are left, the writer appends up to this many at its next idle moment.
  // 0: never (the WAL grows commit by commit).
  std::int64_t wal_zero_ahead = 1 << 20;
  // How long the writer must have seen no commit before it appends them (tests shorten it).
  std::chrono::milliseconds wal_zero_fill_quiet{100};
  // Told before the schema of an existing database is upgraded (one pass over the once records
  // for migration 11: ≈ 1.3 s per million on the first start of a newer ichido, decision 131),
  // so that a long start is not a silent one.
  OnUpgrade on_upgrade;
  // The key index (above): a snapshot after this many new keys (0: max(1 M, 10 % of the keys)).
  std::uint64_t key_snapshot_every = 0;
  // Told, as one line each, how the key index was opened and when a snapshot of it failed (the
  // server logs them). May be called from the snapshot thread.
  std::function<void(const std::string&)> on_notice;
  // Asked on the calling thread of a write: true when that thread has nothing else to do while
  // the write commits (an I/O thread serving one connection: http::this_thread_serves_one_client).
  // Then a write that finds the writer idle, nothing queued and the last batch alone runs on the
  // calling thread itself (the lone write, decision 141). nullptr: every write goes to the writer.
  bool (*caller_may_commit)() = nullptr;
};

// check_ready() after a failed write for lack of space: space came back once the file system has
// this many more bytes free than it had then (and a second has passed).
inline constexpr std::uint64_t kNoSpaceRecovered = 1u << 20;

class SqliteStore final : public TableStore {
  friend class SqliteStoreTestPeer;  // tests submit hand-made jobs

 public:
  static Result<std::unique_ptr<SqliteStore>> open(Options options);
  ~SqliteStore() override;

  Result<void> check_ready() override;
  Result<void> check_health() override;
  StoreStats stats() const override;
  void close() override;

  // This store's own figures; stats().own serves them on /metrics (names in stats()).
  struct OwnStats {
    std::uint64_t checkpoints = 0;         // WAL checkpoints done, by the checkpointer or writer
    std::uint64_t failed_checkpoints = 0;  // failed (nothing committed is lost: the WAL keeps it)
    std::uint64_t wal_bytes = 0;           // the WAL file's size now
    std::uint64_t caller_commits = 0;      // of the commits, lone writes run on their caller
    std::uint64_t keys = 0;                // key index: slots in use
    std::uint64_t key_memory_bytes = 0;    // key index: its table's slots
    std::uint64_t key_snapshots = 0;       // key index: snapshot files written and named
    std::uint64_t failed_key_snapshots = 0;
  };
  OwnStats own_stats() const;

  const std::string& db_path() const { return db_path_; }
  const Identity& identity() const { return identity_; }

 protected:
  void submit_write(Job job) override;
  void submit_read(Job job) override;

 private:
  explicit SqliteStore(Options options);
  Result<void> start();
  void writer_loop();
  void reader_loop(int index);
  void checkpointer_loop();
  void snapshotter_loop();
  Result<void> open_keys();
  // Writes the key index to keys.idx and names it in the database: through a write job, or on
  // the write connection itself when `on_write_connection` (close(), the writer gone).
  Result<void> snapshot_keys(bool on_write_connection);
  void notice(const std::string& line) const {
    if (opt_.on_notice) opt_.on_notice(line);
  }
  // The writer connection's WAL hook (sqlite3_wal_hook), after every commit: `frames` in the WAL.
  static int on_wal_commit(void* self, sqlite3* db, const char* name, int frames);
  void wake_checkpointer(int frames);  // the writer's, from on_wal_commit
  // After a checkpoint on `db` that returned `rc`: a failed fsync of the database file latches
  // the store (see "Checkpoints" above); anything else but SQLITE_BUSY is counted.
  void checkpoint_failed(Db& db, int rc);
  // WAL zeros (decision 132), by the write connection's owner: whether the WAL's file has fewer
  // than wal_zero_ahead / 2 bytes past its furthest frame; and appending them (the writer, idle).
  bool wal_wants_zeros();
  void fill_wal_ahead();
  // The write connection's BatchTransaction (batch_engine.h); sqlite_store.cc.
  class WriteTransaction;
  // Runs `batch` in one transaction through the engine and commits it; returns what every job
  // is to be answered. Finishes no job (BatchResult::finish, once the connection is free).
  BatchResult commit_batch(std::vector<Job>& batch);
  Result<void> reserve_tokens();  // data_dir.h D4, before COMMIT
  // After a failed write whose SQLite code is `rc`: lack of space (SQLITE_FULL) makes the store
  // not ready until a write succeeds (see "Disk full" above).
  void note_failed_write(int rc);

  // Constant after construction.
  const Options opt_;
  std::string db_path_;
  Identity identity_;  // as written at open; the writer raises token_high_water
  int lock_fd_ = -1;
  std::int64_t reserved_token_ = 0;  // the writer's: tokens up to this are covered by ichido.id
  std::int64_t token_floor_ = 0;     // the writer's: D4 still to apply (opened read-only)

  Mutex mu_;
  CondVar write_cv_;  // the writer waits here (with mu_)
  CondVar read_cv_;   // readers wait here (with mu_)
  std::deque<Job> write_queue_ GUARDED_BY(mu_);
  std::deque<Job> read_queue_ GUARDED_BY(mu_);
  bool closing_ GUARDED_BY(mu_) = false;
  // The write connection and what goes with it (write_db_, cache_, the WAL hook's
  // count) belong to whoever set this: the writer thread for a batch, or a caller
  // running a lone write itself (submit_write). Set and cleared under mu_, which orders one
  // owner's use before the next one's.
  bool batch_running_ GUARDED_BY(mu_) = false;
  // The last batch held one job and nothing was queued when it ended: a lone client.
  bool lone_ GUARDED_BY(mu_) = true;
  // The last commit left the WAL short of zeros ahead: the writer appends them once idle.
  bool zeros_wanted_ GUARDED_BY(mu_) = false;
  bool zero_fill_off_ = false;  // the write connection owner's: a fill failed, none again
  CondVar checkpoint_cv_;       // the checkpointer waits here (with mu_)
  bool checkpoint_wanted_ GUARDED_BY(mu_) = false;  // the writer's wake-up call
  int woken_at_frames_ = 0;                         // the writer's: WAL size at the last wake-up
  // The writer's: the WAL's size after the last commit (a smaller one: it started over).
  int last_wal_frames_ = 0;

  std::atomic<bool> failed_{false};   // a commit failed with an I/O error: no more writes
  std::atomic<bool> corrupt_{false};  // some connection found damage
  std::atomic<bool> read_only_{false};
  // A write failed for lack of space (SQLITE_FULL) and none has succeeded since: /readyz says
  // not ready. When, in the store's clock (ms), and how many bytes the file system had free
  // then; check_ready() also takes space that came back as ready (no_space_ready).
  std::atomic<bool> no_space_{false};
  std::atomic<TimeMs> no_space_at_{0};
  std::atomic<std::uint64_t> no_space_free_{0};
  std::atomic<std::uint64_t> commits_{0};
  std::atomic<std::uint64_t> committed_commands_{0};
  std::atomic<std::uint64_t> failed_commits_{0};
  std::atomic<std::uint64_t> isolated_batches_{0};     // batches re-run with a savepoint per job
  std::atomic<std::uint64_t> commit_us_{0};            // time spent in COMMIT (fsync), µs
  std::atomic<std::uint64_t> caller_commits_{0};       // of commits_, on a caller's thread
  std::atomic<std::uint64_t> checkpoints_{0};          // by the checkpointer, done
  std::atomic<std::uint64_t> writer_checkpoints_{0};   // by the writer, whole WAL copied
  std::atomic<std::uint64_t> failed_checkpoints_{0};   // either, failed (not busy)
  std::atomic<std::uint64_t> wal_zero_fills_{0};       // zeros appended to the WAL, times
  std::atomic<std::uint64_t> wal_zero_fill_skips_{0};  // fills skipped: write lock not taken

  // The key index (decision 143). keys_ is set in start() and lives until the store does.
  std::unique_ptr<KeyIndex> keys_;
  std::string keys_path_;                         // DIR/keys.idx
  std::atomic<std::uint64_t> committed_kseq_{0};  // the key sequence as last committed
  // The last_kseq of the newest snapshot started (or loaded), and of the newest the database
  // names (UINT64_MAX: none names the table as it is, e.g. after a rebuild).
  std::atomic<std::uint64_t> snapshot_started_kseq_{0};
  std::atomic<std::uint64_t> snapshot_named_kseq_{UINT64_MAX};
  std::atomic<std::uint64_t> key_snapshots_{0};
  std::atomic<std::uint64_t> failed_key_snapshots_{0};
  CondVar snapshot_cv_;                           // the snapshot thread waits here (with mu_)
  bool snapshot_wanted_ GUARDED_BY(mu_) = false;  // the writer's (or start()'s) call
  std::thread snapshotter_;

  std::unique_ptr<Db> write_db_;               // batch_running_'s owner's once started
  WriterCache cache_;                          // the same; cleared on every rollback
  std::vector<std::unique_ptr<Db>> read_dbs_;  // one per reader thread
  std::unique_ptr<Db> checkpoint_db_;          // the checkpointer thread's
  std::thread checkpointer_;
  std::thread writer_;
  std::vector<std::thread> readers_;
  std::once_flag close_once_;
};

}  // namespace ichido::store::sqlite
