// Helpers shared by the core tests.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

#include "core/chunk_arena.hpp"
#include "core/table.hpp"

namespace engram::test {

// Sanitized builds run the same tests with fewer iterations.
#ifdef ENGRAM_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
inline constexpr uint64_t scaled(uint64_t n, uint64_t divisor = 10) { return kSanitized ? n / divisor : n; }

// Zeroed, 64-byte aligned heap memory.
struct AlignedBuffer {
  explicit AlignedBuffer(size_t n) : size(n), ptr(static_cast<char*>(std::aligned_alloc(64, (n + 63) / 64 * 64))) {
    for (size_t i = 0; i < n; ++i) ptr[i] = 0;
  }
  ~AlignedBuffer() { std::free(ptr); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  void* data() const { return ptr; }
  size_t size;
  char* ptr;
};

// Options a test knows to be valid, checked (a test of check itself calls
// Table::check).
inline CheckedTableOptions checked(const TableOptions& o) { return Table::check(o).value(); }

// An arena in this process's memory, its meta region and its blocks, as
// the daemon keeps one.
struct LocalArena {
  explicit LocalArena(const ArenaConfig& c)
      : meta(ChunkArena::meta_bytes_needed(c)),
        blocks(ArenaBlocks::bytes_needed(c)),
        arena(*ChunkArena::format(meta.data(), meta.size, blocks.data(), blocks.size, c)) {}
  AlignedBuffer meta, blocks;
  ChunkArena arena;
};

// Regularized upper incomplete gamma Q(a, x) (Numerical Recipes' gammq):
// the chi-square p-value is Q(df / 2, chi2 / 2).
inline double gamma_q(double a, double x) {
  const double gln = std::lgamma(a);
  if (x <= 0) return 1.0;
  if (x < a + 1) {  // series for P, then 1 - P
    double ap = a, sum = 1.0 / a, del = sum;
    for (int n = 0; n < 10000; ++n) {
      ap += 1;
      del *= x / ap;
      sum += del;
      if (std::fabs(del) < std::fabs(sum) * 1e-15) break;
    }
    return 1.0 - sum * std::exp(-x + a * std::log(x) - gln);
  }
  double b = x + 1 - a, c = 1.0 / 1e-300, d = 1.0 / b, h = d;  // continued fraction (Lentz)
  for (int i = 1; i < 10000; ++i) {
    double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < 1e-300) d = 1e-300;
    c = b + an / c;
    if (std::fabs(c) < 1e-300) c = 1e-300;
    d = 1.0 / d;
    double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < 1e-15) break;
  }
  return std::exp(-x + a * std::log(x) - gln) * h;
}

inline double chi_square_p(double chi2, double df) { return gamma_q(df / 2, chi2 / 2); }

}  // namespace engram::test
