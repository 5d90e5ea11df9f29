#include "store/sqlite/key_index.h"

#include <exception>
#include <optional>

namespace ichido::store::sqlite {

void KeyIndex::begin_batch() {
  WriterLock lock(mu_);
  table_.begin_batch();
}

void KeyIndex::commit_batch() {
  WriterLock lock(mu_);
  table_.commit_batch();
}

void KeyIndex::insert(std::uint64_t hash, std::uint64_t kseq) {
  WriterLock lock(mu_);
  if (copying_ && table_.grows_on_next_insert() && table_.can_insert_without_growth()) {
    table_.insert_without_growth(hash, kseq);  // the growth waits for the copy
    return;
  }
  const std::size_t before = table_.capacity();
  table_.insert(hash, kseq);
  if (table_.capacity() != before) ++generation_;  // slots moved: a running copy starts over
}

void KeyIndex::rollback_batch() {
  WriterLock lock(mu_);
  if (!copying_) {
    table_.rollback_batch();
    return;
  }
  const std::vector<std::uint64_t> slots = table_.end_batch_keeping_slots();
  deferred_.insert(deferred_.end(), slots.begin(), slots.end());
  stats_.deferred_removals += slots.size();
}

std::size_t KeyIndex::undo_mark() const {
  ReaderLock lock(mu_);
  return table_.undo_mark();
}

void KeyIndex::rollback_to(std::size_t mark) {
  WriterLock lock(mu_);
  if (!copying_) {
    table_.rollback_to(mark);
    return;
  }
  const std::vector<std::uint64_t> slots = table_.take_since(mark);
  deferred_.insert(deferred_.end(), slots.begin(), slots.end());
  stats_.deferred_removals += slots.size();
}

void KeyIndex::erase(std::uint64_t hash, std::uint64_t kseq) {
  WriterLock lock(mu_);
  if (!copying_) {
    table_.erase(hash, kseq);
    return;
  }
  deferred_.push_back(KeyTable::slot_of(hash, kseq));
  ++stats_.deferred_removals;
}

void KeyIndex::end_copy() {
  WriterLock lock(mu_);
  copying_ = false;
  for (const std::uint64_t slot : deferred_) table_.erase_slot(slot);
  deferred_.clear();
  const std::size_t before = table_.capacity();
  table_.grow_to_three_quarters();
  if (table_.capacity() != before) ++generation_;
}

Result<void> KeyIndex::write_snapshot(const std::string& path, std::uint64_t last_kseq,
                                      std::uint64_t snapshot_id, std::uint32_t chunk_slots,
                                      const std::function<void()>& between_chunks) {
  MutexLock one(snapshot_mu_);
  int log2 = 0;
  std::uint64_t generation = 0;
  {
    WriterLock lock(mu_);
    copying_ = true;
    log2 = table_.log2_capacity();
    generation = generation_;
  }
  struct EndCopy {
    KeyIndex* self;
    ~EndCopy() { self->end_copy(); }
  } end_copy_on_return{this};

  auto w = KeyTableFileWriter::start(path, log2, chunk_slots);
  if (!w.ok()) return std::move(w).error();
  std::vector<std::uint64_t> chunk;
  std::uint64_t restarts = 0;
  for (std::size_t c = 0; c < w->chunk_count();) {
    bool moved = false;
    std::size_t n = 0;
    {
      ReaderLock lock(mu_);
      if (generation_ != generation) {
        moved = true;
        log2 = table_.log2_capacity();
        generation = generation_;
        ++restarts;
      } else {
        n = w->chunk_length(c);
        const auto slots = table_.slots().subspan(w->chunk_first(c), n);
        chunk.assign(slots.begin(), slots.end());
      }
    }
    if (moved) {
      ICHIDO_TRY(w->restart(log2));
      c = 0;
      continue;
    }
    ICHIDO_TRY(w->add_chunk(std::span<const std::uint64_t>(chunk.data(), n)));
    ++c;
    if (between_chunks) between_chunks();
  }
  KeyTableFileInfo info;
  info.secret = secret_;
  info.last_kseq = last_kseq;
  info.snapshot_id = snapshot_id;
  auto finished = w->finish(info);
  WriterLock lock(mu_);
  stats_.restarts += restarts;
  if (finished.ok()) ++stats_.snapshots;
  return finished;
}

KeyIndex::Stats KeyIndex::stats() const {
  ReaderLock lock(mu_);
  Stats s = stats_;
  s.keys = table_.size();
  s.capacity = table_.capacity();
  return s;
}

Result<OpenedKeyIndex> open_key_index(const std::string& path, std::uint64_t db_snapshot_id,
                                      std::uint64_t db_last_kseq, std::size_t expected_keys,
                                      const KeyScan& scan) {
  OpenedKeyIndex out;
  std::optional<KeyTableFile> file;
  if (db_snapshot_id == 0) {
    out.rebuilt_because = "the database names no snapshot";
  } else {
    std::string why;
    file = read_key_table_file(path, &why);
    if (!file) {
      out.rebuilt_because = why;
    } else if (file->info.snapshot_id != db_snapshot_id) {
      out.rebuilt_because = path + " is snapshot " + std::to_string(file->info.snapshot_id) +
                            ", the database names " + std::to_string(db_snapshot_id);
      file.reset();
    } else if (file->info.last_kseq > db_last_kseq) {
      out.rebuilt_because = path + " goes to key " + std::to_string(file->info.last_kseq) +
                            ", past the database's " + std::to_string(db_last_kseq);
      file.reset();
    }
  }
  std::uint64_t after = 0;
  KeySecret secret;
  KeyTable table(0);
  if (file) {
    after = file->info.last_kseq;
    secret = file->info.secret;
    table = std::move(file->table);
    std::vector<std::uint64_t> newer;
    for (const std::uint64_t slot : table.slots()) {
      if (slot != 0 && (slot & KeyTable::kMaxKseq) > after) newer.push_back(slot);
    }
    for (const std::uint64_t slot : newer) table.erase_slot(slot);
    out.slots_dropped = newer.size();
    out.from_snapshot = true;
    out.snapshot_last_kseq = after;
  } else {
    secret = KeySecret::random();
    table = KeyTable(expected_keys);
  }
  std::uint64_t rows = 0;
  try {
    auto scanned = scan(
        after, [&](KeyKind kind, std::string_view scope, std::string_view key, std::uint64_t kseq) {
          table.insert(key_hash(secret, kind, scope, key), kseq);
          ++rows;
        });
    if (!scanned.ok()) return std::move(scanned).error();
  } catch (const std::exception& e) {  // a kseq out of range in a row; a table at its maximum
    return Error(errc::store_unavailable, std::string("cannot build the key index: ") + e.what());
  }
  out.rows_scanned = rows;
  out.index = std::make_unique<KeyIndex>(std::move(table), secret);
  return out;
}

}  // namespace ichido::store::sqlite
