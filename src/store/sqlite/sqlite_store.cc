#include "store/sqlite/sqlite_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <future>
#include <optional>
#include <random>

#include "base/thread_name.h"
#include "store/batch_engine.h"
#include "store/sqlite/data_dir.h"
#include "store/sqlite/schema.h"
#include "store/sqlite/sqlite_tables.h"
#include "store/sqlite/wal_buffer_vfs.h"

namespace ichido::store::sqlite {
namespace {

Error unavailable(const std::string& why) {
  return Error(errc::store_unavailable,
               "The store is unavailable (" + why + "); nothing was changed, retry later.");
}

// True for failures after which the database file's durable state is unknown.
bool is_fatal(int rc) {
  const int primary = rc & 0xff;
  return primary == SQLITE_IOERR || primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB ||
         primary == SQLITE_CANTOPEN;
}

// A snapshot's id: random, so that a file is never taken for another store's or another
// time's by chance (decision 143 §6). Positive as an SQLite INTEGER; never 0 ("none").
std::uint64_t new_snapshot_id() {
  std::random_device rd;
  const std::uint64_t id = (std::uint64_t{rd()} << 32 | rd()) & ((std::uint64_t{1} << 62) - 1);
  return id == 0 ? 1 : id;
}

std::string millis_since(std::chrono::steady_clock::time_point t) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - t)
                            .count()) +
         " ms";
}

}  // namespace

SqliteStore::SqliteStore(Options options) : opt_(std::move(options)) {}

Result<std::unique_ptr<SqliteStore>> SqliteStore::open(Options options) {
  std::unique_ptr<SqliteStore> s(new SqliteStore(std::move(options)));
  auto started = s->start();
  if (!started.ok()) return std::move(started).error();
  return s;
}

Result<void> SqliteStore::start() {
  auto startup = [](std::string msg) { return Error(errc::store_unavailable, std::move(msg)); };
  if (auto r = check_sqlite_library(sqlite3_libversion_number(), sqlite3_libversion()); !r.ok()) {
    return r;
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(opt_.dir, ec)) {
    std::filesystem::create_directories(opt_.dir, ec);
    if (ec) return startup("cannot create the data directory " + opt_.dir + ": " + ec.message());
    ::chmod(opt_.dir.c_str(), 0700);
  }
  const std::string lock_path = opt_.dir + "/LOCK";
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd_ < 0) return startup("cannot open " + lock_path + ": " + std::strerror(errno));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    return startup("the data directory " + opt_.dir +
                   " is in use by another ichido process (it holds " + lock_path + ")");
  }
  db_path_ = db_path_of(opt_.dir);
  // Damage first, before anything is written (data_dir.h): a damaged store is left as found.
  ICHIDO_TRY(check_before_writing(opt_.dir, opt_.quick_check_max_bytes, opt_.vfs));
  write_db_ = std::make_unique<Db>();
  OpenDirOptions dir_opt;
  dir_opt.init = opt_.init;
  dir_opt.vfs = opt_.vfs;
  dir_opt.on_upgrade = opt_.on_upgrade;
  auto opened = open_data_dir(*write_db_, opt_.dir, dir_opt, opt_.clock->now_ms());
  if (!opened.ok()) return std::move(opened).error();
  identity_ = opened->identity;
  reserved_token_ = opened->identity.token_high_water;
  token_floor_ = opened->read_only ? opened->token_floor : 0;
  write_db_->set_on_damage([this] { corrupt_.store(true); });
  read_only_.store(sqlite3_db_readonly(write_db_->raw(), "main") == 1);
  ICHIDO_TRY(open_keys());
  for (int i = 0; i < opt_.readers; ++i) {
    auto db = std::make_unique<Db>();
    if (auto r = db->open(db_path_, /*create=*/false, opt_.vfs); !r.ok()) {
      return startup("cannot open " + db_path_ + " for reading: " + db->describe());
    }
    db->set_on_damage([this] { corrupt_.store(true); });
    read_dbs_.push_back(std::move(db));
  }
  checkpoint_db_ = std::make_unique<Db>();
  if (auto r = checkpoint_db_->open(db_path_, /*create=*/false, opt_.vfs); !r.ok()) {
    return startup("cannot open " + db_path_ + " for checkpoints: " + checkpoint_db_->describe());
  }
  checkpoint_db_->set_on_damage([this] { corrupt_.store(true); });
  // Replaces SQLite's autocheckpoint on the writer connection (sqlite3_wal_hook documents that).
  sqlite3_wal_hook(write_db_->raw(), &SqliteStore::on_wal_commit, this);
  checkpointer_ = named_thread("ichido-ckpt", [this] { checkpointer_loop(); });
  snapshotter_ = named_thread("ichido-keysnap", [this] { snapshotter_loop(); });
  writer_ = named_thread("ichido-writer", [this] { writer_loop(); });
  for (int i = 0; i < opt_.readers; ++i) {
    readers_.push_back(
        named_thread("ichido-read-" + std::to_string(i), [this, i] { reader_loop(i); }));
  }
  return {};
}

