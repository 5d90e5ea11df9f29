#include "store/sqlite/maintenance.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <thread>

#include "store/sqlite/data_dir.h"
#include "store/sqlite/db.h"
#include "store/sqlite/schema.h"

namespace ichido::store::sqlite {
namespace {

namespace fs = std::filesystem;

Error unavailable(std::string msg) { return Error(errc::store_unavailable, std::move(msg)); }

std::uint64_t file_size(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
}

Result<std::int64_t> pragma_int(Db& db, const char* sql) {
  auto q = db.query(sql);
  if (!q.ok()) return std::move(q).error();
  if (q->step() != SQLITE_ROW) return db.error("read the database's size");
  return q->int64(0);
}

// No store in `dir`: the message an operator needs.
Error no_store(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return unavailable("there is no ichido store in " + dir + " (the directory does not exist)");
  }
  return unavailable("there is no ichido store in " + dir + " (" + db_path_of(dir) +
                     (fs::exists(db_path_of(dir), ec) ? " is empty)" : " is missing)"));
}

// Copies the database open on `src` (inside the caller's read transaction, so one snapshot:
// M2) into a new file `to` in rollback-journal mode, synced. Removes `to` on failure.
Result<std::int64_t> copy_database(Db& src, const std::string& to,
                                   const std::function<void(const CopyProgress&)>& progress) {
  sqlite3* dest = nullptr;
  auto fail = [&](std::string msg) -> Error {
    if (dest) sqlite3_close(dest);
    std::error_code ec;
    fs::remove(to, ec);
    fs::remove(to + "-journal", ec);
    return unavailable(std::move(msg));
  };
  if (sqlite3_open_v2(to.c_str(), &dest, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    return fail("cannot create " + to + ": " + (dest ? sqlite3_errmsg(dest) : "out of memory"));
  }
  sqlite3_backup* b = sqlite3_backup_init(dest, "main", src.raw(), "main");
  if (!b) return fail("cannot copy to " + to + ": " + sqlite3_errmsg(dest));
  std::int64_t pages = 0;
  for (;;) {
    const int rc = sqlite3_backup_step(b, 256);  // 1 MiB at the default page size
    pages = sqlite3_backup_pagecount(b);
    if (progress) progress(CopyProgress{pages - sqlite3_backup_remaining(b), pages});
    if (rc == SQLITE_DONE) break;
    if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    if (rc != SQLITE_OK) {
      sqlite3_backup_finish(b);
      return fail("the copy to " + to + " failed: " + sqlite3_errstr(rc));
    }
  }
  if (sqlite3_backup_finish(b) != SQLITE_OK) {
    return fail("the copy to " + to + " failed: " + sqlite3_errmsg(dest));
  }
  // One self-contained file (no -wal beside it), fully synced.
  char* err = nullptr;
  if (sqlite3_exec(dest, "PRAGMA journal_mode=DELETE", nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return fail("cannot finish " + to + ": " + msg);
  }
  if (sqlite3_close(dest) != SQLITE_OK) {
    dest = nullptr;
    return fail("cannot close " + to);
  }
  dest = nullptr;
  if (auto r = sync_path(to, O_RDONLY); !r.ok()) return fail(r.error().message);
  return pages;
}

// Since schema 12 (decision 143) no unique index keeps an issued number's key to one number of
// its counter: the writer does, through its key index, and this checks what it relies on —
// every keyed number has a key stamp (kseq), no stamp is used twice or lies beyond the key
// sequence, and no counter has a key twice. Full checks only: the last one sorts every key.
Result<std::vector<std::string>> key_problems(Db& db, int max) {
  std::vector<std::string> out;
  const auto limit = std::int64_t{max};
  auto rows = [&](const char* sql, const char* what,
                  const std::function<std::string(const Query&)>& say) -> Result<void> {
    auto q = db.query(sql);
    if (!q.ok()) return std::move(q).error();
    q->bind(1, limit);
    for (;;) {
      const int rc = q->step();
      if (rc == SQLITE_DONE) return {};
      if (rc != SQLITE_ROW) return db.error(what);
      if (static_cast<int>(out.size()) < max) out.push_back(say(*q));
    }
  };
  ICHIDO_TRY(
      rows("SELECT counter_id, key FROM issued WHERE key IS NOT NULL AND kseq IS NULL "
           "LIMIT ?",
           "check the key stamps", [](const Query& q) {
             return "the number with key '" + q.text(1) + "' of counter " +
                    std::to_string(q.int64(0)) + " has no key stamp (kseq)";
           }));
  ICHIDO_TRY(
      rows("SELECT kseq, COUNT(*) FROM issued WHERE kseq IS NOT NULL GROUP BY kseq "
           "HAVING COUNT(*) > 1 LIMIT ?",
           "check the key stamps", [](const Query& q) {
             return "the key stamp " + std::to_string(q.int64(0)) + " is on " +
                    std::to_string(q.int64(1)) + " numbers";
           }));
  ICHIDO_TRY(rows(
      "SELECT COUNT(*), MAX(kseq) FROM issued WHERE kseq > (SELECT COALESCE(MAX("
      "value), 0) FROM sequences WHERE name = 'key') HAVING COUNT(*) > 0 LIMIT ?",
      "check the key stamps", [](const Query& q) {
        return "numbers with key stamps beyond the key sequence: " + std::to_string(q.int64(0)) +
               " (up to " + std::to_string(q.int64(1)) + ")";
      }));
  ICHIDO_TRY(
      rows("SELECT counter_id, key, COUNT(*) FROM issued WHERE key IS NOT NULL "
           "GROUP BY counter_id, key HAVING COUNT(*) > 1 LIMIT ?",
           "check the keys", [](const Query& q) {
             return "the key '" + q.text(1) + "' of counter " + std::to_string(q.int64(0)) +
                    " is held by " + std::to_string(q.int64(2)) + " numbers";
           }));
  return out;
}

// Problems of a database that should hold an ichido store: damage, or not ichido's at all.
Result<std::vector<std::string>> store_problems(Db& db, bool quick, int max, int* version) {
  auto v = schema_version(db);
  if (!v.ok()) {
    if (db.damaged()) return std::vector<std::string>{db.describe()};
    return unavailable("cannot read the database: " + db.describe());
  }
  *version = *v;
  auto problems = integrity_check(db, quick, max);
  if (!problems.ok()) return std::move(problems).error();
  if (problems->empty() && *v == 0) {
    problems->push_back("not an ichido database (it has no schema_version table)");
  }
  if (problems->empty() && !quick && *v >= 12) {
    auto keys = key_problems(db, max);
    if (!keys.ok()) return std::move(keys).error();
    *problems = std::move(*keys);
  }
  return problems;
}

std::string utc_stamp() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

// DIR/LOCK held for the life of the object (the server takes the same lock).
class DirLock {
 public:
  ~DirLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  Result<void> take(const std::string& dir) {
    const std::string path = dir + "/LOCK";
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ < 0) return unavailable("cannot open " + path + ": " + std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      return unavailable("a server is running on " + dir + " (it holds " + path +
                         "): stop it first; restore replaces the database under it");
    }
    return {};
  }

 private:
  int fd_ = -1;
};

}  // namespace

Result<CheckReport> check_store(const std::string& dir, bool quick, int max_problems) {
  CheckReport out;
  out.db_path = db_path_of(dir);
  out.bytes = file_size(out.db_path);
  if (out.bytes == 0) return no_store(dir);
  Db db;
  if (auto r = db.open_read_only(out.db_path); !r.ok()) {
    if (!db.damaged()) return unavailable("cannot open " + out.db_path + ": " + r.error().message);
    out.problems.push_back(db.describe());
    return out;
  }
  auto problems = store_problems(db, quick, max_problems, &out.schema_version);
  if (!problems.ok()) return std::move(problems).error();
  out.problems = std::move(*problems);
  if (auto pages = pragma_int(db, "PRAGMA page_count"); pages.ok()) out.pages = *pages;
  return out;
}

Result<BackupReport> backup_store(const std::string& dir, const std::string& to,
                                  const std::function<void(const CopyProgress&)>& progress) {
  std::error_code ec;
  if (to.empty()) return Error(errc::invalid_request, "give the backup file (--to FILE)");
  if (fs::exists(to, ec)) {
    return Error(errc::invalid_request,
                 to + " exists: ichido backup never overwrites a file; give a new name");
  }
  const fs::path parent = fs::absolute(fs::path(to), ec).parent_path();
  if (fs::exists(dir, ec) && fs::equivalent(parent, dir, ec)) {
    return Error(errc::invalid_request,
                 "a backup inside the data directory is lost with it: write it elsewhere");
  }
  const std::string db_path = db_path_of(dir);
  if (file_size(db_path) == 0) return no_store(dir);
  Db src;
  if (auto r = src.open_read_only(db_path); !r.ok()) {
    return unavailable("cannot open " + db_path + ": " + r.error().message);
  }
  // One read transaction around the whole copy (M2): the snapshot cannot move under it.
  ICHIDO_TRY(src.exec("BEGIN", "begin a read transaction"));
  auto token = current_token(src);
  if (!token.ok()) return unavailable("cannot read " + db_path + ": " + src.describe());
  const std::string partial = to + ".partial";
  fs::remove(partial, ec);
  auto pages = copy_database(src, partial, progress);
  (void)src.exec("COMMIT", "end the read transaction");
  if (!pages.ok()) return std::move(pages).error();

  Db copy;
  if (auto r = copy.open_read_only(partial); !r.ok()) {
    fs::remove(partial, ec);
    return unavailable("cannot reopen " + partial + ": " + r.error().message);
  }
  int version = 0;
  auto problems = store_problems(copy, /*quick=*/true, 5, &version);
  copy.close();
  if (!problems.ok() || !problems->empty()) {
    fs::remove(partial, ec);
    if (!problems.ok()) return std::move(problems).error();
    return Error(errc::store_corrupt, "the copy of " + db_path + " is damaged (" +
                                          problems->front() + "): run ichido check --data " + dir);
  }
  if (::rename(partial.c_str(), to.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    fs::remove(partial, ec);
    return unavailable("cannot rename " + partial + " to " + to + ": " + why);
  }
  ICHIDO_TRY(sync_path(parent.string(), O_RDONLY | O_DIRECTORY));
  return BackupReport{file_size(to), *pages, *token};
}

Result<RestoreReport> restore_store(const std::string& from, const std::string& dir,
                                    const RestoreOptions& options) {
  std::error_code ec;
  if (!fs::is_regular_file(from, ec) || file_size(from) == 0) {
    return Error(errc::invalid_request, "there is no backup file " + from);
  }
  Db backup;
  if (auto r = backup.open_read_only(from); !r.ok()) {
    if (backup.damaged()) {
      return Error(errc::store_corrupt, from + " is not a database: " + backup.describe());
    }
    return unavailable("cannot open " + from + ": " + r.error().message);
  }
  int version = 0;
  auto problems = store_problems(backup, /*quick=*/false, 5, &version);
  if (!problems.ok()) return std::move(problems).error();
  if (!problems->empty()) {
    return Error(errc::store_corrupt,
                 from + " cannot be restored: " + problems->front() + ". Nothing was changed.");
  }
  if (version > current_schema_version()) {
    return unavailable(from + " was written by a newer ichido (schema " + std::to_string(version) +
                       ", this one knows " + std::to_string(current_schema_version()) +
                       "): restore it with that version. Nothing was changed.");
  }

  if (!fs::is_directory(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec) return unavailable("cannot create " + dir + ": " + ec.message());
    ::chmod(dir.c_str(), 0700);
  }
  DirLock lock;
  ICHIDO_TRY(lock.take(dir));

  // The new database beside the old one first; the swap is two renames.
  const std::string db_path = db_path_of(dir);
  const std::string restoring = db_path + ".restoring";
  fs::remove(restoring, ec);
  ICHIDO_TRY(backup.exec("BEGIN", "begin a read transaction"));
  auto copied = copy_database(backup, restoring, {});
  (void)backup.exec("COMMIT", "end the read transaction");
  backup.close();
  if (!copied.ok()) return std::move(copied).error();

  RestoreReport out;
  if (fs::exists(db_path, ec)) {
    out.replaced = db_path + ".replaced-" + utc_stamp();
    // The WAL goes with its database (a killed server's last commits live there).
    for (const char* suffix : {"", "-wal", "-shm"}) {
      const std::string a = db_path + suffix, b = out.replaced + suffix;
      if (fs::exists(a, ec) && ::rename(a.c_str(), b.c_str()) != 0) {
        return unavailable("cannot move " + a + " aside: " + std::strerror(errno));
      }
    }
  }
  if (::rename(restoring.c_str(), db_path.c_str()) != 0) {
    return unavailable("cannot rename " + restoring + ": " + std::strerror(errno));
  }
  ICHIDO_TRY(sync_path(dir, O_RDONLY | O_DIRECTORY));

  // M4: keep the directory's mark (raised to the floor if asked); without one, D3 adopts the
  // backup with its own tokens as the mark, then the floor raises it.
  auto known = read_identity(dir);
  if (!known.ok()) return std::move(known).error();
  out.kept_identity = known->has_value();
  if (out.kept_identity && (*known)->token_high_water < options.token_floor) {
    Identity raised = **known;
    raised.token_high_water = options.token_floor;
    ICHIDO_TRY(write_identity(dir, raised));
  }
  Db db;
  OpenDirOptions o;
  o.create_if_new = false;
  o.serve = true;  // as the server would: migrate, move the token sequence up to the mark
  auto opened = open_data_dir(db, dir, o, SystemClock::instance().now_ms());
  if (!opened.ok()) return std::move(opened).error();
  out.tokens_continue_above = opened->identity.token_high_water - kTokenBlock;
  if (out.tokens_continue_above < options.token_floor) {
    ICHIDO_TRY(raise_token_sequence(db, options.token_floor));
    Identity adopted = opened->identity;
    adopted.token_high_water = options.token_floor + kTokenBlock;
    ICHIDO_TRY(write_identity(dir, adopted));
    out.tokens_continue_above = options.token_floor;
  }
  db.close();
  return out;
}

}  // namespace ichido::store::sqlite
