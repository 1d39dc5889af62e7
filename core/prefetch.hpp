// Fetching a cache line for writing before the store that needs it.
//
// A store to a line that another core holds cannot leave the store buffer
// until that core's copy is invalidated: a round trip between cores, about
// 600 ns in this project's VM. Stores leave in order (x86 TSO), so one such
// line stalls every store behind it. prefetchw starts the invalidation
// early and lets the store find the line already owned.
//
// GCC's __builtin_prefetch(p, 1) compiles to prefetcht0, a read, on x86-64
// unless the whole build has -mprfchw; a read prefetch leaves the other
// core's copy in place, so the store still waits. Hence the instruction
// here, used only where the CPU reports it (CPUID PRFCHW: AMD since K8,
// Intel since Broadwell); elsewhere the plain hint.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace engram {

#if defined(__x86_64__) || defined(__i386__)
inline bool cpu_has_prefetchw() noexcept {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(0x80000001u, &a, &b, &c, &d) && (c & bit_PRFCHW) != 0;
}
inline const bool kHasPrefetchw = cpu_has_prefetchw();
#endif

// Starts fetching the line that holds p, exclusive, for a store soon. A
// hint: no effect on what any load or store sees.
inline void prefetch_for_write(const void* p) noexcept {
#if defined(__x86_64__) || defined(__i386__)
  if (kHasPrefetchw) {
    asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
    return;
  }
#endif
  __builtin_prefetch(p, 1);
}

}  // namespace engram
