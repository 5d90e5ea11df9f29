// Log-linear latency histogram (HdrHistogram-style), shared by the bench tools.
//
// Purpose: record many latencies with no allocation per record and report percentiles with a
// bounded relative error. Values are unsigned integers in any unit (the tools use microseconds).
// Values below 2048 are counted exactly; above, each power-of-two range [2^k, 2^(k+1)) is split
// into 1024 equal buckets, so a reported percentile is at most 1/1024 (~0.1%) above the true
// value. Values above kMaxValue are clamped to it (and counted in `clamped()`).
//
// Lifecycle: construct (one allocation of ~200 KiB), record, merge, query.
// Thread-safety: none; give each thread its own histogram and merge them at the end.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

namespace ichido::bench {

class Histogram {
 public:
  // 2^32 microseconds is over an hour: more than any run the tools allow.
  static constexpr std::uint64_t kMaxValue = (std::uint64_t{1} << 32) - 1;

  Histogram() : counts_(index_of(kMaxValue) + 1, 0) {}

  void record(std::uint64_t value) {
    if (value > kMaxValue) {
      value = kMaxValue;
      ++clamped_;
    }
    ++counts_[index_of(value)];
    ++total_;
    min_ = std::min(min_, value);
    max_ = std::max(max_, value);
    sum_ += value;
  }

  void merge(const Histogram& other) {
    for (std::size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
    total_ += other.total_;
    clamped_ += other.clamped_;
    min_ = std::min(min_, other.min_);
    max_ = std::max(max_, other.max_);
    sum_ += other.sum_;
  }

  std::uint64_t count() const { return total_; }
  std::uint64_t clamped() const { return clamped_; }
  std::uint64_t min() const { return total_ == 0 ? 0 : min_; }
  std::uint64_t max() const { return max_; }
  double mean() const { return total_ == 0 ? 0.0 : static_cast<double>(sum_) / total_; }

  // The smallest recorded value v such that at least `q` (0..1) of all values are <= v, rounded
  // up to the highest value of its bucket (never above max()). 0 when empty.
  std::uint64_t quantile(double q) const {
    if (total_ == 0) return 0;
    q = std::clamp(q, 0.0, 1.0);
    auto rank = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(total_)));
    rank = std::clamp<std::uint64_t>(rank, 1, total_);
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < counts_.size(); ++i) {
      seen += counts_[i];
      if (seen >= rank) return std::min(highest_in_bucket(i), max_);
    }
    return max_;
  }

 private:
  static constexpr unsigned kSubBits = 11;  // 2048 exact values, then 1024 buckets per octave
  static constexpr std::uint64_t kSubCount = std::uint64_t{1} << kSubBits;
  static constexpr std::uint64_t kHalf = kSubCount / 2;

  static std::size_t index_of(std::uint64_t v) {
    if (v < kSubCount) return static_cast<std::size_t>(v);
    // shift >= 1 puts v >> shift in [kHalf, kSubCount).
    const unsigned shift = static_cast<unsigned>(std::bit_width(v)) - kSubBits;
    return static_cast<std::size_t>(kSubCount + (shift - 1) * kHalf + ((v >> shift) - kHalf));
  }

  static std::uint64_t highest_in_bucket(std::size_t index) {
    if (index < kSubCount) return index;
    const std::uint64_t rel = index - kSubCount;
    const unsigned shift = static_cast<unsigned>(rel / kHalf) + 1;
    const std::uint64_t sub = rel % kHalf + kHalf;
    return ((sub + 1) << shift) - 1;
  }

  std::vector<std::uint64_t> counts_;
  std::uint64_t total_ = 0;
  std::uint64_t clamped_ = 0;
  std::uint64_t min_ = UINT64_MAX;
  std::uint64_t max_ = 0;
  std::uint64_t sum_ = 0;
};

}  // namespace ichido::bench
