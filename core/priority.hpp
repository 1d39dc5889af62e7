// Validation shared by every structure that takes priorities or exponents.
#pragma once

#include <cmath>
#include <string>

#include "core/status.hpp"

namespace engram {

inline Status validate_priority(double p) {
  if (std::isnan(p)) return {Errc::invalid_priority, "priority is NaN; priorities must be finite and >= 0"};
  if (std::isinf(p)) return {Errc::invalid_priority, "priority is infinite; priorities must be finite and >= 0"};
  if (p < 0) return {Errc::invalid_priority, "priority " + number_text(p) + " is negative; priorities must be >= 0"};
  return Status::Ok();
}

inline Status validate_exponent(double e) {
  if (!std::isfinite(e))
    return {Errc::invalid_exponent, "priority exponent is " + number_text(e) + "; it must be finite and >= 0"};
  if (e < 0) return {Errc::invalid_exponent, "priority exponent " + number_text(e) + " is negative; use a value >= 0"};
  return Status::Ok();
}

// Sampling weight of a priority: p^exponent, except that a zero priority always
// weighs 0 (never sampled), also for exponent 0 where pow(0, 0) would be 1.
inline double priority_weight(double p, double exponent) { return p == 0.0 ? 0.0 : std::pow(p, exponent); }

}  // namespace engram
