// The agents' random numbers: xoshiro256** seeded through splitmix64, and
// conversions written out here rather than taken from <random>'s
// distributions, whose results differ between standard libraries. Two
// runs with one seed then draw the same numbers on every machine, which
// the environments' golden traces and Cleanba's reproducible mode need.
#pragma once

#include <cstdint>

namespace engram::agents {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { reseed(seed); }
  void reseed(uint64_t seed) {
    for (uint64_t& w : s_) w = splitmix64(&seed);
  }
  uint64_t next() {
    uint64_t result = rotl(s_[1] * 5, 7) * 9;
    uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1), 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform in 0..n-1 (n >= 1), without modulo bias (Lemire's method).
  uint32_t below(uint32_t n) {
    uint64_t m = (next() >> 32) * n;
    if (static_cast<uint32_t>(m) < n) {
      uint32_t floor = static_cast<uint32_t>(-n) % n;
      while (static_cast<uint32_t>(m) < floor) m = (next() >> 32) * n;
    }
    return static_cast<uint32_t>(m >> 32);
  }
  // An independent stream for index i, e.g. env j of a run seeded `seed`.
  static uint64_t derive(uint64_t seed, uint64_t i) {
    uint64_t x = seed ^ (0x9e3779b97f4a7c15ULL * (i + 1));
    return splitmix64(&x);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t splitmix64(uint64_t* x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t s_[4];
};

}  // namespace engram::agents
