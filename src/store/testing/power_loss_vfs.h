// PowerLossVfs: a SQLite VFS shim over the default VFS that remembers, for every database file
// and WAL opened through it, what an fsync has made durable — so a test can cut the power at any
// instant and open what a machine would find on its disk afterwards.
//
// A kill -9 loses nothing the kernel holds: every write() survives it, synced or not, so the
// crash tests (tests/integration, the soak) cannot tell an answer given after its fsync from one
// given before. This shim can. Its model of a disk is the strict one: at a power cut, a file holds
// exactly the bytes it held at its last completed fsync (xSync), nothing written since. Real disks
// may keep some of the later writes too; SQLite copes with that on its own (checksummed WAL
// frames), and the promise under test — an answered change survives — must hold in the worst case.
//
//   register_power_loss_vfs();                       // once; named kPowerLossVfs
//   options.vfs = kPowerLossVfs;                     // SqliteStore::Options
//   auto disk = power_loss().cut();                  // path -> durable bytes, at one instant
//
// Only files SQLite opens as a main database or a WAL are kept (the wal-index is rebuilt from the
// WAL after a power cut; rollback journals are not used in WAL mode once a store is open). A
// kept file must not be deleted while another handle has it open (SQLite deletes a WAL only when
// its last connection closes it). Every write and fsync through the shim takes one mutex, so a
// cut sees each fsync whole or not at all; that serializes I/O, which is fine for tests and
// nothing else.
#pragma once

#include <atomic>
#include <map>
#include <string>

namespace ichido::store_testing {

inline constexpr const char* kPowerLossVfs = "ichido-power-loss";

class PowerLoss {
 public:
  // The durable content of every file kept, by the path SQLite opened it with, as of now.
  std::map<std::string, std::string> cut();
  // Forgets every file (call between tests; files opened later start from their content then).
  void reset();

  std::atomic<long> wal_headers{0};  // writes of a WAL's header: a new WAL, or one started over
};

PowerLoss& register_power_loss_vfs();
PowerLoss& power_loss();

}  // namespace ichido::store_testing
