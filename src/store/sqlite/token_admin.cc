#include "store/sqlite/token_admin.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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

std::string rev_path(const std::string& dir) { return dir + "/tokens.rev"; }

// Tells a running server that the tokens changed (see tokens_revision). Errors: internal, when
// the file cannot be written — the change is committed, but the server learns of it only at
// its next periodic refresh (within a second).
Result<void> bump_revision(const std::string& dir) {
  const std::string path = rev_path(dir);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  const bool ok = fd >= 0 && ::write(fd, "+", 1) == 1;
  if (fd >= 0) ::close(fd);
  if (!ok) {
    return Error(errc::internal, "The change is saved, but " + path +
                                     " could not be written: a running server applies it "
                                     "within a second.");
  }
  return {};
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

std::uint64_t tokens_revision(const std::string& dir) {
  struct stat st{};
  if (::stat(rev_path(dir).c_str(), &st) != 0) return 0;
  return static_cast<std::uint64_t>(st.st_size);
}

TokensRevision::TokensRevision(std::string dir) : dir_(std::move(dir)) { reopen(); }

TokensRevision::~TokensRevision() {
  if (const int fd = fd_.load(); fd >= 0) ::close(fd);
}

void TokensRevision::reopen() const {
  const int fresh =
      ::open(rev_path(dir_).c_str(), O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fresh < 0) return;
  int expected = -1;
  if (fd_.compare_exchange_strong(expected, fresh)) return;  // the first open
  // Put the new file under the old number: readers never see a closed or reused number.
  (void)::dup2(fresh, expected);
  ::close(fresh);
}

std::uint64_t TokensRevision::operator()() const {
  const int fd = fd_.load(std::memory_order_acquire);
  struct stat st{};
  if (fd >= 0 && ::fstat(fd, &st) == 0 && st.st_nlink > 0) {
    return static_cast<std::uint64_t>(st.st_size);
  }
  reopen();  // removed or replaced (or never opened): the path's file from now on
  return tokens_revision(dir_);
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
  ICHIDO_TRY(bump_revision(dir));
  return r;
}

}  // namespace ichido::store::sqlite
