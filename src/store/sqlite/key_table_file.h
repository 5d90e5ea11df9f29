// key_table_file: the key table's snapshot on disk, `keys.idx` beside the database (decision
// 143 §6–§7). KeyIndex (key_index.h) writes it and loads it at start-up.
//
// The table is not written on the commit path. A snapshot holds every slot of the rows with
// kseq ≤ `last_kseq`; at start-up the store loads it and adds the rows with a larger kseq from
// the `…_by_kseq` indexes. Anything the reader refuses — no file, a torn, truncated or foreign
// file, a damaged chunk, slots that cannot form a table — means a full rebuild from the tables,
// never a table with a missing slot. Which snapshot is current is the database's word (the
// snapshot id it records, decision 143 §6): the reader returns the id, the caller compares.
//
// Format 1, every integer little-endian:
//   bytes 0–63   magic "ichidoKT", format (u32) = 1, log2 of the slot count (u32), the hash
//                secret k0, k1 (u64 each), keys (u64), last_kseq (u64), snapshot id (u64),
//                slots per chunk (u32), 0 (u32)
//   then         one checksum (u64) per chunk of slots, in order
//   then         the header checksum (u64): SipHash-1-3 under key (0, 0) of everything before it
//   then         the slots (u64 each), 2^log2 of them, in chunks of `slots per chunk`
// A chunk's checksum is SipHash-1-3 under key (0, 0) of its slots' bytes. The file is written to a
// temporary name, fsynced, renamed, and the directory fsynced (replace_file_durably).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ichido/result.h"
#include "store/sqlite/data_dir.h"
#include "store/sqlite/key_table.h"

namespace ichido::store::sqlite {

inline constexpr std::uint32_t kKeyTableFileFormat = 1;
inline constexpr std::uint32_t kKeyTableChunkSlots = 1 << 17;  // 1 MiB of slots per checksum

struct KeyTableFileInfo {
  KeySecret secret;
  std::uint64_t last_kseq = 0;    // every row with kseq ≤ this has its slot in the file
  std::uint64_t snapshot_id = 0;  // the id the database records for this snapshot
};

// Writes a snapshot chunk by chunk, so that its caller can copy each chunk from a live table
// under a lock held only for that chunk (KeyIndex). Chunks are added in order; the keys counted
// in them go into the header. restart() starts over (the table changed shape meanwhile).
class KeyTableFileWriter {
 public:
  static Result<KeyTableFileWriter> start(const std::string& path, int log2,
                                          std::uint32_t chunk_slots = kKeyTableChunkSlots);
  std::size_t chunk_count() const { return sums_.size(); }
  // The slots of chunk c: [first, first + count).
  std::size_t chunk_first(std::size_t c) const { return c * chunk_slots_; }
  std::size_t chunk_length(std::size_t c) const;
  // The next chunk, as many slots as chunk_length() says.
  Result<void> add_chunk(std::span<const std::uint64_t> slots);
  Result<void> restart(int log2);
  // Every chunk added: writes the header and makes the file durable (DurableFile::commit).
  Result<void> finish(const KeyTableFileInfo& info);

 private:
  KeyTableFileWriter(DurableFile file, std::uint32_t chunk_slots)
      : file_(std::move(file)), chunk_slots_(chunk_slots) {}
  Result<void> begin(int log2);
  DurableFile file_;
  std::uint32_t chunk_slots_;
  int log2_ = 0;
  std::vector<std::uint64_t> sums_;
  std::size_t added_ = 0;
  std::uint64_t keys_ = 0;
};

// Writes `table` with `info` to `path` durably. `chunk_slots` (a power of two, for tests) sets
// the checksum granularity. Errors: store_unavailable naming the file (the previous file, if
// any, is then unchanged).
Result<void> write_key_table_file(const std::string& path, const KeyTable& table,
                                  const KeyTableFileInfo& info,
                                  std::uint32_t chunk_slots = kKeyTableChunkSlots);

struct KeyTableFile {
  KeyTable table;
  KeyTableFileInfo info;
};

// The table and info in `path`, or nullopt with the reason in `why` ("no file", the first check
// that failed, or the system's error reading it).
std::optional<KeyTableFile> read_key_table_file(const std::string& path, std::string* why);

}  // namespace ichido::store::sqlite
