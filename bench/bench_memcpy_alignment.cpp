// How fast one core's memcpy copies items into a shared mapping larger than
// the caches, by the alignment of source and destination mod 64. The
// throughput harness's payload buffers start on a cache line because of
// what this prints (bench/NOTES.md, "Alignment"): glibc's memcpy is
// slower when source and destination disagree mod 32.
//
//   engram_bench_memcpy_alignment [--quick] [--out FILE]
//
// Writes JSON: for each payload and each (src, dst) offset in {0, 16, 32,
// 48}, the median items/s of 3 repetitions (pairs alternate within each
// repetition, so a slow second of the VM lands on all of them), and per
// payload (by_payload) the medians of the pairs that agree mod 32 and of
// those 16 bytes apart.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/copy_bench.hpp"
#include "core/segment_header.hpp"

namespace {

constexpr size_t kOffsets[] = {0, 16, 32, 48};
using engram::kCacheLine;

// Items/s copying `payload` bytes from src into consecutive 64-aligned
// slots of `map` (+ dst_off) for `seconds`; `next` carries the slot on, so
// that every repetition writes memory the last one left cold.
double copy_rate(char* map, size_t slots, size_t slot_bytes, const char* src, size_t payload, size_t dst_off,
                 double seconds, size_t* next) {
  return engram::bench::copy_rate_for(seconds, [&] {
    for (int i = 0; i < 64; ++i) std::memcpy(map + (*next)++ % slots * slot_bytes + dst_off, src, payload);
    return 64;
  });
}

}  // namespace

int main(int argc, char** argv) {
  engram::bench::CopyBench bench;
  if (int rc = engram::bench::start_copy_bench(argc, argv, "engram_bench_memcpy_alignment",
                                               "bench/results/memcpy-alignment.json", 0.4, &bench))
    return rc;
  const std::vector<size_t> payloads = {4000, 40000};
  bool first = true;
  std::string summary, by_payload;
  for (size_t payload : payloads) {
    size_t slot_bytes = (payload + kCacheLine + kCacheLine - 1) / kCacheLine * kCacheLine;  // room for any offset
    size_t slots = bench.map_bytes / slot_bytes, next = 0;
    char* src_base = static_cast<char*>(std::aligned_alloc(kCacheLine, slot_bytes));
    if (!src_base) return 1;
    std::memset(src_base, 7, slot_bytes);
    std::vector<std::vector<double>> reps(16);
    for (int rep = 0; rep < 3; ++rep)
      for (size_t k = 0; k < 16; ++k)
        reps[k].push_back(copy_rate(bench.map, slots, slot_bytes, src_base + kOffsets[k / 4], payload, kOffsets[k % 4],
                                    bench.seconds, &next));
    std::vector<double> agree, apart;
    for (size_t k = 0; k < 16; ++k) {
      size_t so = kOffsets[k / 4], d = kOffsets[k % 4];
      double ips = engram::bench::median(reps[k]);
      ((so - d) % 32 == 0 ? agree : apart).push_back(ips);
      bench.f << (first ? "" : ",") << "\n  {\"payload_bytes\": " << payload << ", \"src_mod64\": " << so
        << ", \"dst_mod64\": " << d << ", \"items_per_s\": " << ips << ", \"mb_per_s\": " << ips * double(payload) / 1e6
        << "}";
      first = false;
    }
    double a = engram::bench::median(agree), b = engram::bench::median(apart);
    char line[200];
    std::snprintf(line, sizeof line, "  %6zu B: agreeing mod 32 %.3fM items/s, 16 bytes apart %.3fM, ratio %.2f\n",
                  payload, a / 1e6, b / 1e6, b / a);
    summary += line;
    by_payload += std::string(by_payload.empty() ? "" : ",") + "\n  {\"payload_bytes\": " + std::to_string(payload) +
                  ", \"agree_items_per_s\": " + std::to_string(a) + ", \"apart_items_per_s\": " + std::to_string(b) +
                  ", \"apart_over_agree\": " + std::to_string(b / a) + "}";
    std::free(src_base);
  }
  return engram::bench::finish_copy_bench(&bench, ", \"by_payload\": [" + by_payload + "\n]",
                                          "memcpy by alignment (medians over the pairs)", summary);
}
