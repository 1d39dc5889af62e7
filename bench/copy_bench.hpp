// What the single-core copy benchmarks (bench_memcpy_alignment,
// bench_block_copy) share: their command line, a mapping larger than the
// caches with every page faulted in, the timing loop and medians.
#pragma once

#include <gnu/libc-version.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "stats.hpp"

namespace engram::bench {

struct CopyBench {
  bool quick = false;  // only keeps the benchmark from rotting: it must run, not measure
  std::string out;     // the JSON file
  double seconds = 0;  // per measurement
  size_t map_bytes = 0;
  char* map = nullptr;  // map_bytes, every page faulted in
  std::ofstream f;      // open on out, the JSON's head written: a "results" list follows
};

// Parses [--quick] [--out FILE] (out defaults to default_out), maps 512 MiB
// (16 MiB with --quick), opens the output and writes the JSON's head (glibc,
// map_bytes, seconds, quick) up to the opening of its "results" list. Each
// measurement lasts `seconds`, 5 ms with --quick. 0, or the exit status
// after printing what was wrong.
inline int start_copy_bench(int argc, char** argv, const char* name, const char* default_out, double seconds,
                            CopyBench* b) {
  b->out = default_out;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--quick") b->quick = true;
    else if (s == "--out" && i + 1 < argc) b->out = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--quick] [--out FILE]\n", name);
      return 2;
    }
  }
  b->seconds = b->quick ? 0.005 : seconds;
  b->map_bytes = b->quick ? size_t{16} << 20 : size_t{512} << 20;
  void* m = ::mmap(nullptr, b->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    std::perror("mmap");
    return 1;
  }
  b->map = static_cast<char*>(m);
  std::memset(b->map, 1, b->map_bytes);  // fault every page in before timing
  b->f.open(b->out);
  if (!b->f) {
    std::fprintf(stderr, "cannot write %s\n", b->out.c_str());
    return 1;
  }
  b->f << "{\"glibc\": \"" << gnu_get_libc_version() << "\", \"map_bytes\": " << b->map_bytes
       << ", \"seconds\": " << b->seconds << ", \"quick\": " << (b->quick ? "true" : "false") << ", \"results\": [";
  return 0;
}

// Closes the results list with json_tail (the rest of the JSON), prints the
// summary under its title and unmaps. The exit status.
inline int finish_copy_bench(CopyBench* b, const std::string& json_tail, const char* title, const std::string& summary) {
  b->f << "\n]" << json_tail << "}\n";
  b->f.close();
  ::munmap(b->map, b->map_bytes);
  if (!b->f) {
    std::fprintf(stderr, "cannot write %s\n", b->out.c_str());
    return 1;
  }
  std::fprintf(stderr, "%s:\n%swrote %s\n", title, summary.c_str(), b->out.c_str());
  return 0;
}

// Items/s of calling copy_batch (which copies a few items and returns how
// many) until `seconds` have passed.
template <class F>
double copy_rate_for(double seconds, F&& copy_batch) {
  auto t0 = std::chrono::steady_clock::now();
  double elapsed = 0;
  size_t n = 0;
  while (elapsed < seconds) {
    n += copy_batch();
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return double(n) / elapsed;
}

}  // namespace engram::bench
