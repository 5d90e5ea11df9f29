// PowerLossVfs: a SQLite VFS shim over the default VFS that remembers, for every database file
// and WAL opened through it, what an fsync has made durable — so a test can cut the power at any
// instant and open what a machine would find on its disk afterwards.
//
// A kill -9 loses nothing the kernel holds: every write() survives it, synced or not, so the
// crash tests (tests/integration, the soak) cannot tell an answer given after its fsync from one
// given before. This shim can. `cut` models the strict disk: at a power cut, a file holds exactly
// the bytes it held at its last completed fsync (xSync), nothing written since. Real disks also
// keep some of the later writes, in any order and in pieces: `cut_keeping_some` models that —
// each 512-byte sector written since the last fsync is kept or lost on its own (a seeded coin), and
// a truncate since then is kept or not. Sectors are whole (a sector write is atomic, and writing
// part of one leaves the rest of it alone: SQLite's "powersafe overwrite", which it assumes on
// Unix); torn frames and reordered writes are what SQLite's checksummed WAL must survive, and the
// promise under test — an answered change survives — must hold in both models.
//
//   register_power_loss_vfs();                       // once; named kPowerLossVfs
//   options.vfs = kPowerLossVfs;                     // SqliteStore::Options
//   auto disk = power_loss().cut();                  // path -> durable bytes, at one instant
//   auto torn = power_loss().cut_keeping_some(seed); // the same, plus some unsynced sectors
//   auto mid = power_loss().cut_at_next_sync(seed, 10s);  // that, as the next fsync starts
//
// Only files SQLite opens as a main database or a WAL are kept (the wal-index is rebuilt from the
// WAL after a power cut; rollback journals are not used in WAL mode once a store is open). A
// kept file must not be deleted while another handle has it open (SQLite deletes a WAL only when
// its last connection closes it). Every write and fsync through the shim takes one mutex, so a
// cut sees each fsync whole or not at all; that serializes I/O, which is fine for tests and
// nothing else.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace ichido::store_testing {

inline constexpr const char* kPowerLossVfs = "ichido-power-loss";

class PowerLoss {
 public:
  // The durable content of every file kept, by the path SQLite opened it with, as of now.
  std::map<std::string, std::string> cut();
  // The same instant on a disk that kept a random part of what was written since each file's last
  // fsync: every unsynced 512-byte sector independently (with the file's content at the cut, the
  // last write to that sector), and a truncate since the last fsync with probability 1/2. Bytes
  // between the durable end and a kept sector beyond it read as zeros. Adds the sectors it kept to
  // `unsynced_sectors_kept`.
  std::map<std::string, std::string> cut_keeping_some(std::uint64_t seed);
  // cut_keeping_some at the instant the next fsync of a kept file starts (by any thread; that
  // fsync then runs as usual): the moment when the most is written and not yet durable — a
  // commit's WAL frames, a checkpoint's copy into the database. Waits for that fsync;
  // nullopt if none started within `timeout`. Concurrent calls take turns.
  std::optional<std::map<std::string, std::string>> cut_at_next_sync(
      std::uint64_t seed, std::chrono::milliseconds timeout);
  // Forgets every file (call between tests; files opened later start from their content then).
  void reset();

  std::atomic<long> wal_headers{0};  // writes of a WAL's header: a new WAL, or one started over
  std::atomic<long> unsynced_sectors_kept{0};  // by cut_keeping_some, since the last reset
};

PowerLoss& register_power_loss_vfs();
PowerLoss& power_loss();

}  // namespace ichido::store_testing
