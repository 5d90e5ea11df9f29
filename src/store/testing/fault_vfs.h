// FaultVfs: a SQLite VFS shim (after SQLite's own test_vfs/"demovfs" shims) over the default VFS
// that fails writes, fsyncs and truncates on demand, simulates a full disk, or opens databases
// read-only — so the store's failure paths (store/sqlite/sqlite_store.h, "Failures") are tested
// against SQLite's real behaviour, not against a mock of it.
//
//   register_fault_vfs();                       // once; the VFS is named kFaultVfs
//   options.vfs = kFaultVfs;                    // SqliteStore::Options / Db::open
//   fault_plan().fail_syncs.store(1);           // the next fsync (of the WAL) fails
//
// Faults apply to files of the kinds in `plan.kinds` (the WAL by default: where commits go).
// Thread-safety: the plan is atomics; arm it from the test thread while the store runs.
#pragma once

#include <atomic>

namespace ichido::store_testing {

inline constexpr const char* kFaultVfs = "ichido-fault";

struct FaultPlan {
  enum Kind : int { kMainDb = 1, kWal = 2 };
  std::atomic<int> kinds{kWal};
  std::atomic<int> fail_writes{0};     // the next N writes fail with SQLITE_IOERR_WRITE
  std::atomic<int> fail_syncs{0};      // the next N fsyncs fail with SQLITE_IOERR_FSYNC
  std::atomic<int> fail_truncates{0};  // the next N truncates fail with SQLITE_IOERR_TRUNCATE
  std::atomic<bool> disk_full{false};  // every write fails with SQLITE_FULL while set
  // While set, a write that would lengthen its file fails with SQLITE_FULL, and one over bytes
  // the file already has goes through: a disk with no free block left.
  std::atomic<bool> no_free_blocks{false};
  std::atomic<bool> read_only{false};  // databases opened while set are opened read-only
  // Counters of what happened (to assert a fault was really hit).
  std::atomic<int> writes{0}, syncs{0}, injected{0};

  void reset() {
    kinds = kWal;
    fail_writes = fail_syncs = fail_truncates = 0;
    disk_full = no_free_blocks = read_only = false;
    writes = syncs = injected = 0;
  }
};

// Registers the VFS (idempotent) and returns its plan.
FaultPlan& register_fault_vfs();
FaultPlan& fault_plan();

}  // namespace ichido::store_testing
