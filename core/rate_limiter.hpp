// Reverb's rate limiter, exact because one owner keeps the counts.
//
//   size   = inserts - deletes            (deletes: every removal)
//   cursor = inserts * spi - samples
//   CanSample(n): size >= min_size_to_sample  and  cursor - n >= min_diff
//   CanInsert(n): inserts + n - deletes <= min_size_to_sample
//                 or (inserts + n) * spi - samples <= max_diff
//
// The struct is plain data so it can live in a table's shared header; only
// the owner thread writes it.
#pragma once

#include <cstdint>
#include <limits>

#include "core/status.hpp"

namespace engram {

struct RateLimiterConfig {
  double samples_per_insert = 1.0;
  int64_t min_size_to_sample = 1;
  double min_diff = -std::numeric_limits<double>::max();
  double max_diff = std::numeric_limits<double>::max();

  // Sampling may start once the table holds n (>= 1) items; inserts never block.
  static Result<RateLimiterConfig> min_size(int64_t n);
  // Keeps samples/inserts near spi once min_size items exist, within
  // +-error_buffer samples. Refused when the window 2*error_buffer is
  // narrower than 2*max(1, spi): both sides could then block for ever.
  static Result<RateLimiterConfig> sample_to_insert_ratio(double spi, int64_t min_size, double error_buffer);
  // A queue of at most `size` (>= 1) items, each sampled once (pair it with
  // max_times_sampled 1 and a FIFO sampler).
  static Result<RateLimiterConfig> queue(int64_t size);

  // Checks any config, preset or hand-made: spi finite > 0, min_size >= 1,
  // min_diff <= max_diff, no NaN, neither min_diff = +inf nor max_diff = -inf.
  Status validate() const;
};

struct RateLimiterCounters {
  int64_t inserts = 0;
  int64_t samples = 0;
  int64_t deletes = 0;
};

class RateLimiter {
 public:
  // Use validated configs only; see RateLimiterConfig::validate.
  explicit RateLimiter(RateLimiterConfig c = {}) : config_(c) {}

  const RateLimiterConfig& config() const noexcept { return config_; }
  const RateLimiterCounters& counters() const noexcept { return counters_; }
  int64_t size() const noexcept { return counters_.inserts - counters_.deletes; }
  double cursor() const noexcept { return counters_.inserts * config_.samples_per_insert - counters_.samples; }

  bool can_sample(int64_t n) const noexcept;
  // The most of n that can_sample allows now (0: none).
  int64_t samples_allowed(int64_t n) const noexcept;
  bool can_insert(int64_t n) const noexcept;

  void on_insert(int64_t n = 1) noexcept { counters_.inserts += n; }
  void on_sample(int64_t n = 1) noexcept { counters_.samples += n; }
  void on_delete(int64_t n = 1) noexcept { counters_.deletes += n; }

  // Changes the limits at run time; the counters are kept.
  Status reconfigure(const RateLimiterConfig& c);
  void reset() noexcept { counters_ = {}; }
  void restore(const RateLimiterCounters& c) noexcept { counters_ = c; }

 private:
  RateLimiterConfig config_;
  RateLimiterCounters counters_;
};

}  // namespace engram
