#include "store/sqlite/data_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/secret.h"
#include "store/sqlite/schema.h"

namespace ichido::store::sqlite {
namespace {

Error startup(std::string msg) { return Error(errc::store_unavailable, std::move(msg)); }

// A refusal only an operator can resolve (the server exits 4: supervisors should not restart).
Error needs_operator(errc code, std::string msg) {
  return Error(code, std::move(msg)).with("needs_operator", std::string("true"));
}

bool nonempty_file(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && st.st_size > 0;
}

}  // namespace

Result<void> sync_path(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return startup("cannot open " + path + ": " + std::strerror(errno));
  const bool ok = ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) return startup("cannot sync " + path + ": " + std::strerror(errno));
  return {};
}

namespace {

std::string new_store_id() { return new_token_id() + new_token_id(); }

Result<void> raise_token_sequence_impl(Db& db, std::int64_t value) {
  auto q = db.query(
      "INSERT INTO sequences (name, value) VALUES ('token', ?1) "
      "ON CONFLICT (name) DO UPDATE SET value = MAX(value, ?1)");
  if (!q.ok()) return std::move(q).error();
  q->bind(1, value);
  return q->run("move the token sequence up to its high-water mark");
}

}  // namespace

std::string db_path_of(const std::string& dir) { return dir + "/ichido.db"; }
std::string identity_path_of(const std::string& dir) { return dir + "/ichido.id"; }

Result<std::optional<Identity>> read_identity(const std::string& dir) {
  const std::string path = identity_path_of(dir);
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return std::optional<Identity>();
    return startup("cannot read " + path + ": " + std::strerror(errno));
  }
  Identity id;
  bool has_id = false, has_mark = false;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string k = line.substr(0, eq), v = line.substr(eq + 1);
    try {
      if (k == "store_id") {
        id.store_id = v;
        has_id = !v.empty();
      } else if (k == "created_at_ms") {
        id.created_at = std::stoll(v);
      } else if (k == "token_high_water") {
        id.token_high_water = std::stoll(v);
        has_mark = id.token_high_water >= 0;
      }
    } catch (const std::exception&) {
      return startup(path + " is damaged (line \"" + line +
                     "\"); restore it from a backup of the data directory.");
    }
  }
  if (!has_id || !has_mark) {
    return startup(path + " is damaged (no store_id or token_high_water); restore it from a " +
                   "backup of the data directory.");
  }
  return std::optional<Identity>(std::move(id));
}

Result<void> write_identity(const std::string& dir, const Identity& id) {
  const std::string path = identity_path_of(dir);
  std::ostringstream s;
  s << "# ichido store identity. Do not edit or delete: it keeps an emptied or lost ichido.db\n"
    << "# from coming back as a new, empty store (README, \"Durability\").\n"
    << "store_id=" << id.store_id << "\n"
    << "created_at_ms=" << id.created_at << "\n"
    << "created_at=" << format_rfc3339(id.created_at) << "\n"
    << "token_high_water=" << id.token_high_water << "\n";
  const std::string text = s.str();
  const std::string_view pieces[] = {text};
  return replace_file_durably(path, pieces);
}

Result<DurableFile> DurableFile::create(const std::string& path, unsigned mode) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return startup("cannot write " + tmp + ": " + std::strerror(errno));
  return DurableFile(path, fd);
}

DurableFile::DurableFile(DurableFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_), end_(other.end_) {
  other.fd_ = -1;
}

DurableFile::~DurableFile() {
  if (fd_ >= 0) ::close(fd_);
}

Result<void> DurableFile::fail(const char* what, int err) {
  return startup(std::string("cannot ") + what + " " + path_ + ".tmp: " + std::strerror(err));
}

Result<void> DurableFile::write_at(std::uint64_t offset, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::pwrite(fd_, bytes.data(), bytes.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("write", n < 0 ? errno : EIO);
    bytes.remove_prefix(static_cast<std::size_t>(n));
    offset += static_cast<std::uint64_t>(n);
  }
  return {};
}

Result<void> DurableFile::append(std::string_view bytes) {
  ICHIDO_TRY(write_at(end_, bytes));
  end_ += bytes.size();
  return {};
}

Result<void> DurableFile::truncate() {
  if (::ftruncate(fd_, 0) != 0) return fail("truncate", errno);
  end_ = 0;
  return {};
}

