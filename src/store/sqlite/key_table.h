// key_table: the embedded store's own index from a caller's key to the row that holds it
// (decision 143): the table and its hash. KeyIndex (key_index.h) shares it between the store's
// threads, and key_table_file.h writes and reads its snapshot.
//
// A unique b-tree index on callers' keys puts every new key at a random leaf page: ≈ 37 key
// comparisons and a whole 4 KiB WAL frame per key. For issued numbers' keys (`issued_by_key`)
// decision 143 replaces it with this table in memory plus an index in `kseq` order (a stamp that
// only grows, drawn with the row), which every new key appends to. Once records keep their
// `UNIQUE (ns, key)` index (decision 143 says why); KeyKind::once is defined but not used.
//
// The table maps hash(kind, scope, key) to the key's kseq. It never decides an answer by
// itself: a slot whose tag matches is a *candidate*, which the caller confirms by reading the
// row with that kseq and comparing scope and key (`find`'s `confirm`). So a wrong slot — a tag
// collision, a slot of a rolled-back batch, a slot of a deleted row — can cost a row read but
// never an answer; only a missing slot could, and the writer's rules (decision 143 §4–§7) see to
// it that every committed row has one.
//
// Layout: open addressing, linear probing, 2^b slots of 8 bytes, load ≤ 3/4 (≈ 11 bytes per key
// at 3/4, capacity a power of two). A slot is `tag << 36 | kseq`, 0 when empty:
//   - tag: the hash's top 28 bits. The home slot of a key is the tag's top b bits, so a slot
//     alone says where its key belongs: growth re-places slots without the keys, and a deletion
//     shifts the slots after it back (no tombstones). The tag's remaining 28 − b bits tell keys of
//     the same home apart: a lookup of a new key finds on average 3/4 · 2^-(28−b) false
//     candidates at full load (b = 22, 3 M keys: 1.2 %; b = 25, 25 M keys: 9.4 %).
//   - kseq: 36 bits, 1 … 2^36 − 1 (68.7 billion keys over a store's life; decision 143 records
//     what happens near the end).
// b ≤ 28: at most 2^28 slots, 201 M keys.
//
// Thread-safety: none. KeyIndex (key_index.h) shares a table between the writer, readers and a
// snapshot copy under its reader–writer lock (decision 143 §5).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ichido::store::sqlite {

// SipHash-c-d (Aumasson, Bernstein) under the 128-bit key (k0, k1) — k0 the key's first 8 bytes
// and k1 its last 8, each read little-endian — fed in pieces.
template <int C, int D>
class SipHasher {
 public:
  SipHasher(std::uint64_t k0, std::uint64_t k1);
  SipHasher& update(std::string_view bytes);
  std::uint64_t finish() const;  // the hash of everything given to update()

 private:
  void compress(std::uint64_t m);
  std::uint64_t v0_, v1_, v2_, v3_;
  std::uint64_t tail_ = 0;  // the last length % 8 bytes, little-endian
  std::uint64_t length_ = 0;
};
using SipHasher13 = SipHasher<1, 3>;
using SipHasher24 = SipHasher<2, 4>;

// The table's hash secret: callers choose keys, and an unkeyed hash would let them build long
// probe chains. Drawn once when the table is first built and kept with it (in its snapshot file,
// key_table_file.h).
struct KeySecret {
  std::uint64_t k0 = 0;
  std::uint64_t k1 = 0;
  static KeySecret random();  // from the system's random source (std::random_device)
};

enum class KeyKind : std::uint8_t {
  number = 1,  // an issued number's idempotency key; scope: the counter's id
  once = 2,    // a once record's key; scope: the namespace
};

// The hash that places a key: SipHash-1-3 under `secret` of kind ‖ scope's length (4 bytes,
// little-endian) ‖ scope ‖ key, so no two (kind, scope, key) triples feed it the same bytes.
std::uint64_t key_hash(const KeySecret& secret, KeyKind kind, std::string_view scope,
                       std::string_view key);
// The scope bytes of a counter's id (8 bytes, little-endian).
std::string_view counter_scope(std::int64_t counter_id, char (&buffer)[8]);

// The slots' memory, zeroed. From 2 MiB up it comes from the kernel as an anonymous mapping
// populated at once (MAP_POPULATE): no zeroing in user space and no page fault per 4 KiB
// later, which in this VM made a 256 MiB table cost 1 s to allocate and fill from a file
// (decision 143 §7); smaller arrays come from the heap (calloc). Copyable (a full copy).
// Throws std::bad_alloc when the memory cannot be had.
class SlotArray {
 public:
  SlotArray() = default;
  static SlotArray zeroed(std::size_t n);
  static SlotArray copy_of(std::span<const std::uint64_t> slots);
  SlotArray(const SlotArray& other) : SlotArray(copy_of(other.span())) {}
  SlotArray& operator=(const SlotArray& other);
  SlotArray(SlotArray&& other) noexcept { swap(other); }
  SlotArray& operator=(SlotArray&& other) noexcept;
  ~SlotArray();
  void swap(SlotArray& other) noexcept;

  std::size_t size() const { return n_; }
  std::uint64_t* data() { return p_; }
  const std::uint64_t* data() const { return p_; }
  std::uint64_t& operator[](std::size_t i) { return p_[i]; }
  std::uint64_t operator[](std::size_t i) const { return p_[i]; }
  std::span<const std::uint64_t> span() const { return {p_, n_}; }

 private:
  std::uint64_t* p_ = nullptr;
  std::size_t n_ = 0;
  bool mapped_ = false;
};

