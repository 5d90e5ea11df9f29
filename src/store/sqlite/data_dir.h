// The embedded store's data directory and what it knows about itself.
//
//   DIR/ichido.db (+ -wal, -shm)  the database (schema: schema.cc)
//   DIR/ichido.id                 the store's identity: id, creation time, token high-water mark
//   DIR/LOCK                      held (flock) by the one process serving the directory
//   DIR/admin.token               the first admin token (server)
//   DIR/tokens.seq                the token CLI's revision counter, mapped by the server
//                                 (token_admin.h); DIR/tokens.rev, the same for older servers
//
// Why ichido.id lives beside the database, not in it: a database file that was emptied or
// deleted (`: > ichido.db`, a lost volume mount, a bad restore script) must not come back as an
// empty store whose counters restart and whose fencing tokens start again at 1 — the seeds' first
// rule, "if the stored number is missing, stop; never silently start again from 0". So:
//   D1. A directory with neither file is new: the first open creates both (`make run` just works).
//   D2. ichido.id present but ichido.db missing or empty: refused, naming the file and the ways
//       out (restore a backup; or `--init` to start a new, empty store on purpose).
//   D3. ichido.db present, ichido.id missing (a store from before ichido.id, a restored or copied
//       file): adopted, the identity is written.
//   D4. Fencing tokens never go below the high-water mark: every open moves the token sequence
//       up to the mark (a restored older database cannot hand out tokens again), and the writer
//       raises the mark (durably, before answering) before a token reaches it
//       (reserve_tokens). So a restart may skip up to kTokenBlock tokens; tokens only ever grow.
//       The database's own token row holds the last token committed, so D3 without ichido.id
//       continues above every token handed out as well.
// Errors here are start-up errors: their messages say what is wrong with the directory and what
// to do, in start-up words (not the API's "retry the same request").
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ichido/clock.h"
#include "ichido/result.h"
#include "store/sqlite/db.h"
#include "store/sqlite/schema.h"

namespace ichido::store::sqlite {

inline constexpr std::int64_t kTokenBlock = 100000;

struct Identity {
  std::string store_id;  // 32 hex characters
  TimeMs created_at = 0;
  std::int64_t token_high_water = 0;  // no token above this was ever handed out
};

std::string db_path_of(const std::string& dir);
std::string identity_path_of(const std::string& dir);

// The identity file, nullopt when there is none. Errors: a file that cannot be read or parsed.
Result<std::optional<Identity>> read_identity(const std::string& dir);
// Writes it durably (temporary file, fsync, rename, fsync of the directory).
Result<void> write_identity(const std::string& dir, const Identity& id);

struct OpenDirOptions {
  bool create_if_new = true;  // D1: create a store in a new directory (the server); the token
                              // CLI passes false, so a typo in --data is not a new store
  bool init = false;          // start a new store where D2 would refuse
  std::string vfs;            // SQLite VFS name (tests inject faults); "" = default
  // D4 at open: move the token sequence up to the mark and reserve the next block. Only the
  // process that serves the directory does this; tools (the token CLI) leave tokens alone.
  bool serve = true;
  OnUpgrade on_upgrade;  // told before an existing database's schema is upgraded (schema.h)
};

struct OpenedDir {
  Identity identity;  // as written (or, read-only, as found)
  // The database can only be read (a read-only file or mount): nothing was written — no
  // migration (the schema must be current), no identity, no token move. D4's move of the token
  // sequence up to `token_floor` is then left to the first write that succeeds.
  bool read_only = false;
  std::int64_t token_floor = 0;
};

// Opens the database of `dir` (creating the directory, 0700, when new) on `db`, applying D1–D4
// and the schema migrations. The caller holds DIR/LOCK when it serves the directory. Errors:
// store_unavailable (cannot create or open; D2; not a store and !create_if_new; an old schema on
// a read-only database), store_corrupt (not a database, or damaged), and migrate()'s.
Result<OpenedDir> open_data_dir(Db& db, const std::string& dir, const OpenDirOptions& options,
                                TimeMs now);

// Looks for damage in `dir`'s database before anything is written to the directory: a start
// that ends in "damaged" leaves every file as it found it — no page, no -wal or -shm file, no
// identity or token mark (writing into a damaged b-tree may spread the damage, and an operator
// wants to keep the copy for recovery). Reads, through Db::open_untouched, the schema and the
// token sequence (what open_data_dir reads before it writes) and, when the file is at most
// `quick_check_max_bytes` (0: never), runs PRAGMA quick_check over every page. Nothing to do
// without a database. Errors: store_corrupt (needs_operator) naming the damage, `ichido check`
// and `ichido restore`; store_unavailable when the file cannot be read.
Result<void> check_before_writing(const std::string& dir, std::uint64_t quick_check_max_bytes,
                                  const std::string& vfs = "");

// Moves the token sequence up to `floor` (never down), in the caller's transaction if any.
Result<void> raise_token_sequence(Db& db, std::int64_t floor);

// PRAGMA quick_check (quick: O(pages), no index cross-checks) or integrity_check: the problems
// found, at most `max` (empty: no damage found). Errors: the check could not run — a file that
// is not a database at all comes back as one problem, not as an error.
Result<std::vector<std::string>> integrity_check(Db& db, bool quick, int max);

// fsync(2) of a file (flags O_RDONLY) or directory (O_RDONLY | O_DIRECTORY). Errors:
// store_unavailable naming the path.
Result<void> sync_path(const std::string& path, int flags);

// A file that replaces `path` durably once complete: written as a temporary file beside it
// (path + ".tmp", with `mode`), then commit() fsyncs it, renames it over `path` and fsyncs the
// directory. Until commit() succeeds `path` is as it was; a DurableFile dropped before that
// leaves its temporary file, which the next one truncates. Errors: store_unavailable naming the
// file and the system's reason. One thread at a time.
class DurableFile {
 public:
  static Result<DurableFile> create(const std::string& path, unsigned mode = 0600);
  DurableFile(DurableFile&& other) noexcept;
  DurableFile& operator=(DurableFile&&) = delete;
  DurableFile(const DurableFile&) = delete;
  ~DurableFile();

  Result<void> append(std::string_view bytes);
  Result<void> write_at(std::uint64_t offset, std::string_view bytes);
  // Back to empty (a write that starts over).
  Result<void> truncate();
  Result<void> commit();

 private:
  DurableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  Result<void> fail(const char* what, int err);
  std::string path_;
  int fd_ = -1;
  std::uint64_t end_ = 0;  // where append() writes
};

// Replaces the file `path` durably with `pieces`, one after the other (DurableFile: a temporary
// file with `mode`, fsynced, renamed over `path`, the directory fsynced). Errors:
// store_unavailable naming the file and the system's reason; `path` is then as it was (a
// partial temporary file may remain, which the next call truncates).
Result<void> replace_file_durably(const std::string& path, std::span<const std::string_view> pieces,
                                  unsigned mode = 0600);

// The token sequence's current value in `db` (0 when no token was ever drawn).
Result<std::int64_t> current_token(Db& db);

}  // namespace ichido::store::sqlite