SqliteStore::~SqliteStore() { close(); }

void SqliteStore::close() {
  std::call_once(close_once_, [this] {
    {
      MutexLock lk(mu_);
      closing_ = true;
    }
    write_cv_.notify_all();
    read_cv_.notify_all();
    if (writer_.joinable()) writer_.join();
    checkpoint_cv_.notify_all();  // after the writer: it may still have woken the checkpointer
    if (checkpointer_.joinable()) checkpointer_.join();
    snapshot_cv_.notify_all();
    if (snapshotter_.joinable()) snapshotter_.join();
    for (auto& t : readers_) t.join();
    readers_.clear();
    const bool healthy = write_db_ && !failed_.load() && !corrupt_.load() && !read_only_.load();
    if (healthy && keys_ && snapshot_named_kseq_.load() != committed_kseq_.load()) {
      // A clean close leaves a snapshot of the whole table, so the next start reads it and
      // catches up nothing. A failure only costs the next start a catch-up or a rebuild.
      if (auto r = snapshot_keys(/*on_write_connection=*/true); !r.ok()) {
        notice("key index: no snapshot at close (" + r.error().message +
               "); the next start adds the newer keys from the database");
      }
    }
    if (healthy) {
      // A clean close checkpoints the WAL into the main file, so the next start reads less.
      // Not after a failed write or damage: then the next open's recovery decides from what is
      // on disk, and nothing more is written now.
      (void)write_db_->exec("PRAGMA wal_checkpoint(TRUNCATE)", "checkpoint");
    }
    if (failed_.load() || corrupt_.load()) {
      // Nor the checkpoint SQLite makes when the last connection closes: the next open's
      // recovery decides from what is on disk.
      for (auto& db : read_dbs_) {
        sqlite3_db_config(db->raw(), SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
      }
      if (checkpoint_db_) {
        sqlite3_db_config(checkpoint_db_->raw(), SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
      }
      if (write_db_) {
        sqlite3_db_config(write_db_->raw(), SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
      }
    }
    read_dbs_.clear();
    checkpoint_db_.reset();
    write_db_.reset();
    if (lock_fd_ >= 0) ::close(lock_fd_);
    lock_fd_ = -1;
  });
}

void SqliteStore::submit_write(Job job) {
  const Error* refuse = nullptr;
  static const Error closed = unavailable("the server is shutting down");
  static const Error full = unavailable("too many queued writes");
  static const Error failed = unavailable(
      "an earlier write failed with an I/O error; restart "
      "the server after checking the disk");
  bool run_here = false;
  {
    MutexLock lk(mu_);
    if (closing_) {
      refuse = &closed;
    } else if (failed_.load()) {
      refuse = &failed;
    } else if (lone_ && !batch_running_ && write_queue_.empty() && opt_.caller_may_commit &&
               opt_.caller_may_commit()) {
      batch_running_ = true;  // the write connection is this thread's until the batch is done
      run_here = true;
    } else if (write_queue_.size() >= opt_.max_queue) {
      refuse = &full;
    } else {
      write_queue_.push_back(std::move(job));
    }
  }
  if (refuse) {
    job.finish(refuse);
    return;
  }
  if (run_here) {
    // A lone write on the caller's thread (decision 141): the writer is idle and nothing is
    // queued, so this batch of one is what the writer would run next anyway. Whatever is queued
    // meanwhile waits for it, as it would wait for the writer's batch, and then goes to the
    // writer — which also ends the lone mode until the writer sees a batch of one again.
    std::vector<Job> batch;
    batch.push_back(std::move(job));
    const BatchResult outcome = commit_batch(batch);
    if (outcome.committed) caller_commits_.fetch_add(1);
    const bool zeros = outcome.committed && wal_wants_zeros();
    bool wake = false;
    {
      MutexLock lk(mu_);
      batch_running_ = false;
      lone_ = write_queue_.empty();
      wake = !lone_ || closing_ || (zeros && !zeros_wanted_);
      zeros_wanted_ = zeros_wanted_ || zeros;
    }
    if (wake) write_cv_.notify_one();
    outcome.finish(batch);
    return;
  }
  write_cv_.notify_one();
}

void SqliteStore::submit_read(Job job) {
  static const Error closed = unavailable("the server is shutting down");
  static const Error full = unavailable("too many queued reads");
  const Error* refuse = nullptr;
  {
    MutexLock lk(mu_);
    if (closing_)
      refuse = &closed;
    else if (read_queue_.size() >= opt_.max_queue)
      refuse = &full;
    else
      read_queue_.push_back(std::move(job));
  }
  if (refuse) {
    job.finish(refuse);
    return;
  }
  read_cv_.notify_one();
}

void SqliteStore::writer_loop() {
  std::vector<Job> batch;
  std::size_t last_batch = 0;
  for (;;) {
    bool fill = false;
    {
      MutexLock lk(mu_);
      for (;;) {
        if (!batch_running_ && (!write_queue_.empty() || closing_)) break;
        if (!zeros_wanted_) {
          write_cv_.wait(mu_);
          continue;
        }
        // The WAL wants zeros ahead of it (decision 132). They are appended only once a whole
        // wal_zero_fill_quiet has passed without a commit and with nothing queued, so that a
        // steady stream of writes (even a lone client's, on its own thread) never waits for
        // them; the write connection is the writer's meanwhile, and a write that comes then
        // queues for the next batch.
        const auto seen = commits_.load();
        const auto until = std::chrono::steady_clock::now() +
                           std::max<std::chrono::milliseconds>(opt_.wal_zero_fill_quiet,
                                                               std::chrono::milliseconds(1));
        bool in_time = true;
        while (in_time && (batch_running_ || (write_queue_.empty() && !closing_))) {
          in_time = write_cv_.wait_until(mu_, until);
        }
        if (!in_time && !batch_running_ && write_queue_.empty() && !closing_ &&
            commits_.load() == seen) {
          fill = true;
          break;
        }
      }
      if (!fill && write_queue_.empty()) return;  // closing and drained
      zeros_wanted_ = false;                      // asked again after the batch or the fill
      while (!write_queue_.empty() && batch.size() < opt_.max_batch) {
        batch.push_back(std::move(write_queue_.front()));
        write_queue_.pop_front();
      }
      batch_running_ = true;
    }
    if (fill) {
      fill_wal_ahead();
      MutexLock lk(mu_);
      batch_running_ = false;
      continue;
    }
    const BatchResult outcome = commit_batch(batch);
    last_batch = batch.size();
    const bool zeros = outcome.committed && wal_wants_zeros();
    {
      MutexLock lk(mu_);
      batch_running_ = false;
      lone_ = last_batch == 1 && write_queue_.empty();
      zeros_wanted_ = zeros_wanted_ || zeros;
    }
    outcome.finish(batch);
    batch.clear();
  }
}

// The write connection's side of a batch's transaction (batch_engine.h): BEGIN IMMEDIATE, a
// SAVEPOINT per job when isolated, the key index's undo marks and the token marks that go with
// them, the period and sequence writes an optimistic attempt defers (decision 130), and COMMIT
// with the fatal latch. One lives for one commit_batch, on the stack of the write connection's
// owner (batch_running_), and uses the store's writer-owned state (write_db_, cache_, keys_).
class SqliteStore::WriteTransaction final : public BatchTransaction {
 public:
  // `now`: every attempt at the batch runs with it.
  WriteTransaction(SqliteStore& s, TimeMs now) : s_(s), db_(*s.write_db_), now_(now) {}

  Began begin(BatchMode mode, std::span<Job> /*batch*/, JobErrors& /*job_errors*/) override {
    if (auto r = step("BEGIN IMMEDIATE", "begin a transaction"); !r.ok()) {
      return {give_up(r.error())};
    }
    s_.keys_->begin_batch();  // ended by commit() or by any rollback
    if (s_.token_floor_ > 0) {
      // Opened read-only: D4's move of the sequence comes with the first write (data_dir.h).
      if (auto r = raise_token_sequence(db_, s_.token_floor_); !r.ok()) {
        return {give_up(r.error())};
      }
      s_.cache_.clear();  // the next token is drawn above the raised row
    }
    tables_.emplace(db_, &s_.cache_, s_.keys_.get());
    // Optimistic attempts defer period and token sequence writes to flush() (decision 130);
    // isolated ones write through, so that a savepoint rolled back takes its job's writes with
    // it. The sequence is read again in every attempt (after a D4 raise above, too).
    s_.cache_.start_batch();
    s_.cache_.defer_writes = mode == BatchMode::optimistic;
    return {TxStep::ok(), now_};
  }

  Tables& tables() override { return *tables_; }

  // Rows changed plus writes deferred (period rows, token draws).
  std::uint64_t writes() override {
    return static_cast<std::uint64_t>(sqlite3_total_changes64(db_.raw())) +
           s_.cache_.deferred_writes;
  }

  TxStep savepoint() override {
    key_mark_ = s_.keys_->undo_mark();
    if (auto r = step("SAVEPOINT job", "open a savepoint"); !r.ok()) return give_up(r.error());
    return TxStep::ok();
  }

  TxStep job_done(BatchMode /*mode*/) override {
    if (db_.in_transaction()) return TxStep::ok();
    // SQLite rolled the whole transaction back by itself (e.g. disk full or I/O error): every
    // job's effect so far is gone, so none of them may be acknowledged.
    if (is_fatal(sqlite3_extended_errcode(db_.raw()))) s_.failed_.store(true);
    return give_up(db_.error("apply a batch of writes"));
  }

  TxStep rollback_to_savepoint() override {
    s_.cache_.clear();
    if (auto r = step("ROLLBACK TO job", "roll back a failed command"); !r.ok()) {
      return give_up(r.error());
    }
    s_.keys_->rollback_to(key_mark_);
    return TxStep::ok();
  }

  TxStep release_savepoint() override {
    if (auto r = step("RELEASE job", "release a savepoint"); !r.ok()) return give_up(r.error());
    return TxStep::ok();
  }

  TxStep rollback() override {
    s_.cache_.clear();
    if (auto r = db_.exec("ROLLBACK", "roll back"); !r.ok() || db_.in_transaction()) {
      return give_up(r.ok() ? db_.error("roll back") : r.error());
    }
    s_.keys_->rollback_batch();
    tables_.reset();
    return TxStep::ok();
  }

  TxStep flush() override {
    if (auto r = tables_->flush_writes(); !r.ok()) return give_up(r.error());
    s_.cache_.defer_writes = false;
    return TxStep::ok();
  }

  // A single-process store's jobs announce nothing (TableStore::extras).
  TxStep commit(std::vector<Announcement> /*announcements*/) override {
    if (auto r = s_.reserve_tokens(); !r.ok()) return abandon(r.error());
    kseq_ = s_.committed_kseq_.load();
    if (s_.cache_.drew_kseq) {
      // The key sequence as this COMMIT makes it: what a snapshot may count as committed.
      SqliteTables tables(db_);
      auto seq = tables.key_sequence();
      if (!seq.ok()) return abandon(seq.error());
      kseq_ = *seq;
    }
    const auto commit_started = std::chrono::steady_clock::now();
    // COMMIT is a cached prepared statement (like BEGIN IMMEDIATE and the savepoints), not
    // parsed again through sqlite3_exec for every batch. Its error is taken before the statement
    // is reset (when `commit` goes out of scope), and the ROLLBACK below runs after that reset.
    int rc = SQLITE_OK;
    std::optional<Error> commit_error;
    {
      auto commit = db_.query("COMMIT");
      if (!commit.ok()) {
        rc = sqlite3_extended_errcode(db_.raw());
        commit_error = std::move(commit).error();
      } else if (commit->step() != SQLITE_DONE) {
        rc = sqlite3_extended_errcode(db_.raw());
        commit_error = db_.error("commit to disk");
      }
    }
    s_.commit_us_.fetch_add(
        static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                       std::chrono::steady_clock::now() - commit_started)
                                       .count()));
    if (!commit_error) {
      s_.keys_->commit_batch();
      return TxStep::ok();
    }
    Error e = std::move(*commit_error);
    s_.note_failed_write(rc);
    if (db_.read_only()) s_.read_only_.store(true);
    // Whether or not the WAL holds the batch after a restart, its slots go: a fatal failure
    // stops all writing, and a start-up adds every committed row's slot from the database.
    (void)abandon(e);
    if (is_fatal(rc) && e.code != errc::store_corrupt) {
      // The WAL may hold this batch after a restart, or not: say so, and stop writing.
      s_.failed_.store(true);
      e = Error(errc::store_unavailable,
                "The store could not save this change to disk (" + db_.describe() +
                    "): it may or may not have been saved. The server now refuses writes until "
                    "it is restarted; then a call with the same key or token is safe to retry.")
              .with("outcome", std::string("unknown"));
    } else if (is_fatal(rc)) {
      s_.failed_.store(true);
    }
    return TxStep::batch_failed(std::move(e));
  }

  // After a successful commit(): the key sequence it committed.
  std::uint64_t committed_kseq() const { return kseq_; }

 private:
  Result<void> step(const char* sql, const char* what) {
    auto q = db_.query(sql);
    if (!q.ok()) return std::move(q).error();
    return q->run(what);
  }
  // Ends the transaction and every mark of it: no job of the batch is answered but with `e`.
  TxStep abandon(const Error& e) {
    s_.cache_.clear();
    if (db_.in_transaction()) (void)db_.exec("ROLLBACK", "roll back");
    s_.keys_->rollback_batch();
    s_.failed_commits_.fetch_add(1);
    return TxStep::batch_failed(e);
  }
  // abandon() after a failed statement, which may say the disk is full or read-only.
  TxStep give_up(const Error& e) {
    s_.note_failed_write(sqlite3_extended_errcode(db_.raw()));
    TxStep s = abandon(e);
    if (db_.read_only()) s_.read_only_.store(true);
    return s;
  }

  SqliteStore& s_;
  Db& db_;
  const TimeMs now_;
  std::optional<SqliteTables> tables_;  // the open attempt's
  std::size_t key_mark_ = 0;
  std::uint64_t kseq_ = 0;
};

// Group commit: the batch runs through the transaction engine (batch_engine.h: optimistic, then
// isolated only when a failed job did write), with the same `now` for both attempts. Either way
// one COMMIT (one fsync) covers the batch. No job is finished here: the caller frees the write
// connection first, then answers every job with what this returns (BatchResult::finish), so that a
// client answered can find the connection free for its next write (decision 141).
BatchResult SqliteStore::commit_batch(std::vector<Job>& batch) {
  if (failed_.load()) {
    BatchResult refused;
    refused.error = unavailable(
        "an earlier write failed with an I/O error; restart the server after checking the disk");
    return refused;
  }
  cache_.drawn_token = 0;
  cache_.drew_kseq = false;
  WriteTransaction tx(*this, opt_.clock->now_ms());
  BatchResult result = run_transaction(tx, batch);
  if (result.isolated) isolated_batches_.fetch_add(1);
  if (!result.committed) return result;
  const std::uint64_t kseq = tx.committed_kseq();
  if (kseq != committed_kseq_.load()) {
    committed_kseq_.store(kseq);
    const std::uint64_t keys = keys_->stats().keys;
    const std::uint64_t every = opt_.key_snapshot_every > 0
                                    ? opt_.key_snapshot_every
                                    : std::max<std::uint64_t>(1000000, keys / 10);
    if (kseq - std::min(kseq, snapshot_started_kseq_.load()) >= every) {
      bool wake = false;
      {
        MutexLock lk(mu_);
        wake = !snapshot_wanted_;
        snapshot_wanted_ = true;
      }
      if (wake) snapshot_cv_.notify_one();
    }
  }
  read_only_.store(false);
  no_space_.store(false);
  token_floor_ = 0;
  commits_.fetch_add(1);
  committed_commands_.fetch_add(batch.size());
  return result;
}

void SqliteStore::note_failed_write(int rc) {
  if ((rc & 0xff) != SQLITE_FULL) return;
  struct statvfs fs{};
  const std::uint64_t free_bytes =
      ::statvfs(opt_.dir.c_str(), &fs) == 0 ? std::uint64_t{fs.f_bavail} * fs.f_frsize : 0;
  no_space_free_.store(free_bytes);
  no_space_at_.store(opt_.clock->now_ms());
  no_space_.store(true);
}

Result<void> SqliteStore::reserve_tokens() {
  if (cache_.drawn_token <= reserved_token_) return {};
  Identity id = identity_;
  id.token_high_water = cache_.drawn_token + kTokenBlock;
  if (auto r = write_identity(opt_.dir, id); !r.ok()) {
    return unavailable("cannot record the token high-water mark: " + r.error().message);
  }
  identity_ = id;
  reserved_token_ = id.token_high_water;
  return {};
}

int SqliteStore::on_wal_commit(void* self_ptr, sqlite3* db, const char* name, int frames) {
  auto* self = static_cast<SqliteStore*>(self_ptr);
  const Options& o = self->opt_;
  if (frames < self->last_wal_frames_) self->woken_at_frames_ = 0;  // the WAL started over
  self->last_wal_frames_ = frames;
  if (frames < o.restart_frames) {
    if (frames - self->woken_at_frames_ >= o.checkpoint_frames) self->wake_checkpointer(frames);
    return SQLITE_OK;
  }
  // Time to start the WAL over. The checkpointer has copied the bulk beside the writer; the
  // writer copies what is left, so that the next write finds the WAL completely copied and starts
  // it over. SQLITE_BUSY (the checkpointer is at work, or a reader still needs old frames) is no
  // failure: the next commit tries again.
  int log = 0, copied = 0;
  const int rc = sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, &log, &copied);
  if (rc == SQLITE_OK) {
    // Counted when it copied the whole WAL; a reader that still needs old frames (a long
    // backup) keeps it from that, and every commit tries again, cheaply, until it can.
    if (log == copied) self->writer_checkpoints_.fetch_add(1);
  } else {
    self->checkpoint_failed(*self->write_db_, rc);
  }
  // Always OK: the commit has happened; an error here would make COMMIT report a failure.
  return SQLITE_OK;
}

