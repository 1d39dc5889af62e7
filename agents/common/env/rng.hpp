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

// The seed an actor draws its episodes and its exploration from, given
// the version of the first parameters it acts with. Version 1, a run's
// start: the run's seed itself, so that one seed gives one run. A later
// version, an actor started while the run is under way (the run resumed
// from a learner's state, an actor machine restarted): a seed derived from
// that version, so that it does not play the run's first episodes, with
// their exploration draws, again into a replay that may still hold them.
// Cleanba's reproducible mode keeps the run's seed (its actors replay).
inline uint64_t actor_seed(uint64_t seed, int64_t first_version) {
  return first_version <= 1 ? seed : Rng::derive(seed, (uint64_t{1} << 48) + static_cast<uint64_t>(first_version));
}

}  // namespace engram::agents