Result<void> DurableFile::commit() {
  if (::fsync(fd_) != 0) return fail("write", errno);
  const int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0) return fail("write", errno);
  const std::string tmp = path_ + ".tmp";
  if (::rename(tmp.c_str(), path_.c_str()) != 0) {
    return startup("cannot replace " + path_ + ": " + std::strerror(errno));
  }
  const std::string dir = std::filesystem::path(path_).parent_path().string();
  return sync_path(dir.empty() ? "." : dir, O_RDONLY | O_DIRECTORY);
}

Result<void> replace_file_durably(const std::string& path, std::span<const std::string_view> pieces,
                                  unsigned mode) {
  auto file = DurableFile::create(path, mode);
  if (!file.ok()) return std::move(file).error();
  for (const std::string_view piece : pieces) ICHIDO_TRY(file->append(piece));
  return file->commit();
}

Result<std::vector<std::string>> integrity_check(Db& db, bool quick, int max) {
  const std::string sql = std::string(quick ? "PRAGMA quick_check(" : "PRAGMA integrity_check(") +
                          std::to_string(max) + ")";
  std::vector<std::string> problems;
  auto q = db.query(sql);
  if (!q.ok()) {
    if (db.damaged()) return std::vector<std::string>{db.describe()};
    return startup("cannot check the database: " + db.describe());
  }
  for (;;) {
    const int rc = q->step();
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) {
      if (db.damaged()) {
        problems.push_back(db.describe());
        break;
      }
      return startup("cannot check the database: " + db.describe());
    }
    std::string line = q->text(0);
    if (line != "ok") problems.push_back(std::move(line));
  }
  return problems;
}

Result<std::int64_t> current_token(Db& db) {
  auto q = db.query("SELECT value FROM sequences WHERE name = 'token'");
  if (!q.ok()) return std::move(q).error();
  const int rc = q->step();
  if (rc == SQLITE_DONE) return std::int64_t{0};
  if (rc != SQLITE_ROW) return db.error("read the token sequence");
  return q->int64(0);
}

Result<void> raise_token_sequence(Db& db, std::int64_t floor) {
  return raise_token_sequence_impl(db, floor);
}

Result<void> check_before_writing(const std::string& dir, std::uint64_t quick_check_max_bytes,
                                  const std::string& vfs) {
  const std::string db_path = db_path_of(dir);
  struct stat st{};
  if (::stat(db_path.c_str(), &st) != 0 || st.st_size == 0) return {};
  auto damaged = [&](const std::string& what) {
    return needs_operator(errc::store_corrupt,
                          db_path + " is damaged (" + what +
                              "). Restore it from a backup (ichido restore); ichido check --data " +
                              dir + " lists the problems.");
  };
  Db db;
  if (auto r = db.open_untouched(db_path, vfs); !r.ok()) {
    if (db.damaged()) return damaged(db.describe());
    return startup("cannot read " + db_path + ": " + db.describe());
  }
  // A failed read says store_corrupt when SQLite found damage (Db::error); the connection's
  // last code may be gone by then (the statement was reset).
  auto version = schema_version(db);
  if (!version.ok()) {
    if (version.error().code == errc::store_corrupt) return damaged("its schema cannot be read");
    return startup("cannot read " + db_path + ": " + version.error().message);
  }
  if (*version > 0) {
    if (auto seq = current_token(db); !seq.ok()) {
      if (seq.error().code == errc::store_corrupt) {
        return damaged("its token sequence cannot be read");
      }
      return startup("cannot read the token sequence of " + db_path + ": " + seq.error().message);
    }
  }
  if (quick_check_max_bytes > 0 &&
      static_cast<std::uint64_t>(st.st_size) <= quick_check_max_bytes) {
    auto problems = integrity_check(db, /*quick=*/true, 5);
    if (!problems.ok()) return std::move(problems).error();
    if (!problems->empty()) return damaged(problems->front());
  }
  return {};
}