void SqliteStore::wake_checkpointer(int frames) {
  woken_at_frames_ = frames;
  {
    MutexLock lk(mu_);
    checkpoint_wanted_ = true;
  }
  checkpoint_cv_.notify_one();
}

void SqliteStore::checkpoint_failed(Db& db, int rc) {
  if ((rc & 0xff) == SQLITE_BUSY) return;
  failed_checkpoints_.fetch_add(1);
  if (rc == SQLITE_IOERR_FSYNC) {
    // Linux may mark the pages it could not write clean, so a later sync can succeed without
    // them; the WAL, which still holds them, must then never start over. No more writes (and so
    // no fresh WAL) until a restart, whose recovery copies them from the WAL again.
    if (!failed_.exchange(true)) {
      notice("a checkpoint could not sync " + db_path_ + " or its WAL to disk (" +
             sqlite3_errstr(rc) + ", code " + std::to_string(rc) +
             "): writes are refused until the server is restarted; nothing acknowledged is lost "
             "(the WAL holds it). Check the disk first.");
    }
    return;
  }
  (void)db.error("checkpoint the WAL");  // marks the store damaged when it is
}

bool SqliteStore::wal_wants_zeros() {
  if (opt_.wal_zero_ahead <= 0 || zero_fill_off_) return false;
  const auto e = wal_extent(write_db_->raw());
  return e && e->file_end - e->written_end < opt_.wal_zero_ahead / 2;
}