class KeyTable {
 public:
  static constexpr int kTagBits = 28;
  static constexpr int kKseqBits = 36;
  static constexpr std::uint64_t kMaxKseq = (std::uint64_t{1} << kKseqBits) - 1;
  static constexpr int kMinLog2 = 4;
  static constexpr int kMaxLog2 = kTagBits;

  // Empty, with room for `expected_keys` before the first growth. `max_log2` (≤ kMaxLog2) caps
  // the growth, for tests.
  explicit KeyTable(std::size_t expected_keys = 0, int max_log2 = kMaxLog2);

  // The kseq of the first candidate of `hash`, in probe order, for which `confirm(kseq)` returns
  // true; 0 when none does (the key is not in the table). `confirm` reads the row and compares.
  template <class Confirm>
  std::uint64_t find(std::uint64_t hash, Confirm&& confirm) const {
    const std::uint64_t tag = hash >> kKseqBits;
    for (std::size_t i = home_of(tag);; i = (i + 1) & mask_) {
      const std::uint64_t s = slots_[i];
      if (s == 0) return 0;
      if ((s >> kKseqBits) == tag && confirm(s & kMaxKseq)) return s & kMaxKseq;
    }
  }

  // Adds (hash, kseq) and, inside a batch, remembers it for rollback_batch(). Grows (doubles)
  // first when the load would pass 3/4. Throws std::out_of_range when kseq is 0 or above
  // kMaxKseq, std::length_error when the table would need more than 2^max_log2 slots. The same
  // (hash, kseq) twice gives two equal slots, which lookups and erase() treat as one each.
  void insert(std::uint64_t hash, std::uint64_t kseq);

  // Removes one slot equal to (hash, kseq), shifting the slots after it back; false when there
  // is none.
  bool erase(std::uint64_t hash, std::uint64_t kseq);

  // The slot value of (hash, kseq), and erase() by that value.
  static std::uint64_t slot_of(std::uint64_t hash, std::uint64_t kseq) {
    return ((hash >> kKseqBits) << kKseqBits) | kseq;
  }
  bool erase_slot(std::uint64_t slot);

  // For a snapshot copy, during which no slot may move (KeyIndex): whether the next insert()
  // would grow the table; insert() without growth while the load stays ≤ 7/8 (throws
  // std::logic_error beyond); and the growth left for later, up to load ≤ 3/4 again.
  bool grows_on_next_insert() const { return (size_ + 1) * 4 > slots_.size() * 3; }
  void insert_without_growth(std::uint64_t hash, std::uint64_t kseq);
  bool can_insert_without_growth() const { return (size_ + 1) * 8 <= slots_.size() * 7; }
  void grow_to_three_quarters();

  // A batch: the slots inserted between begin_batch() and rollback_batch() are removed again
  // (newest first); commit_batch() keeps them. Batches do not nest; erase() inside a batch is
  // not undone (deletions are applied after their commit, decision 143 §4).
  void begin_batch();
  void commit_batch();
  void rollback_batch();
  bool in_batch() const { return in_batch_; }
  // Savepoints inside a batch (the writer's isolated mode, one per command): a mark is where
  // the undo list stands; rollback_to(mark) removes the slots inserted since (newest first) and
  // keeps the batch open, and take_since(mark) leaves them in the table and returns them
  // (oldest first) for a caller that must remove them later. A mark is valid until the batch
  // ends or is rolled back to an earlier mark.
  std::size_t undo_mark() const { return undo_.size(); }
  void rollback_to(std::size_t mark);
  std::vector<std::uint64_t> take_since(std::size_t mark);
  // Ends the batch like rollback_batch() but leaves its slots in the table and returns them
  // (oldest first), for a caller that must remove them later (KeyIndex, during a copy).
  std::vector<std::uint64_t> end_batch_keeping_slots();

  std::size_t size() const { return size_; }
  std::size_t capacity() const { return slots_.size(); }
  std::size_t memory_bytes() const {
    return slots_.size() * sizeof(std::uint64_t) + undo_.capacity() * sizeof(std::uint64_t);
  }
  // The slots as they are, for the snapshot file (key_table_file.h) and for checks.
  std::span<const std::uint64_t> slots() const { return slots_.span(); }
  int log2_capacity() const { return log2_; }

  // A table over `slots` as slots() gave them (a snapshot read back), or nullopt with the reason
  // in `why` when they cannot be one: a count that is not a power of two in [2^kMinLog2,
  // 2^kMaxLog2], a load above 7/8 (what a table may reach while a snapshot copy holds its
  // growth back; it grows back to 3/4 here), a slot with kseq 0, or a slot cut off from its home
  // by an empty slot (which no lookup would reach). One pass over the slots.
  static std::optional<KeyTable> from_slots(SlotArray slots, std::string* why);

  // How many slots a lookup of `hash` reads before its empty slot (a miss's cost), for tests
  // and benchmarks.
  std::size_t probe_length(std::uint64_t hash) const;

 private:
  std::size_t home_of(std::uint64_t tag) const {
    return static_cast<std::size_t>(tag >> (kTagBits - log2_));
  }
  void place(std::uint64_t slot);              // into the first empty slot from its home; no checks
  static void check_kseq(std::uint64_t kseq);  // throws std::out_of_range
  void add(std::uint64_t hash, std::uint64_t kseq);  // place, count, record for undo
  void grow();

  SlotArray slots_;
  std::size_t mask_ = 0;
  int log2_ = 0;
  int max_log2_ = kMaxLog2;
  std::size_t size_ = 0;
  bool in_batch_ = false;
  std::vector<std::uint64_t> undo_;  // the slots inserted in the open batch, oldest first
};

}  // namespace ichido::store::sqlite