Result<OpenedDir> open_data_dir(Db& db, const std::string& dir, const OpenDirOptions& o,
                                TimeMs now) {
  std::error_code ec;
  const bool dir_exists = std::filesystem::is_directory(dir, ec);
  const std::string db_path = db_path_of(dir);
  auto known = read_identity(dir);
  if (!known.ok()) return std::move(known).error();
  const bool has_db = nonempty_file(db_path);

  if (!has_db && *known && !o.init) {  // D2
    return needs_operator(
        errc::store_unavailable,
        "the data directory " + dir + " holds the store " + (*known)->store_id + " (created " +
            format_rfc3339((*known)->created_at) + "), but " + db_path +
            (std::filesystem::exists(db_path, ec) ? " is empty" : " is missing") +
            ". ichido will not start again from zero: restore the database from a backup "
            "(ichido restore --from FILE --data " +
            dir +
            "), or start a new, empty store on purpose with --init (its fencing tokens "
            "continue above " +
            std::to_string((*known)->token_high_water) + ").");
  }
  if (has_db && o.init) {
    return startup("--init starts a new store only where none is: " + db_path +
                   " exists. Move it away first if you really want an empty store.");
  }
  if (!has_db && !*known && !o.create_if_new && !o.init) {
    return startup("there is no ichido store in " + dir +
                   (dir_exists ? " (no ichido.db)" : " (the directory does not exist)") +
                   ": give the data directory the server uses (--data), or add --init to create "
                   "a new store there.");
  }
  if (!dir_exists) {
    std::filesystem::create_directories(dir, ec);
    if (ec) return startup("cannot create the data directory " + dir + ": " + ec.message());
  }
  ::chmod(dir.c_str(), 0700);
  if (!has_db) {
    // A new database: leftovers of an old one (its WAL) must not be replayed into it.
    std::filesystem::remove(db_path, ec);
    std::filesystem::remove(db_path + "-wal", ec);
    std::filesystem::remove(db_path + "-shm", ec);
  }
  auto damaged = [&] {
    return needs_operator(errc::store_corrupt,
                          db_path + " is not a readable ichido database (" + db.describe() +
                              "). Restore it from a backup (ichido restore), or run ichido check "
                              "--data " +
                              dir + " for details.");
  };
  if (auto r = db.open(db_path, /*create=*/true, o.vfs); !r.ok()) {
    if (db.damaged()) return damaged();
    return startup("cannot open " + db_path + ": " + db.describe());
  }
  if (sqlite3_db_readonly(db.raw(), "main") == 1) {
    // Read-only: serve what is there, write nothing (sqlite_store.h: not ready).
    auto version = schema_version(db);
    if (!version.ok()) return db.damaged() ? damaged() : std::move(version).error();
    if (*version != current_schema_version()) {
      return startup(db_path + " is read-only and its schema (" + std::to_string(*version) +
                     ") is not this ichido's (" + std::to_string(current_schema_version()) +
                     "): make it writable so it can be migrated.");
    }
    OpenedDir out;
    out.read_only = true;
    out.identity = *known ? **known : Identity{new_store_id(), now, 0};
    auto seq = current_token(db);
    if (!seq.ok()) return db.damaged() ? damaged() : std::move(seq).error();
    out.token_floor = std::max(*seq, out.identity.token_high_water);
    out.identity.token_high_water = out.token_floor;
    return out;
  }
  if (auto r = migrate(db, o.on_upgrade); !r.ok()) {
    if (db.damaged()) return damaged();
    if (r.error().code == errc::store_corrupt) {
      return needs_operator(errc::store_corrupt,
                            db_path + " is damaged. " + r.error().message +
                                " Restore it from a backup (ichido restore), or run ichido check "
                                "--data " +
                                dir + " for details.");
    }
    if (r.error().message.find("newer ichido") != std::string::npos) {
      return needs_operator(errc::store_unavailable, r.error().message);
    }
    return startup("cannot prepare " + db_path + ": " + db.describe());
  }

  Identity id = *known ? **known : Identity{new_store_id(), now, 0};
  if (o.init) id = Identity{new_store_id(), now, id.token_high_water};
  if (!o.serve) {
    // A tool: record a new or adopted store (D1, D3, --init) and leave the tokens to the server.
    if (!*known || o.init) {
      auto seq = current_token(db);
      if (!seq.ok()) {
        return db.damaged() ? damaged()
                            : startup("cannot read the token sequence: " + db.describe());
      }
      id.token_high_water = std::max(id.token_high_water, *seq);
      ICHIDO_TRY(write_identity(dir, id));
    }
    return OpenedDir{id, false, 0};
  }
  // D4: never below the mark; then reserve the next block before anything can be handed out.
  auto seq = current_token(db);
  if (!seq.ok()) {
    return db.damaged() ? damaged() : startup("cannot read the token sequence: " + db.describe());
  }
  const std::int64_t start = std::max(*seq, id.token_high_water);
  if (start > *seq) {
    if (auto r = raise_token_sequence(db, start); !r.ok()) {
      if (db.damaged()) return damaged();
      return startup("cannot move the token sequence to " + std::to_string(start) + ": " +
                     db.describe());
    }
  }
  id.token_high_water = start + kTokenBlock;
  ICHIDO_TRY(write_identity(dir, id));
  return OpenedDir{id, false, 0};
}

}  // namespace ichido::store::sqlite
