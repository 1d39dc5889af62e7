#include "core/rate_limiter.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace engram {

static Status bad(const std::string& m) { return {Errc::invalid_rate_limiter, m}; }

static Result<RateLimiterConfig> checked(const RateLimiterConfig& c) {
  if (Status s = c.validate(); !s.ok()) return s;
  return c;
}

Result<RateLimiterConfig> RateLimiterConfig::min_size(int64_t n) {
  if (n < 1) return bad("MinSize(" + std::to_string(n) + "): the minimum size must be >= 1");
  RateLimiterConfig c;
  c.min_size_to_sample = n;
  return checked(c);
}

Result<RateLimiterConfig> RateLimiterConfig::sample_to_insert_ratio(double spi, int64_t min_size, double error_buffer) {
  if (!std::isfinite(error_buffer) || error_buffer < 0)
    return bad("SampleToInsertRatio: error_buffer must be finite and >= 0, got " + number_text(error_buffer));
  double need = 2 * std::max(1.0, spi);
  if (std::isfinite(spi) && 2 * error_buffer < need)
    return bad("SampleToInsertRatio: error_buffer " + number_text(error_buffer) + " gives a window of " +
               number_text(2 * error_buffer) + " samples, narrower than 2 * max(1, samples_per_insert) = " +
               number_text(need) + "; writers and samplers could block each other for ever: increase error_buffer to at least " +
               number_text(need / 2));
  RateLimiterConfig c;
  c.samples_per_insert = spi;
  c.min_size_to_sample = min_size;
  c.min_diff = spi * static_cast<double>(min_size) - error_buffer;
  c.max_diff = spi * static_cast<double>(min_size) + error_buffer;
  return checked(c);
}

Result<RateLimiterConfig> RateLimiterConfig::queue(int64_t size) {
  if (size < 1) return bad("Queue(" + std::to_string(size) + "): the queue size must be >= 1");
  RateLimiterConfig c;
  c.samples_per_insert = 1.0;
  c.min_size_to_sample = 1;
  c.min_diff = 0.0;
  c.max_diff = static_cast<double>(size);
  return checked(c);
}

Status RateLimiterConfig::validate() const {
  if (!std::isfinite(samples_per_insert) || samples_per_insert <= 0)
    return bad("samples_per_insert must be finite and > 0, got " + number_text(samples_per_insert));
  if (min_size_to_sample < 1)
    return bad("min_size_to_sample must be >= 1, got " + std::to_string(min_size_to_sample));
  if (std::isnan(min_diff) || std::isnan(max_diff)) return bad("min_diff and max_diff must not be NaN");
  if (min_diff > max_diff)
    return bad("min_diff (" + number_text(min_diff) + ") must be <= max_diff (" + number_text(max_diff) + ")");
  // Either would stop one side for good: no cursor is ever >= +inf, and
  // past min_size_to_sample none is <= -inf.
  if (min_diff == std::numeric_limits<double>::infinity())
    return bad("min_diff is +infinity: no sample could ever proceed; use a finite value or -infinity");
  if (max_diff == -std::numeric_limits<double>::infinity())
    return bad("max_diff is -infinity: no insert past min_size_to_sample could ever proceed; use a finite value or "
               "+infinity");
  return Status::Ok();
}

bool RateLimiter::can_sample(int64_t n) const noexcept {
  if (size() < config_.min_size_to_sample) return false;
  return cursor() - static_cast<double>(n) >= config_.min_diff;
}

int64_t RateLimiter::samples_allowed(int64_t n) const noexcept {
  if (size() < config_.min_size_to_sample) return 0;
  double room = std::floor(cursor() - config_.min_diff);
  int64_t m = room <= 0 ? 0 : room >= static_cast<double>(n) ? n : static_cast<int64_t>(room);
  while (m > 0 && !can_sample(m)) --m;  // floating point at the edge: at most a step or two
  return m;
}

bool RateLimiter::can_insert(int64_t n) const noexcept {
  if (counters_.inserts + n - counters_.deletes <= config_.min_size_to_sample) return true;
  double diff = static_cast<double>(counters_.inserts + n) * config_.samples_per_insert - counters_.samples;
  return diff <= config_.max_diff;
}

Status RateLimiter::reconfigure(const RateLimiterConfig& c) {
  if (Status s = c.validate(); !s.ok()) return s;
  config_ = c;
  return Status::Ok();
}

}  // namespace engram
