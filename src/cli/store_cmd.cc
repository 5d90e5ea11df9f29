#include "cli/store_cmd.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include "store/sqlite/maintenance.h"

namespace ichido::cli {
namespace {

namespace sq = store::sqlite;

int fail(const Error& e) {
  std::cerr << "error: " << to_string(e.code) << ": " << e.message << "\n";
  return e.code == errc::invalid_request ? kExitUsage : kExitServerError;
}

std::string mib(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

// "backup: 41% (12288 of 30000 pages)" on stderr, at most once a second and only for copies
// that take that long; on a terminal the line is rewritten in place.
class ProgressLine {
 public:
  explicit ProgressLine(const char* what)
      : what_(what), tty_(::isatty(2) == 1), start_(Clock::now()), last_(start_) {}
  void operator()(const sq::CopyProgress& p) {
    const auto now = Clock::now();
    if (now - last_ < std::chrono::seconds(1) || p.total_pages == 0) return;
    last_ = now;
    shown_ = true;
    std::fprintf(stderr, "%s%s: %d%% (%lld of %lld pages)%s", tty_ ? "\r" : "", what_,
                 static_cast<int>(100 * p.done_pages / p.total_pages),
                 static_cast<long long>(p.done_pages), static_cast<long long>(p.total_pages),
                 tty_ ? "" : "\n");
  }
  void end() {
    if (shown_ && tty_) std::fprintf(stderr, "\n");
  }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  using Clock = std::chrono::steady_clock;
  const char* what_;
  bool tty_;
  bool shown_ = false;
  Clock::time_point start_, last_;
};

struct StoreOptions {
  std::string data = "./ichido-data";
  std::string to;
  std::string from;
  bool quick = false;
  std::int64_t token_floor = 0;
};

}  // namespace

void add_store_commands(CommandTree& tree) {
  auto o = std::make_shared<StoreOptions>();

  CLI::App* check = tree.add_local_command(
      tree.root(), "check",
      "Check the embedded store for damage (PRAGMA integrity_check; works while a server runs). "
      "Exit 0: no damage found; 1: damaged or cannot be checked",
      "ichido check --data ./ichido-data", [o]() -> int {
        auto r = sq::check_store(o->data, o->quick);
        if (!r.ok()) return fail(r.error());
        if (r->problems.empty()) {
          std::cout << "ok: " << r->db_path << " (" << mib(r->bytes) << ", " << r->pages
                    << " pages, schema " << r->schema_version
                    << "): " << (o->quick ? "quick_check" : "integrity_check")
                    << " found no damage\n";
          return kExitOk;
        }
        std::cout << "damaged: " << r->db_path << " (" << r->problems.size()
                  << (r->problems.size() >= 100 ? "+" : "") << " problems):\n";
        for (const auto& p : r->problems) std::cout << "  " << p << "\n";
        std::cout << "Restore it from a backup: stop the server, then ichido restore --from FILE "
                     "--data "
                  << o->data << "\n";
        return kExitServerError;
      });
  check->add_option("--data", o->data, "Data directory of the server")->capture_default_str();
  check->add_flag("--quick", o->quick,
                  "PRAGMA quick_check instead: O(pages), without cross-checking the indexes");

  CLI::App* backup = tree.add_local_command(
      tree.root(), "backup",
      "Copy the embedded store to a file: one consistent snapshot, taken while the server runs "
      "(it keeps answering); the file is checked before it gets its name",
      "ichido backup --data ./ichido-data --to /backup/ichido-$(date +%F).db", [o]() -> int {
        ProgressLine line("backup");
        auto r = sq::backup_store(o->data, o->to, [&](const sq::CopyProgress& p) { line(p); });
        line.end();
        if (!r.ok()) return fail(r.error());
        char secs[32];
        std::snprintf(secs, sizeof secs, "%.1f s", line.seconds());
        std::cout << "backed up " << o->data << " to " << o->to << " (" << mib(r->bytes) << ", "
                  << r->pages << " pages, tokens up to " << r->token << ", checked) in " << secs
                  << "\n";
        return kExitOk;
      });
  backup->add_option("--data", o->data, "Data directory of the server")->capture_default_str();
  backup->add_option("--to", o->to, "The backup file to write (must not exist)")->required();

  CLI::App* restore = tree.add_local_command(
      tree.root(), "restore",
      "Put a backup in place as the data directory's store (the server must be stopped). The "
      "replaced database is kept beside it; fencing tokens continue above every token the "
      "directory ever handed out",
      "ichido restore --from /backup/ichido-2026-11-30.db --data ./ichido-data", [o]() -> int {
        sq::RestoreOptions ro;
        ro.token_floor = o->token_floor;
        auto r = sq::restore_store(o->from, o->data, ro);
        if (!r.ok()) return fail(r.error());
        std::cout << "restored " << o->from << " into " << o->data << "\n";
        if (!r->replaced.empty()) {
          std::cout << "the database it replaced is kept as " << r->replaced << "\n";
        }
        std::cout << "fencing tokens continue above " << r->tokens_continue_above << "\n";
        if (!r->kept_identity) {
          std::cerr << "warning: " << o->data
                    << " had no ichido.id, so the token high-water mark of the server that "
                       "wrote this backup is unknown here: tokens continue above the backup's "
                       "own. If that server handed out tokens after the backup, restore again "
                       "with --token-floor above the highest token it gave.\n";
        }
        return kExitOk;
      });
  restore->add_option("--from", o->from, "The backup file (from ichido backup)")->required();
  restore->add_option("--data", o->data, "Data directory to restore into")->capture_default_str();
  restore
      ->add_option("--token-floor", o->token_floor,
                   "Fencing tokens continue above this (only needed when the directory has no "
                   "ichido.id, e.g. on a new machine)")
      ->check(CLI::NonNegativeNumber);
}

}  // namespace ichido::cli
