// How an agent's process sets up OpenBLAS, which LibTorch does its matrix
// products with. OpenBLAS reads its settings when it loads, before main, so
// an agent that must change them sets them in its environment and starts
// itself again (restart_with_blas_settings, first thing in main); the actor
// processes it starts inherit them.
//
// - One thread (OPENBLAS_NUM_THREADS=1): see setup_process, nets.hpp.
// - Kernels the CPU can run fast (OPENBLAS_CORETYPE). Debian 12's OpenBLAS
//   (0.3.21, built for every x86 generation and choosing at load) does not
//   know CPUs newer than itself, and on one it falls back to its SSE3
//   kernels (`Prescott`) whatever the CPU has: on a KVM guest of an Intel
//   Xeon of family 6, model 207 (AVX-512), a 128x128x128 sgemm took about
//   four times as long with those as with `SkylakeX`'s
//   (bench/blas_kernels.py), and sgemm was 41% of an Ape-X
//   CartPole learner's CPU (bench/NOTES.md, "OpenBLAS on an unknown
//   CPU"). When OpenBLAS chose one of those generic kernels on a CPU with
//   AVX2 or AVX-512, the agent names the newest kernels the CPU's features
//   allow. A user's own OPENBLAS_CORETYPE is always kept.
#pragma once

#include <dlfcn.h>
#include <strings.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace engram::agents {

// The OpenBLAS kernels to run with, or nullptr to keep what OpenBLAS
// chose: `chosen` is OpenBLAS's own choice (openblas_get_corename();
// nullptr: no OpenBLAS loaded), the flags what the CPU can run. Replaced
// only when OpenBLAS fell back to a kernel older than AVX while the CPU
// has AVX-512 (F, BW, VL, DQ: SkylakeX's kernels) or AVX2 and FMA
// (Haswell's).
inline const char* blas_core_for(const char* chosen, bool avx512, bool avx2_fma) {
  if (!chosen) return nullptr;
  static const char* const kGeneric[] = {"prescott", "core2", "penryn", "dunnington", "nehalem", "atom", "unknown"};
  bool generic = false;
  for (const char* g : kGeneric) generic = generic || strcasecmp(chosen, g) == 0;
  if (!generic) return nullptr;
  if (avx512) return "SkylakeX";
  if (avx2_fma) return "Haswell";
  return nullptr;
}

// This CPU's flags for blas_core_for (__builtin_cpu_supports also checks
// that the kernel saves the registers).
inline bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}
inline bool cpu_has_avx2_fma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

// What OpenBLAS chose for this process, or nullptr where LibTorch's BLAS
// is not OpenBLAS.
inline const char* blas_core_chosen() {
  using CoreName = char* (*)();
  auto f = reinterpret_cast<CoreName>(::dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  return f ? f() : nullptr;
}

// Sets what OpenBLAS must be told at load and, if anything was missing,
// starts this program again with it (execv of /proc/self/exe with the same
// argv). Call first thing in main, before any thread starts.
inline void restart_with_blas_settings(const char* program, char** argv) {
  bool restart = false;
  if (!std::getenv("OPENBLAS_NUM_THREADS")) {
    ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
    ::setenv("OMP_NUM_THREADS", "1", 0);
    restart = true;
  }
  if (!std::getenv("OPENBLAS_CORETYPE")) {
    const char* chosen = blas_core_chosen();
    if (const char* core = blas_core_for(chosen, cpu_has_avx512(), cpu_has_avx2_fma())) {
      std::fprintf(stderr, "%s: OpenBLAS does not know this CPU and chose its %s kernels; the CPU has %s, so "
                           "%s's are used instead (OPENBLAS_CORETYPE=%s; set it to choose yourself)\n",
                   program, chosen, std::strcmp(core, "SkylakeX") == 0 ? "AVX-512" : "AVX2 and FMA", core, core);
      ::setenv("OPENBLAS_CORETYPE", core, 1);
      restart = true;
    }
  }
  if (restart) ::execv("/proc/self/exe", argv);
}

}  // namespace engram::agents
