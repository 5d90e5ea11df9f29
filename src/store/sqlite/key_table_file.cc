#include "store/sqlite/key_table_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <vector>

namespace ichido::store::sqlite {
namespace {

constexpr char kMagic[8] = {'i', 'c', 'h', 'i', 'd', 'o', 'K', 'T'};
constexpr std::size_t kFieldsBytes = 64;

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint64_t get_le(std::string_view in, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(in[at + i]);
  return v;
}

// Slots as the file holds them (little-endian), converted in place on a big-endian host.
void to_or_from_le(std::uint64_t* slots, std::size_t n) {
  if constexpr (std::endian::native == std::endian::big) {
    for (std::size_t i = 0; i < n; ++i) {
      std::uint64_t v = slots[i];
      std::uint64_t r = 0;
      for (int b = 0; b < 8; ++b, v >>= 8) r = (r << 8) | (v & 0xff);
      slots[i] = r;
    }
  } else {
    (void)slots;
    (void)n;
  }
}

std::uint64_t checksum(std::string_view bytes) { return SipHasher13(0, 0).update(bytes).finish(); }

std::string_view bytes_of(const std::uint64_t* p, std::size_t n) {
  return std::string_view(reinterpret_cast<const char*>(p), n * sizeof(std::uint64_t));
}

// Reads exactly `n` bytes at `offset`; false with errno (0 at a short file) otherwise.
bool read_at(int fd, char* out, std::size_t n, std::uint64_t offset) {
  while (n > 0) {
    const ssize_t r = ::pread(fd, out, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (r == 0) errno = 0;
      return false;
    }
    out += r;
    n -= static_cast<std::size_t>(r);
    offset += static_cast<std::uint64_t>(r);
  }
  return true;
}

// Bytes before the slots: the fields, one checksum per chunk, the header's checksum.
std::uint64_t head_bytes_for(int log2, std::uint32_t chunk_slots) {
  const std::uint64_t capacity = std::uint64_t{1} << log2;
  return kFieldsBytes + 8 * ((capacity + chunk_slots - 1) / chunk_slots) + 8;
}

}  // namespace

Result<KeyTableFileWriter> KeyTableFileWriter::start(const std::string& path, int log2,
                                                     std::uint32_t chunk_slots) {
  auto file = DurableFile::create(path);
  if (!file.ok()) return std::move(file).error();
  KeyTableFileWriter w(std::move(*file), chunk_slots);
  ICHIDO_TRY(w.begin(log2));
  return w;
}

// Room for the header, written last.
Result<void> KeyTableFileWriter::begin(int log2) {
  log2_ = log2;
  const std::size_t capacity = std::size_t{1} << log2;
  sums_.assign((capacity + chunk_slots_ - 1) / chunk_slots_, 0);
  added_ = 0;
  keys_ = 0;
  return file_.append(std::string(head_bytes_for(log2, chunk_slots_), '\0'));
}

Result<void> KeyTableFileWriter::restart(int log2) {
  ICHIDO_TRY(file_.truncate());
  return begin(log2);
}

std::size_t KeyTableFileWriter::chunk_length(std::size_t c) const {
  const std::size_t capacity = std::size_t{1} << log2_;
  return std::min<std::size_t>(chunk_slots_, capacity - c * chunk_slots_);
}

Result<void> KeyTableFileWriter::add_chunk(std::span<const std::uint64_t> slots) {
  if (added_ >= sums_.size() || slots.size() != chunk_length(added_)) {
    return Error(errc::internal, "KeyTableFileWriter::add_chunk: not the next chunk");
  }
  std::vector<std::uint64_t> le;  // only on a big-endian host: the slots converted
  const std::uint64_t* data = slots.data();
  if constexpr (std::endian::native == std::endian::big) {
    le.assign(slots.begin(), slots.end());
    to_or_from_le(le.data(), le.size());
    data = le.data();
  }
  for (const std::uint64_t s : slots) keys_ += s != 0 ? 1 : 0;
  const std::string_view bytes = bytes_of(data, slots.size());
  sums_[added_++] = checksum(bytes);
  return file_.append(bytes);
}

Result<void> KeyTableFileWriter::finish(const KeyTableFileInfo& info) {
  if (added_ != sums_.size()) {
    return Error(errc::internal, "KeyTableFileWriter::finish: chunks are missing");
  }
  std::string head;
  head.append(kMagic, sizeof kMagic);
  put_le(head, kKeyTableFileFormat, 4);
  put_le(head, static_cast<std::uint64_t>(log2_), 4);
  put_le(head, info.secret.k0, 8);
  put_le(head, info.secret.k1, 8);
  put_le(head, keys_, 8);
  put_le(head, info.last_kseq, 8);
  put_le(head, info.snapshot_id, 8);
  put_le(head, chunk_slots_, 4);
  put_le(head, 0, 4);
  for (const std::uint64_t sum : sums_) put_le(head, sum, 8);
  put_le(head, checksum(head), 8);
  ICHIDO_TRY(file_.write_at(0, head));
  return file_.commit();
}

Result<void> write_key_table_file(const std::string& path, const KeyTable& table,
                                  const KeyTableFileInfo& info, std::uint32_t chunk_slots) {
  auto w = KeyTableFileWriter::start(path, table.log2_capacity(), chunk_slots);
  if (!w.ok()) return std::move(w).error();
  const auto slots = table.slots();
  for (std::size_t c = 0; c < w->chunk_count(); ++c) {
    ICHIDO_TRY(w->add_chunk(slots.subspan(w->chunk_first(c), w->chunk_length(c))));
  }
  return w->finish(info);
}

std::optional<KeyTableFile> read_key_table_file(const std::string& path, std::string* why) {
  const auto refuse = [&](const std::string& reason) -> std::optional<KeyTableFile> {
    if (why) *why = path + ": " + reason;
    return std::nullopt;
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return refuse(errno == ENOENT ? "no file" : std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st{};
  if (::fstat(fd, &st) != 0) return refuse(std::strerror(errno));
  const auto size = static_cast<std::uint64_t>(st.st_size);
  const auto read_error = [&](const char* what) {
    return refuse(std::string("cannot read ") + what + ": " +
                  (errno == 0 ? "the file ends early" : std::strerror(errno)));
  };
  std::string fields(kFieldsBytes, '\0');
  if (size < kFieldsBytes) return refuse("too short for a key table file");
  if (!read_at(fd, fields.data(), kFieldsBytes, 0)) return read_error("its header");
  if (std::string_view(fields).substr(0, 8) != std::string_view(kMagic, 8)) {
    return refuse("not a key table file");
  }
  const auto format = static_cast<std::uint32_t>(get_le(fields, 8, 4));
  if (format != kKeyTableFileFormat) {
    return refuse("format " + std::to_string(format) + ", this ichido reads " +
                  std::to_string(kKeyTableFileFormat));
  }
  const auto log2 = get_le(fields, 12, 4);
  const auto chunk_slots = get_le(fields, 56, 4);
  if (log2 < KeyTable::kMinLog2 || log2 > KeyTable::kMaxLog2 || chunk_slots == 0) {
    return refuse("a damaged header (table size or chunk size)");
  }
  const std::uint64_t capacity = std::uint64_t{1} << log2;
  const std::uint64_t chunks = (capacity + chunk_slots - 1) / chunk_slots;
  const std::uint64_t head_bytes =
      head_bytes_for(static_cast<int>(log2), static_cast<std::uint32_t>(chunk_slots));
  const std::uint64_t expected = head_bytes + 8 * capacity;
  if (size != expected) {
    return refuse(std::to_string(size) + " bytes where its header says " +
                  std::to_string(expected) + " (truncated, or not written to its end)");
  }
  std::string head(head_bytes, '\0');
  if (!read_at(fd, head.data(), head_bytes, 0)) return read_error("its header");
  if (checksum(std::string_view(head).substr(0, head_bytes - 8)) !=
      get_le(head, head_bytes - 8, 8)) {
    return refuse("the header's checksum does not match");
  }
  SlotArray slots = SlotArray::zeroed(capacity);
  for (std::uint64_t c = 0; c < chunks; ++c) {
    const std::uint64_t from = c * chunk_slots;
    const std::uint64_t n = std::min<std::uint64_t>(chunk_slots, capacity - from);
    if (!read_at(fd, reinterpret_cast<char*>(slots.data() + from), n * 8, head_bytes + from * 8)) {
      return read_error("its slots");
    }
    if (checksum(bytes_of(slots.data() + from, n)) != get_le(head, kFieldsBytes + 8 * c, 8)) {
      return refuse("chunk " + std::to_string(c) + " (slots " + std::to_string(from) + " to " +
                    std::to_string(from + n - 1) + ") does not match its checksum");
    }
  }
  to_or_from_le(slots.data(), slots.size());
  std::string bad;
  auto table = KeyTable::from_slots(std::move(slots), &bad);
  if (!table) return refuse("its slots cannot form a table: " + bad);
  if (table->size() != get_le(fields, 32, 8)) {
    return refuse(std::to_string(table->size()) + " keys where its header says " +
                  std::to_string(get_le(fields, 32, 8)));
  }
  KeyTableFileInfo info;
  info.secret = KeySecret{get_le(fields, 16, 8), get_le(fields, 24, 8)};
  info.last_kseq = get_le(fields, 40, 8);
  info.snapshot_id = get_le(fields, 48, 8);
  return KeyTableFile{std::move(*table), info};
}

}  // namespace ichido::store::sqlite
