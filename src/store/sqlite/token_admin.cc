#include "store/sqlite/token_admin.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>

#include "base/secret.h"
#include "store/admin_ops.h"
#include "store/sqlite/data_dir.h"
#include "store/sqlite/schema.h"
#include "store/sqlite/sqlite_tables.h"

namespace ichido::store::sqlite {
namespace {

Result<void> open_dir(Db& db, const std::string& dir, bool init) {
  OpenDirOptions o;
  o.create_if_new = false;  // a typo in --data must not become a new, empty store
  o.init = init;
  o.serve = false;
  auto id = open_data_dir(db, dir, o, SystemClock::instance().now_ms());
  if (!id.ok()) return std::move(id).error();
  return {};
}

// Runs `fn` in one write transaction on `dir`'s database.
template <class T, class Fn>
Result<T> in_transaction(const std::string& dir, bool init, Fn fn) {
  Db db;
  ICHIDO_TRY(open_dir(db, dir, init));
  ICHIDO_TRY(db.exec("BEGIN IMMEDIATE", "begin a transaction"));
  SqliteTables tables(db);
  Result<T> r = fn(tables);
  if (!r.ok()) {
    (void)db.exec("ROLLBACK", "roll back");
    return r;
  }
  ICHIDO_TRY(db.exec("COMMIT", "commit to disk"));
  return r;
}

std::string seq_path(const std::string& dir) { return dir + "/tokens.seq"; }
std::string legacy_rev_path(const std::string& dir) { return dir + "/tokens.rev"; }

constexpr std::size_t kWord = sizeof(std::uint64_t);
static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free,
              "the counter is shared between processes: only a lock-free atomic works there");

// Opens DIR/tokens.seq, creating it when missing, and makes it at least 8 bytes long without
// touching bytes already there (two processes may do this at once, or one after an increment).
// fallocate(2) allocates the block as well, so a later write through a mapping needs no new space;
// where the file system has no fallocate, ftruncate(2) extends it (zeros). -1 on failure.
// Mode 0644: a count of revokes is no secret, and a server running as another user than the CLI
// that made the file (root, say) can still read it through its path.
int open_seq(const std::string& dir, struct stat* st) {
  const int fd = ::open(seq_path(dir).c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return -1;
  bool ok = ::fstat(fd, st) == 0;
  if (ok && st->st_size < static_cast<off_t>(kWord)) {
    ok = ::fallocate(fd, 0, 0, kWord) == 0 ||
         ((errno == EOPNOTSUPP || errno == ENOSYS) && ::ftruncate(fd, kWord) == 0);
  }
  if (!ok) {
    ::close(fd);
    return -1;
  }
  return fd;
}

core::AuditEntry cli_audit(std::string action, std::string ns, std::string detail, TimeMs now) {
  core::AuditEntry e;
  e.at = now;
  e.actor = "cli";
  e.action = std::move(action);
  e.ns = std::move(ns);
  e.status = 200;
  e.remote = "local";
  e.detail = std::move(detail);
  return e;
}

}  // namespace

Result<void> bump_tokens_revision(const std::string& dir) {
  // Servers from before tokens.seq watch the size of tokens.rev. Best effort: they also re-read
  // their tokens every second.
  if (const int fd = ::open(legacy_rev_path(dir).c_str(),
                            O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
      fd >= 0) {
    (void)!::write(fd, "+", 1);
    ::close(fd);
  }
  struct stat st{};
  const int fd = open_seq(dir, &st);
  void* p = fd < 0 ? MAP_FAILED : ::mmap(nullptr, kWord, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (fd >= 0) ::close(fd);  // the mapping keeps the file
  if (p == MAP_FAILED) {
    return Error(errc::internal, "The change is saved, but " + seq_path(dir) +
                                     " could not be written: a running server applies it "
                                     "within a second.");
  }
  std::atomic_ref<std::uint64_t>(*static_cast<std::uint64_t*>(p)).fetch_add(1);
  ::munmap(p, kWord);
  return {};
}

std::uint64_t tokens_revision(const std::string& dir) {
  const int fd = ::open(seq_path(dir).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return 0;
  std::uint64_t value = 0;
  const bool whole = ::pread(fd, &value, kWord, 0) == static_cast<ssize_t>(kWord);
  ::close(fd);
  return whole ? value : 0;
}

TokensRevision::TokensRevision(std::string dir) : dir_(std::move(dir)) { map_path(); }

TokensRevision::~TokensRevision() {
  for (void* p : mappings_) ::munmap(p, kWord);
}

void TokensRevision::recheck() noexcept {
  struct stat st{};
  if (word_.load() != nullptr && ::stat(seq_path(dir_).c_str(), &st) == 0 &&
      static_cast<std::uint64_t>(st.st_dev) == dev_ &&
      static_cast<std::uint64_t>(st.st_ino) == ino_ && st.st_size >= static_cast<off_t>(kWord)) {
    return;  // still the mapped file
  }
  map_path();
}

void TokensRevision::map_path() noexcept {
  struct stat st{};
  // open_seq may have to create or extend the file; the mapping is read-only.
  const int fd = open_seq(dir_, &st);
  if (fd < 0) {
    word_.store(nullptr, std::memory_order_release);  // the path, per call, until a recheck
    return;
  }
  const auto dev = static_cast<std::uint64_t>(st.st_dev);
  const auto ino = static_cast<std::uint64_t>(st.st_ino);
  if (word_.load() != nullptr && dev == dev_ && ino == ino_) {  // the mapped file, extended
    ::close(fd);
    return;
  }
  void* p = static_cast<int>(mappings_.size()) >= kMaxMappings
                ? MAP_FAILED
                : ::mmap(nullptr, kWord, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    word_.store(nullptr, std::memory_order_release);
    return;
  }
  // Best effort: keeps the page resident, so an idle server's next request does not wait for
  // the disk to read it again.
  (void)::mlock(p, kWord);
  mappings_.push_back(p);
  dev_ = dev;
  ino_ = ino;
  word_.store(static_cast<std::uint64_t*>(p), std::memory_order_release);
}

Result<NewToken> create_token_in_dir(const std::string& dir, core::Role role,
                                     const std::string& scope, const std::string& label,
                                     std::optional<TimeMs> expires_at, TimeMs now, bool init) {
  NewToken out;
  out.secret = new_token_secret();
  auto info = core::make_token(new_token_id(), out.secret, role, scope, label, now, expires_at);
  if (!info.ok()) return std::move(info).error();
  out.info = std::move(*info);
  auto stored =
      in_transaction<core::TokenInfo>(dir, init, [&](SqliteTables& t) -> Result<core::TokenInfo> {
        ICHIDO_TRY(t.insert_token(out.info));
        auto id = t.insert_audit(
            cli_audit("token create", out.info.scope,
                      "id " + out.info.id + ", role " + std::string(core::to_string(role)), now));
        if (!id.ok()) return std::move(id).error();
        return out.info;
      });
  if (!stored.ok()) return std::move(stored).error();
  // No revision bump: a running server looks up a token it does not know (token_auth.h, A1).
  return out;
}

Result<std::vector<core::TokenInfo>> list_tokens_in_dir(const std::string& dir) {
  return in_transaction<std::vector<core::TokenInfo>>(
      dir, false, [](SqliteTables& t) { return t.list_tokens(); });
}

Result<core::TokenInfo> revoke_token_in_dir(const std::string& dir, const std::string& id,
                                            TimeMs now) {
  auto r =
      in_transaction<core::TokenInfo>(dir, false, [&](SqliteTables& t) -> Result<core::TokenInfo> {
        auto tok = revoke_token_rows(t, id, now);
        if (!tok.ok()) return tok;
        auto a = t.insert_audit(cli_audit("token revoke", tok->scope, "id " + id, now));
        if (!a.ok()) return std::move(a).error();
        return tok;
      });
  if (!r.ok()) return r;
  ICHIDO_TRY(bump_tokens_revision(dir));
  return r;
}

}  // namespace ichido::store::sqlite
