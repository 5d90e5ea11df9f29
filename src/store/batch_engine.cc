#include "store/batch_engine.h"

#include <algorithm>
#include <exception>

namespace ichido::store {

void JobErrors::set(std::size_t index, Error e) {
  auto it = std::lower_bound(errors_.begin(), errors_.end(), index,
                             [](const auto& p, std::size_t i) { return p.first < i; });
  if (it != errors_.end() && it->first == index) {
    it->second = std::move(e);
  } else {
    errors_.emplace(it, index, std::move(e));
  }
}

const Error* JobErrors::find(std::size_t index) const {
  if (errors_.empty()) return nullptr;
  auto it = std::lower_bound(errors_.begin(), errors_.end(), index,
                             [](const auto& p, std::size_t i) { return p.first < i; });
  return it != errors_.end() && it->first == index ? &it->second : nullptr;
}

void BatchResult::finish(std::span<Job> batch) const {
  if (!committed) {
    const Error& e = *error;
    for (auto& j : batch) j.finish(&e);
    return;
  }
  for (std::size_t i = 0; i < batch.size(); ++i) batch[i].finish(job_errors.find(i));
}

namespace {

enum class Attempt { committed, rerun_isolated, failed };

// One attempt at `batch` in `mode` (see the header). On `failed`, `out.error` holds every job's
// answer; on `rerun_isolated` the transaction has been rolled back.
Attempt attempt(BatchTransaction& tx, std::span<Job> batch, BatchMode mode, BatchResult& out) {
  const bool isolated = mode == BatchMode::isolated;
  out.job_errors.clear();
  // A step that did not succeed: the transaction is over (the store ended it), except that an
  // optimistic attempt may be run again isolated.
  auto ended = [&](TxStep& s) {
    if (s.kind == TxStep::Kind::rerun_isolated && !isolated) return Attempt::rerun_isolated;
    out.error = std::move(s.error);
    return Attempt::failed;
  };
  BatchTransaction::Began began = tx.begin(mode, batch, out.job_errors);
  if (!began.step.is_ok()) return ended(began.step);
  const TimeMs now = began.now;
  Tables& tables = tx.tables();
  std::vector<Announcement> announced;  // by the jobs that kept their changes
  for (std::size_t i = 0; i < batch.size(); ++i) {
    Job& job = batch[i];
    if (!out.job_errors.empty() && out.job_errors.find(i)) continue;  // answered by begin
    if (isolated) {
      if (TxStep s = tx.savepoint(); !s.is_ok()) return ended(s);
    }
    const std::uint64_t writes_before = tx.writes();
    bool keep = false;
    try {
      keep = job.apply(tables, now);
    } catch (const std::exception&) {
      keep = false;  // no result in the job's slot: it answers internal (table_store.h)
    }
    TxStep done = tx.job_done(mode);
    if (done.kind == TxStep::Kind::job_failed) {
      out.job_errors.set(i, std::move(*done.error));
      keep = false;
    } else if (!done.is_ok()) {
      return ended(done);
    }
    if (isolated) {
      if (!keep) {
        // Its writes could stay if this fails: no answer of the batch holds then.
        if (TxStep s = tx.rollback_to_savepoint(); !s.is_ok()) return ended(s);
      }
      if (TxStep s = tx.release_savepoint(); !s.is_ok()) return ended(s);
    } else if (!keep && tx.writes() != writes_before) {
      // A failed job wrote, and only a savepoint could undo that alone.
      TxStep s = tx.rollback();
      return s.is_ok() ? Attempt::rerun_isolated : ended(s);
    }
    if (keep && !job.announce.empty()) {
      announced.insert(announced.end(), job.announce.begin(), job.announce.end());
    }
  }
  if (TxStep s = tx.flush(); !s.is_ok()) return ended(s);
  if (TxStep s = tx.commit(std::move(announced)); !s.is_ok()) return ended(s);
  return Attempt::committed;
}

}  // namespace

BatchResult run_transaction(BatchTransaction& tx, std::span<Job> batch, BatchMode first) {
  BatchResult out;
  out.isolated = first == BatchMode::isolated;
  Attempt a = attempt(tx, batch, first, out);
  if (a == Attempt::rerun_isolated) {
    out.isolated = true;
    a = attempt(tx, batch, BatchMode::isolated, out);
  }
  out.committed = a == Attempt::committed;
  if (!out.committed) out.job_errors.clear();
  return out;
}

}  // namespace ichido::store