void SqliteStore::fill_wal_ahead() {
  if (!wal_wants_zeros()) return;  // asked again: the owner before may have filled already
  Db& db = *write_db_;
  // The WAL's write lock first: other connections write this WAL too — another process's, such
  // as the CLI's token commands on a running server's directory — and none may put frames where
  // the zeros go while they go in. wal_zero_fill starts at the file's real end. Busy (another
  // connection's write took longer than the busy timeout): the next commit asks again.
  {
    auto begin = db.query("BEGIN IMMEDIATE");
    if (!begin.ok() || !begin->run("lock the WAL for its zeros").ok()) {
      wal_zero_fill_skips_.fetch_add(1);
      return;
    }
  }
  constexpr std::int64_t kUnit = 64 << 10;
  const auto e = wal_extent(db.raw());  // (no WAL: wal_zero_fill answers SQLITE_MISUSE)
  const std::int64_t until =
      e ? (e->written_end + opt_.wal_zero_ahead + kUnit - 1) / kUnit * kUnit : 0;
  const int rc = wal_zero_fill(db.raw(), until);
  if (auto end = db.query("ROLLBACK"); end.ok()) (void)end->run("unlock the WAL");
  if (rc == SQLITE_OK) {
    wal_zero_fills_.fetch_add(1);
    return;
  }
  // Nothing committed depends on these zeros (every frame before them was synced by its own
  // commit, and recovery stops at the first frame that is not valid, zero or not), so a failure
  // only ends the filling: commits that lengthen the WAL pay for it again, as before.
  zero_fill_off_ = true;
  notice(std::string("the WAL is no longer filled ahead with zeros (") + sqlite3_errstr(rc) +
         ", code " + std::to_string(rc) + "): commits that lengthen it are a little slower");
}

