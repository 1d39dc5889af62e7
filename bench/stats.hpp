// The statistics the benchmarks report, in one place, so that "median" and
// a percentile mean the same in every bench's JSON.
#pragma once

#include <algorithm>
#include <vector>

namespace engram::bench {

// The middle value; of an even count, the upper of the two middle ones (a
// value that was measured, not a mean of two). 0 for none.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The value at fraction p (0..1) of the sorted values: nearest rank, p = 1
// the largest. 0 for none.
inline double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * double(v.size())))];
}

}  // namespace engram::bench
