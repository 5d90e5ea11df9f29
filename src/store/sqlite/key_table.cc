#include "store/sqlite/key_table.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <stdexcept>
#include <string>

namespace ichido::store::sqlite {
namespace {

constexpr std::uint64_t rotl(std::uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

// One SipRound over the state (v0, v1, v2, v3).
void sip_round(std::uint64_t& v0, std::uint64_t& v1, std::uint64_t& v2, std::uint64_t& v3) {
  v0 += v1;
  v1 = rotl(v1, 13);
  v1 ^= v0;
  v0 = rotl(v0, 32);
  v2 += v3;
  v3 = rotl(v3, 16);
  v3 ^= v2;
  v0 += v3;
  v3 = rotl(v3, 21);
  v3 ^= v0;
  v2 += v1;
  v1 = rotl(v1, 17);
  v1 ^= v2;
  v2 = rotl(v2, 32);
}

std::uint64_t load_le64(const unsigned char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

template <int C, int D>
SipHasher<C, D>::SipHasher(std::uint64_t k0, std::uint64_t k1)
    : v0_(0x736f6d6570736575ULL ^ k0),
      v1_(0x646f72616e646f6dULL ^ k1),
      v2_(0x6c7967656e657261ULL ^ k0),
      v3_(0x7465646279746573ULL ^ k1) {}

template <int C, int D>
void SipHasher<C, D>::compress(std::uint64_t m) {
  v3_ ^= m;
  for (int r = 0; r < C; ++r) sip_round(v0_, v1_, v2_, v3_);
  v0_ ^= m;
}

template <int C, int D>
SipHasher<C, D>& SipHasher<C, D>::update(std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  std::size_t n = bytes.size();
  // Complete the pending word first.
  while (n > 0 && length_ % 8 != 0) {
    tail_ |= std::uint64_t{*p++} << (8 * (length_ % 8));
    ++length_;
    --n;
    if (length_ % 8 == 0) {
      compress(tail_);
      tail_ = 0;
    }
  }
  for (; n >= 8; p += 8, n -= 8, length_ += 8) compress(load_le64(p));
  for (; n > 0; --n, ++length_) tail_ |= std::uint64_t{*p++} << (8 * (length_ % 8));
  return *this;
}

template <int C, int D>
std::uint64_t SipHasher<C, D>::finish() const {
  SipHasher s = *this;
  s.compress(s.tail_ | (s.length_ << 56));
  s.v2_ ^= 0xff;
  for (int r = 0; r < D; ++r) sip_round(s.v0_, s.v1_, s.v2_, s.v3_);
  return s.v0_ ^ s.v1_ ^ s.v2_ ^ s.v3_;
}

template class SipHasher<1, 3>;
template class SipHasher<2, 4>;

KeySecret KeySecret::random() {
  std::random_device rd;
  const auto word = [&rd] { return (std::uint64_t{rd()} << 32) | rd(); };
  KeySecret s;
  s.k0 = word();
  s.k1 = word();
  return s;
}

std::uint64_t key_hash(const KeySecret& secret, KeyKind kind, std::string_view scope,
                       std::string_view key) {
  char head[5];
  head[0] = static_cast<char>(kind);
  const auto n = static_cast<std::uint32_t>(scope.size());
  for (int i = 0; i < 4; ++i) head[1 + i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return SipHasher13(secret.k0, secret.k1)
      .update(std::string_view(head, sizeof head))
      .update(scope)
      .update(key)
      .finish();
}

std::string_view counter_scope(std::int64_t counter_id, char (&buffer)[8]) {
  const auto u = static_cast<std::uint64_t>(counter_id);
  for (int i = 0; i < 8; ++i) buffer[i] = static_cast<char>((u >> (8 * i)) & 0xff);
  return std::string_view(buffer, 8);
}

SlotArray SlotArray::zeroed(std::size_t n) {
  SlotArray a;
  const std::size_t bytes = n * sizeof(std::uint64_t);
  if (bytes >= (std::size_t{2} << 20)) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    a.p_ = static_cast<std::uint64_t*>(p);
    a.mapped_ = true;
  } else if (n > 0) {
    a.p_ = static_cast<std::uint64_t*>(std::calloc(n, sizeof(std::uint64_t)));
    if (a.p_ == nullptr) throw std::bad_alloc();
  }
  a.n_ = n;
  return a;
}

SlotArray SlotArray::copy_of(std::span<const std::uint64_t> slots) {
  SlotArray a = zeroed(slots.size());
  if (!slots.empty()) std::memcpy(a.p_, slots.data(), slots.size_bytes());
  return a;
}

SlotArray& SlotArray::operator=(const SlotArray& other) {
  if (this != &other) {
    SlotArray copy(other);
    swap(copy);
  }
  return *this;
}

SlotArray& SlotArray::operator=(SlotArray&& other) noexcept {
  SlotArray gone(std::move(other));
  swap(gone);
  return *this;
}

SlotArray::~SlotArray() {
  if (mapped_) {
    ::munmap(p_, n_ * sizeof(std::uint64_t));
  } else {
    std::free(p_);
  }
}

void SlotArray::swap(SlotArray& other) noexcept {
  std::swap(p_, other.p_);
  std::swap(n_, other.n_);
  std::swap(mapped_, other.mapped_);
}

KeyTable::KeyTable(std::size_t expected_keys, int max_log2)
    : max_log2_(std::clamp(max_log2, kMinLog2, kMaxLog2)) {
  int log2 = kMinLog2;
  // Room for expected_keys at load ≤ 3/4.
  while (log2 < max_log2_ && (std::size_t{1} << log2) / 4 * 3 < expected_keys) ++log2;
  log2_ = log2;
  slots_ = SlotArray::zeroed(std::size_t{1} << log2_);
  mask_ = slots_.size() - 1;
}

void KeyTable::place(std::uint64_t slot) {
  std::size_t i = home_of(slot >> kKseqBits);
  while (slots_[i] != 0) i = (i + 1) & mask_;
  slots_[i] = slot;
}

void KeyTable::grow() {
  if (log2_ >= max_log2_) {
    throw std::length_error("the key table is full (" + std::to_string(size_) + " keys)");
  }
  SlotArray old = SlotArray::zeroed(std::size_t{1} << (log2_ + 1));
  old.swap(slots_);
  ++log2_;
  mask_ = slots_.size() - 1;
  for (const std::uint64_t s : old.span()) {
    if (s != 0) place(s);
  }
}

void KeyTable::check_kseq(std::uint64_t kseq) {
  if (kseq == 0 || kseq > kMaxKseq) {
    throw std::out_of_range("kseq " + std::to_string(kseq) + " is outside 1 … 2^36 − 1");
  }
}

void KeyTable::add(std::uint64_t hash, std::uint64_t kseq) {
  const std::uint64_t slot = slot_of(hash, kseq);
  place(slot);
  ++size_;
  if (in_batch_) undo_.push_back(slot);
}

void KeyTable::insert(std::uint64_t hash, std::uint64_t kseq) {
  check_kseq(kseq);
  if (grows_on_next_insert()) grow();
  add(hash, kseq);
}

void KeyTable::insert_without_growth(std::uint64_t hash, std::uint64_t kseq) {
  check_kseq(kseq);
  if (!can_insert_without_growth()) {
    throw std::logic_error("KeyTable::insert_without_growth: the load would pass 7/8");
  }
  add(hash, kseq);
}

void KeyTable::grow_to_three_quarters() {
  while (size_ * 4 > slots_.size() * 3 && log2_ < max_log2_) grow();
}

bool KeyTable::erase_slot(std::uint64_t slot) {
  std::size_t i = home_of(slot >> kKseqBits);
  for (;; i = (i + 1) & mask_) {
    if (slots_[i] == 0) return false;
    if (slots_[i] == slot) break;
  }
  // Backward shift: a later slot of the run moves into the hole when the hole lies between its
  // home and where it is (cyclically), i.e. when it is at least as far from its home as from
  // the hole; the hole then moves to where it was.
  for (std::size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
    const std::uint64_t s = slots_[j];
    if (s == 0) break;
    const std::size_t home = home_of(s >> kKseqBits);
    if (((j - home) & mask_) >= ((j - i) & mask_)) {
      slots_[i] = s;
      i = j;
    }
  }
  slots_[i] = 0;
  --size_;
  return true;
}

bool KeyTable::erase(std::uint64_t hash, std::uint64_t kseq) {
  if (kseq == 0 || kseq > kMaxKseq) return false;
  return erase_slot(slot_of(hash, kseq));
}

void KeyTable::begin_batch() {
  if (in_batch_) throw std::logic_error("KeyTable::begin_batch: a batch is already open");
  in_batch_ = true;
  undo_.clear();
}

void KeyTable::commit_batch() {
  in_batch_ = false;
  undo_.clear();
}

std::vector<std::uint64_t> KeyTable::end_batch_keeping_slots() {
  in_batch_ = false;
  std::vector<std::uint64_t> slots;
  slots.swap(undo_);
  return slots;
}

void KeyTable::rollback_batch() {
  rollback_to(0);
  in_batch_ = false;
}

void KeyTable::rollback_to(std::size_t mark) {
  if (mark > undo_.size()) throw std::logic_error("KeyTable::rollback_to: a mark from the future");
  while (undo_.size() > mark) {
    erase_slot(undo_.back());
    undo_.pop_back();
  }
}

std::vector<std::uint64_t> KeyTable::take_since(std::size_t mark) {
  if (mark > undo_.size()) throw std::logic_error("KeyTable::take_since: a mark from the future");
  std::vector<std::uint64_t> slots(undo_.begin() + static_cast<std::ptrdiff_t>(mark), undo_.end());
  undo_.resize(mark);
  return slots;
}

std::optional<KeyTable> KeyTable::from_slots(SlotArray slots, std::string* why) {
  const auto refuse = [why](std::string reason) -> std::optional<KeyTable> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  const std::size_t n = slots.size();
  if (n < (std::size_t{1} << kMinLog2) || n > (std::size_t{1} << kMaxLog2) || (n & (n - 1)) != 0) {
    return refuse(std::to_string(n) + " slots is not a table size");
  }
  KeyTable t;
  t.log2_ = std::countr_zero(n);
  t.mask_ = n - 1;
  t.slots_ = std::move(slots);
  // One pass from an empty slot around the table: a slot is reachable from its home when no
  // empty slot lies between them, i.e. when its home is not before the start of its run.
  std::size_t empty = 0;
  while (empty < n && t.slots_[empty] != 0) ++empty;
  if (empty == n) return refuse("no empty slot");
  std::size_t run_start = (empty + 1) & t.mask_;
  for (std::size_t step = 1; step <= n; ++step) {
    const std::size_t i = (empty + step) & t.mask_;
    const std::uint64_t s = t.slots_[i];
    if (s == 0) {
      run_start = (i + 1) & t.mask_;
      continue;
    }
    ++t.size_;
    if ((s & kMaxKseq) == 0) return refuse("slot " + std::to_string(i) + " has kseq 0");
    const std::size_t home = t.home_of(s >> kKseqBits);
    if (((i - home) & t.mask_) > ((i - run_start) & t.mask_)) {
      return refuse("slot " + std::to_string(i) + " is cut off from its home slot " +
                    std::to_string(home));
    }
  }
  // Up to 7/8: a snapshot copied while growth waited (KeyIndex); the table grows back to 3/4.
  if (t.size_ * 8 > n * 7) {
    return refuse(std::to_string(t.size_) + " keys in " + std::to_string(n) + " slots");
  }
  t.grow_to_three_quarters();
  return t;
}

std::size_t KeyTable::probe_length(std::uint64_t hash) const {
  std::size_t n = 1;
  for (std::size_t i = home_of(hash >> kKseqBits); slots_[i] != 0; i = (i + 1) & mask_) ++n;
  return n;
}

}  // namespace ichido::store::sqlite