Result<void> SqliteStore::open_keys() {
  keys_path_ = opt_.dir + "/keys.idx";
  const auto started = std::chrono::steady_clock::now();
  SqliteTables tables(*write_db_);
  auto named = tables.key_snapshot_id();
  if (!named.ok()) return std::move(named).error();
  auto last = tables.key_sequence();
  if (!last.ok()) return std::move(last).error();
  auto opened = open_key_index(
      keys_path_, *named, *last, static_cast<std::size_t>(*last),
      [&](std::uint64_t after, const KeyRowSink& add) { return tables.scan_keys(after, add); });
  if (!opened.ok()) return std::move(opened).error();
  keys_ = std::move(opened->index);
  committed_kseq_.store(*last);
  const auto keys = keys_->stats().keys;
  if (opened->from_snapshot) {
    snapshot_started_kseq_.store(opened->snapshot_last_kseq);
    snapshot_named_kseq_.store(opened->rows_scanned == 0 ? *last : UINT64_MAX);
    notice("key index: " + std::to_string(keys) + " keys from " + keys_path_ + " and " +
           std::to_string(opened->rows_scanned) + " newer rows in " + millis_since(started));
  } else {
    notice("key index: built from " + std::to_string(opened->rows_scanned) + " rows in " +
           millis_since(started) + " (" + opened->rebuilt_because + ")");
    if (keys > 0) {
      MutexLock lk(mu_);
      snapshot_wanted_ = true;  // so that the next start, even after a crash, need not rebuild
    }
  }
  return {};
}

