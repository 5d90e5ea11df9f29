// Operator tools on an embedded store's data directory (data_dir.h): what `ichido check`,
// `ichido backup` and `ichido restore` run. None of them goes through a server.
//
//   M1. check and backup only read: they open the database read-only, never take DIR/LOCK and
//       work while a server serves the directory (WAL: a reader never blocks the writer).
//   M2. A backup is one consistent snapshot: every page is copied inside one read transaction,
//       so it holds exactly the commits that had finished when it started — never half a batch
//       — however long the copy takes and however much the server writes meanwhile. It is
//       written to FILE.partial, fsynced, checked (quick_check) and only then renamed to FILE:
//       FILE either does not exist or is a complete, checked database.
//   M3. restore needs the directory to itself (it takes DIR/LOCK; a running server holds it,
//       so restore refuses), checks the backup (integrity_check) before touching anything,
//       never deletes: the database it replaces is renamed aside (ichido.db.replaced-<time>).
//   M4. Fencing tokens never go backwards after a restore: the directory's ichido.id (its
//       token high-water mark, data_dir.h D4) is kept, so the restored store hands out tokens
//       above every token the replaced one ever handed out. Restoring into a directory without
//       ichido.id (a new machine) cannot know the lost server's mark: tokens continue above
//       the backup's own (and --token-floor), and the result says so.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ichido/result.h"

namespace ichido::store::sqlite {

struct CheckReport {
  std::string db_path;
  std::uint64_t bytes = 0;
  std::int64_t pages = 0;
  int schema_version = 0;
  std::vector<std::string> problems;  // empty: no damage found
};

// PRAGMA integrity_check (or quick_check) of DIR/ichido.db, at most `max_problems` listed.
// Damage is a report with problems, not an error. Errors: store_unavailable (no store in
// `dir`, the file cannot be opened).
Result<CheckReport> check_store(const std::string& dir, bool quick, int max_problems = 100);

struct CopyProgress {
  std::int64_t done_pages = 0;
  std::int64_t total_pages = 0;
};

struct BackupReport {
  std::uint64_t bytes = 0;
  std::int64_t pages = 0;
  std::int64_t token = 0;  // the token sequence in the snapshot
};

// Copies DIR/ichido.db to `to` (M1, M2). `progress` is called after every step of the copy.
// Errors: store_unavailable (no store, cannot read it, cannot write `to`; `to` untouched),
// store_corrupt (the snapshot fails quick_check: nothing is left at `to`), invalid_request
// (`to` exists, or is inside `dir`).
Result<BackupReport> backup_store(const std::string& dir, const std::string& to,
                                  const std::function<void(const CopyProgress&)>& progress = {});

struct RestoreOptions {
  std::int64_t token_floor = 0;  // M4: for a directory without ichido.id
};

struct RestoreReport {
  std::string replaced;        // where the replaced database went ("" when there was none)
  bool kept_identity = false;  // the directory's ichido.id was kept (M4)
  std::int64_t tokens_continue_above = 0;
};

// Puts the backup `from` in place as DIR/ichido.db (M3, M4) and opens it once as a server
// would (migrating an older schema, moving the token sequence up to the mark).
// Errors: store_unavailable (a server runs on `dir`; cannot write), store_corrupt (the backup
// is damaged or not an ichido database; nothing changed), invalid_request (no such file).
Result<RestoreReport> restore_store(const std::string& from, const std::string& dir,
                                    const RestoreOptions& options);

}  // namespace ichido::store::sqlite
