// ichido-preload: fills an ichido data directory with N issued numbers of one counter, or N
// completed once records, straight into the SQLite file, for the scale benchmark
// (bench/run --scale N). Going through HTTP would take hours at durable speed; this writes
// the same rows the store writes for
// - `POST …/next {"key": "pre-<i>"}` on a counter with period "none" and format R-{seq:6}, or
// - `POST …/once/begin {"key": "pre-<i>", "owner": "preload"}` then `…/once/complete` with the
//   result {"ok":true} (tokens drawn from the one token sequence, which is advanced past them;
//   finished now, so the retention purge keeps them for its 30 days).
//
// The server must be stopped, and the counter must exist (create it through the API first). Rows
// are inserted in transactions of 100 000 with synchronous=OFF (a crash during preloading only
// spoils the benchmark's copy); the period row then says last_value = issued_count = start + N.
// The WAL is checkpointed and truncated at the end, so the server starts with a clean file.
//
//   ichido-preload --data DIR --ns NS --counter NAME --count N
//   ichido-preload --data DIR --ns NS --once --count N
#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "options.h"

namespace {

bool check(sqlite3* db, int rc, const char* what) {
  if (rc == SQLITE_OK || rc == SQLITE_DONE || rc == SQLITE_ROW) return true;
  std::fprintf(stderr, "ichido-preload: %s: %s\n", what, sqlite3_errmsg(db));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, ns = "bench", counter;
  std::uint64_t count = 0;
  bool once = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--once") {
      once = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "ichido-preload: %s needs a value\n", a.c_str());
      return 2;
    }
    const std::string v = argv[++i];
    if (a == "--data")
      dir = v;
    else if (a == "--ns")
      ns = v;
    else if (a == "--counter")
      counter = v;
    else if (a == "--count") {
      const auto n = ichido::bench::parse_uint(v, 1, 1'000'000'000);
      if (!n) {
        std::fprintf(stderr, "ichido-preload: bad --count\n");
        return 2;
      }
      count = *n;
    } else {
      std::fprintf(stderr, "ichido-preload: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (dir.empty() || counter.empty() == !once || count == 0) {
    std::fprintf(
        stderr, "usage: ichido-preload --data DIR [--ns NS] (--counter NAME | --once) --count N\n");
    return 2;
  }
  sqlite3* db = nullptr;
  const std::string path = dir + "/ichido.db";
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    std::fprintf(stderr, "ichido-preload: cannot open %s: %s\n", path.c_str(), sqlite3_errmsg(db));
    return 1;
  }
  auto exec = [&](const char* sql) {
    return check(db, sqlite3_exec(db, sql, nullptr, nullptr, nullptr), sql);
  };
  if (!exec("PRAGMA synchronous=OFF; PRAGMA cache_size=-262144; PRAGMA busy_timeout=5000"))
    return 1;
  const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const auto t0 = std::chrono::steady_clock::now();
  auto progress = [&](std::uint64_t i) {
    if (i % 1000000 == 0 || i == count)
      std::fprintf(stderr, "ichido-preload: %llu rows (%.0f s)\n",
                   static_cast<unsigned long long>(i),
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  };
  // Runs q once per row 1..count (bind(i) binds row i), in transactions of 100 000, then finalizes
  // it.
  auto load = [&](sqlite3_stmt* q, auto&& bind) {
    for (std::uint64_t i = 1; i <= count; ++i) {
      if (i % 100000 == 1 && !exec("BEGIN")) return false;
      bind(i);
      if (!check(db, sqlite3_step(q), "insert")) return false;
      sqlite3_reset(q);
      if (i % 100000 == 0 || i == count) {
        if (!exec("COMMIT")) return false;
        progress(i);
      }
    }
    sqlite3_finalize(q);
    return true;
  };
  auto finish = [&]() {
    if (!exec("PRAGMA synchronous=FULL; PRAGMA wal_checkpoint(TRUNCATE)")) return 1;
    return sqlite3_close(db) == SQLITE_OK ? 0 : 1;
  };

  if (once) {
    // Tokens continue the durable sequence, as begin would draw them.
    std::int64_t token = 0;
    sqlite3_stmt* q = nullptr;
    if (!check(db,
               sqlite3_prepare_v2(db, "SELECT value FROM sequences WHERE name = 'token'", -1, &q,
                                  nullptr),
               "prepare"))
      return 1;
    if (sqlite3_step(q) == SQLITE_ROW) token = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    if (!check(
            db,
            sqlite3_prepare_v2(
                db,
                "INSERT INTO once_records (ns, key, state, owner, fingerprint, token, attempt, "
                "max_attempts, lease_expires_at, result, last_error, holder_done, created_at, "
                "updated_at, finished_at) VALUES (?, ?, 'completed', 'preload', NULL, ?, 1, 5, ?, "
                "'{\"ok\":true}', '', 1, ?, ?, ?)",
                -1, &q, nullptr),
            "prepare insert"))
      return 1;
    char key[48];
    const bool loaded = load(q, [&](std::uint64_t i) {
      std::snprintf(key, sizeof key, "pre-%llu", static_cast<unsigned long long>(i));
      sqlite3_bind_text(q, 1, ns.c_str(), -1, SQLITE_STATIC);
      sqlite3_bind_text(q, 2, key, -1, SQLITE_STATIC);
      sqlite3_bind_int64(q, 3, token + static_cast<std::int64_t>(i));
      sqlite3_bind_int64(q, 4, now_ms + 60000);
      sqlite3_bind_int64(q, 5, now_ms);
      sqlite3_bind_int64(q, 6, now_ms);
      sqlite3_bind_int64(q, 7, now_ms);
    });
    if (!loaded) return 1;
    const std::string up = "INSERT INTO sequences (name, value) VALUES ('token', " +
                           std::to_string(token + static_cast<std::int64_t>(count)) +
                           ") ON CONFLICT (name) DO UPDATE SET value = excluded.value";
    if (!exec(up.c_str())) return 1;
    return finish();
  }

  sqlite3_stmt* q = nullptr;
  std::int64_t id = 0, start = 0;
  if (!check(
          db,
          sqlite3_prepare_v2(db, "SELECT id, start, period FROM counters WHERE ns = ? AND name = ?",
                             -1, &q, nullptr),
          "prepare"))
    return 1;
  sqlite3_bind_text(q, 1, ns.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(q, 2, counter.c_str(), -1, SQLITE_TRANSIENT);
  if (sqlite3_step(q) != SQLITE_ROW) {
    std::fprintf(stderr, "ichido-preload: no counter %s/%s in %s (create it first)\n", ns.c_str(),
                 counter.c_str(), path.c_str());
    return 1;
  }
  id = sqlite3_column_int64(q, 0);
  start = sqlite3_column_int64(q, 1);
  if (std::strcmp(reinterpret_cast<const char*>(sqlite3_column_text(q, 2)), "none") != 0) {
    std::fprintf(stderr, "ichido-preload: the counter must have period none\n");
    return 1;
  }
  sqlite3_finalize(q);

  // Continue after whatever the counter already issued.
  std::int64_t last = start, issued = 0;
  if (!check(db,
             sqlite3_prepare_v2(db,
                                "SELECT last_value, issued_count FROM counter_periods WHERE "
                                "counter_id = ? AND period = ''",
                                -1, &q, nullptr),
             "prepare"))
    return 1;
  sqlite3_bind_int64(q, 1, id);
  if (sqlite3_step(q) == SQLITE_ROW) {
    last = sqlite3_column_int64(q, 0);
    issued = sqlite3_column_int64(q, 1);
  }
  sqlite3_finalize(q);

  // Keyed numbers carry a key stamp from the sequence 'key' (schema 12, decision 143); the
  // server's key index finds them after its start-up rebuild (this tool leaves no keys.idx, and
  // removes one a server left, which no longer matches the rows).
  std::int64_t kseq = 0;
  if (!check(
          db,
          sqlite3_prepare_v2(db, "SELECT value FROM sequences WHERE name = 'key'", -1, &q, nullptr),
          "prepare"))
    return 1;
  if (sqlite3_step(q) == SQLITE_ROW) kseq = sqlite3_column_int64(q, 0);
  sqlite3_finalize(q);
  std::remove((dir + "/keys.idx").c_str());
  if (!check(db,
             sqlite3_prepare_v2(
                 db,
                 "INSERT INTO issued (counter_id, period, value, formatted, key, note, issued_at, "
                 "voided_at, void_reason, kseq) VALUES (?, '', ?, ?, ?, '', ?, NULL, '', ?)",
                 -1, &q, nullptr),
             "prepare insert"))
    return 1;
  char formatted[32], key[48];
  const bool loaded = load(q, [&](std::uint64_t i) {
    const std::int64_t v = last + static_cast<std::int64_t>(i);
    std::snprintf(formatted, sizeof formatted, "R-%06lld", static_cast<long long>(v));
    std::snprintf(key, sizeof key, "pre-%lld", static_cast<long long>(v));
    sqlite3_bind_int64(q, 1, id);
    sqlite3_bind_int64(q, 2, v);
    sqlite3_bind_text(q, 3, formatted, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 4, key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 5, now_ms);
    sqlite3_bind_int64(q, 6, kseq + static_cast<std::int64_t>(i));
  });
  if (!loaded) return 1;
  const std::string seq = "INSERT INTO sequences (name, value) VALUES ('key', " +
                          std::to_string(kseq + static_cast<std::int64_t>(count)) +
                          ") ON CONFLICT (name) DO UPDATE SET value = excluded.value";
  if (!exec(seq.c_str())) return 1;
  std::string up =
      "INSERT INTO counter_periods (counter_id, period, last_value, issued_count, voided_count) "
      "VALUES (" +
      std::to_string(id) + ", '', " + std::to_string(last + static_cast<std::int64_t>(count)) +
      ", " + std::to_string(issued + static_cast<std::int64_t>(count)) +
      ", 0) ON CONFLICT (counter_id, period) DO UPDATE SET last_value = excluded.last_value, "
      "issued_count = excluded.issued_count";
  if (!exec(up.c_str())) return 1;
  return finish();
}