Result<void> SqliteStore::snapshot_keys(bool on_write_connection) {
  // Every row with kseq ≤ last committed before the copy starts, and its slot was inserted
  // before that commit (key_index.h): the file holds it.
  const std::uint64_t last = committed_kseq_.load();
  const std::uint64_t id = new_snapshot_id();
  snapshot_started_kseq_.store(last);
  auto fail = [&](const Error& e) -> Result<void> {
    failed_key_snapshots_.fetch_add(1);
    return e;
  };
  if (auto w = keys_->write_snapshot(keys_path_, last, id); !w.ok()) return fail(w.error());
  // Only now may the database name it: a crash before this leaves a file it does not name,
  // which the next start does not use.
  if (on_write_connection) {
    Db& db = *write_db_;
    SqliteTables tables(db);
    Result<void> saved = db.exec("BEGIN IMMEDIATE", "begin a transaction");
    if (saved.ok()) saved = tables.save_key_snapshot_id(id);
    if (saved.ok()) saved = db.exec("COMMIT", "name the key index's snapshot");
    if (!saved.ok()) {
      if (db.in_transaction()) (void)db.exec("ROLLBACK", "roll back");
      return fail(saved.error());
    }
  } else {
    // The writer's tables are SqliteTables. apply may run twice (an isolated re-run of its
    // batch); finish runs once, with the store's failure or none.
    struct State {
      std::optional<Error> failed;  // apply's last outcome
      std::promise<std::optional<Error>> done;
    };
    auto state = std::make_shared<State>();
    Job job;
    job.apply = [id, state](Tables& t, TimeMs) {
      auto saved = static_cast<SqliteTables&>(t).save_key_snapshot_id(id);
      state->failed = saved.ok() ? std::nullopt : std::optional<Error>(saved.error());
      return saved.ok();
    };
    job.finish = [state](const Error* e) {
      state->done.set_value(e ? std::optional<Error>(*e) : state->failed);
    };
    auto result = state->done.get_future();
    submit_write(std::move(job));
    if (auto e = result.get(); e) return fail(*e);
  }
  snapshot_named_kseq_.store(last);
  key_snapshots_.fetch_add(1);
  return {};
}

void SqliteStore::snapshotter_loop() {
  for (;;) {
    {
      MutexLock lk(mu_);
      while (!closing_ && !snapshot_wanted_) snapshot_cv_.wait(mu_);
      if (closing_) return;  // close() writes the last one
      snapshot_wanted_ = false;
    }
    const auto started = std::chrono::steady_clock::now();
    if (auto r = snapshot_keys(/*on_write_connection=*/false); !r.ok()) {
      notice("key index: a snapshot failed (" + r.error().message +
             "); the next one is tried after as many new keys again");
    } else {
      notice("key index: snapshot of " + std::to_string(keys_->stats().keys) + " keys written to " +
             keys_path_ + " in " + millis_since(started));
    }
  }
}

void SqliteStore::checkpointer_loop() {
  Db& db = *checkpoint_db_;
  for (;;) {
    {
      MutexLock lk(mu_);
      while (!closing_ && !checkpoint_wanted_) checkpoint_cv_.wait(mu_);
      if (closing_) return;  // close() checkpoints on the writer connection
      checkpoint_wanted_ = false;
    }
    int rc =
        sqlite3_wal_checkpoint_v2(db.raw(), nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    if (rc == SQLITE_OK) {
      // The pages just copied go to disk now, beside the writer, instead of all at once in the
      // sync that lets the WAL start over (decision 136). SQLite syncs the database file only
      // after a checkpoint that copied the whole WAL.
      sqlite3_file* file = nullptr;
      if (sqlite3_file_control(db.raw(), "main", SQLITE_FCNTL_FILE_POINTER, &file) == SQLITE_OK &&
          file != nullptr && file->pMethods != nullptr) {
        rc = file->pMethods->xSync(file, SQLITE_SYNC_NORMAL);
      }
    }
    if (rc == SQLITE_OK) {
      checkpoints_.fetch_add(1);
    } else {
      checkpoint_failed(db, rc);
    }
  }
}

void SqliteStore::reader_loop(int index) {
  Db& db = *read_dbs_[index];
  SqliteTables tables(db, nullptr, keys_.get());
  for (;;) {
    Job job;
    {
      MutexLock lk(mu_);
      while (!closing_ && read_queue_.empty()) read_cv_.wait(mu_);
      if (read_queue_.empty()) return;
      job = std::move(read_queue_.front());
      read_queue_.pop_front();
    }
    if (auto r = db.exec("BEGIN", "begin a read"); !r.ok()) {
      job.finish(&r.error());
      continue;
    }
    try {
      (void)job.apply(tables, opt_.clock->now_ms());
    } catch (const std::exception&) {
      // No result in the job's slot: it answers internal (table_store.h).
    }
    (void)db.exec("COMMIT", "end a read");
    job.finish(nullptr);
  }
}

Result<void> SqliteStore::check_health() {
  if (corrupt_.load()) {
    return Error(errc::store_corrupt, "The store found damage in " + db_path_ +
                                          "; an operator must act (ichido check --data " +
                                          opt_.dir +
                                          ", then restore a backup). Retrying will not help.");
  }
  if (failed_.load()) {
    return Error(errc::store_unavailable,
                 "A write failed with an I/O error, so the store refuses writes; check the disk "
                 "and restart the server.");
  }
  return {};
}

Result<void> SqliteStore::check_ready() {
  {
    MutexLock lk(mu_);
    if (closing_) return unavailable("the server is shutting down");
  }
  ICHIDO_TRY(check_health());
  if (read_only_.load() || ::access(db_path_.c_str(), W_OK) != 0 ||
      ::access(opt_.dir.c_str(), W_OK) != 0) {
    return Error(errc::store_unavailable,
                 "The store cannot write: " + db_path_ +
                     " or its directory is read-only; an operator must make it writable.");
  }
  if (opt_.min_free_disk > 0 || no_space_.load()) {
    struct statvfs fs{};
    const bool known = ::statvfs(opt_.dir.c_str(), &fs) == 0;
    const std::uint64_t free_bytes = known ? std::uint64_t{fs.f_bavail} * fs.f_frsize : 0;
    if (known && free_bytes < opt_.min_free_disk) {
      return unavailable("less free disk than --min-free-disk (" + std::to_string(free_bytes) +
                         " < " + std::to_string(opt_.min_free_disk) + " bytes)");
    }
    // After a write that failed for lack of space: not ready until a write succeeds, or until
    // space has come back (then the next write tells).
    if (no_space_.load()) {
      const bool came_back = known && opt_.clock->now_ms() - no_space_at_.load() >= 1000 &&
                             free_bytes >= no_space_free_.load() + kNoSpaceRecovered;
      if (!came_back) {
        return unavailable("the disk of " + opt_.dir +
                           " is full: a write failed for lack of space, and none has succeeded "
                           "since; free some space");
      }
    }
  }
  return {};
}

SqliteStore::OwnStats SqliteStore::own_stats() const {
  OwnStats o;
  o.checkpoints = checkpoints_.load() + writer_checkpoints_.load();
  o.failed_checkpoints = failed_checkpoints_.load();
  struct stat st{};
  if (::stat((db_path_ + "-wal").c_str(), &st) == 0)
    o.wal_bytes = static_cast<std::uint64_t>(st.st_size);
  o.caller_commits = caller_commits_.load();
  if (keys_) {
    const auto k = keys_->stats();
    o.keys = k.keys;
    o.key_memory_bytes = k.capacity * sizeof(std::uint64_t);
  }
  o.key_snapshots = key_snapshots_.load();
  o.failed_key_snapshots = failed_key_snapshots_.load();
  return o;
}

StoreStats SqliteStore::stats() const {
  StoreStats s{commits_.load(),          committed_commands_.load(), failed_commits_.load(),
               isolated_batches_.load(), commit_us_.load(),          failed_.load()};
  const OwnStats o = own_stats();
  using T = StoreStats::Metric::Type;
  s.own = {
      {"ichido_store_caller_commits_total", T::counter,
       "Of the commits, those of a lone request run on its own I/O thread instead of the writer "
       "thread (a client alone: no hand-off between threads).",
       o.caller_commits},
      {"ichido_store_checkpoints_total", T::counter,
       "WAL checkpoints completed (the WAL copied into the database file, beside the writer).",
       o.checkpoints},
      {"ichido_store_failed_checkpoints_total", T::counter,
       "WAL checkpoints that failed (nothing is lost, but the WAL cannot start over and grows "
       "until one succeeds).",
       o.failed_checkpoints},
      {"ichido_store_wal_bytes", T::gauge,
       "Size of the WAL file (about 40 MiB at most while checkpoints keep up).", o.wal_bytes},
      {"ichido_store_key_index_keys", T::gauge,
       "Keys of issued numbers in the embedded store's key index.", o.keys},
      {"ichido_store_key_index_bytes", T::gauge,
       "Memory of the key index's table (8 bytes a slot, at most 3/4 full: about 11 bytes a "
       "key).",
       o.key_memory_bytes},
      {"ichido_store_key_index_snapshots_total", T::counter,
       "Snapshots of the key index written to keys.idx and named by the database.",
       o.key_snapshots},
      {"ichido_store_key_index_failed_snapshots_total", T::counter,
       "Snapshots of the key index that failed (nothing is lost: the next start adds the newer "
       "keys from the database, or rebuilds the index).",
       o.failed_key_snapshots},
  };
  return s;
}

}  // namespace ichido::store::sqlite
