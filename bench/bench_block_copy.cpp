// How fast one core copies items into the blocks of a mapping larger than
// the caches, by the order in which it takes the blocks and by the kind of
// store: why a writer takes its spare blocks oldest first and streams steps
// of 1 KB and more past the caches (bench/NOTES.md, "Block order").
//
//   engram_bench_block_copy [--quick] [--out FILE]
//
// Blocks are laid out as in the throughput harness's arena (a 64-byte
// header line, then the payload rounded up to a cache line), and each item
// goes where a chunk's column starts, 64 bytes into its block. Orders:
// ascending (the memcpy baseline's), descending, random (a fixed
// permutation). Stores: plain (glibc's memcpy) and stream (engram's
// stream_copy, then stream_fence per item, as a writer fences each chunk),
// the latter also from a source 16 bytes off a cache line.
// Writes JSON: per payload, order and store, the median items/s of 3
// repetitions (the nine combinations alternate within each repetition, so a
// slow second of the VM lands on all of them).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/copy_bench.hpp"
#include "core/segment_header.hpp"
#include "core/stream_copy.hpp"

namespace {

using engram::kCacheLine;
const char* const kOrders[] = {"ascending", "descending", "random"};
struct Store {
  const char* name;
  bool stream;        // stream_copy + stream_fence, else memcpy
  size_t src_offset;  // of the source from a cache line (streamed values are read with unaligned loads: does that cost?)
};
const Store kStores[] = {{"plain", false, 0}, {"stream", true, 0}, {"stream_src16", true, 16}};
constexpr int kNumStores = sizeof kStores / sizeof kStores[0];

// Items/s copying `payload` bytes from src into the blocks listed in
// `order`, for `seconds`; `next` carries the position on, so that every
// repetition writes blocks the last one left cold.
double copy_rate(char* map, size_t block_bytes, const std::vector<uint32_t>& order, const char* src, size_t payload,
                 bool stream, double seconds, size_t* next) {
  return engram::bench::copy_rate_for(seconds, [&] {
    for (int i = 0; i < 16; ++i) {
      char* dst = map + size_t{order[(*next)++ % order.size()]} * block_bytes + kCacheLine;
      if (stream) {
        engram::stream_copy(dst, src, payload);
        engram::stream_fence();
      } else {
        std::memcpy(dst, src, payload);
      }
    }
    return 16;
  });
}

}  // namespace

int main(int argc, char** argv) {
  engram::bench::CopyBench bench;
  if (int rc = engram::bench::start_copy_bench(argc, argv, "engram_bench_block_copy", "bench/results/block-copy.json",
                                               0.3, &bench))
    return rc;
  const std::vector<size_t> payloads = {400, 4000, 40000, 400000};
  bool first = true;
  std::string summary;
  for (size_t payload : payloads) {
    size_t block_bytes = kCacheLine + (payload + kCacheLine - 1) / kCacheLine * kCacheLine;
    std::vector<uint32_t> orders[3];
    orders[0].resize(bench.map_bytes / block_bytes);
    std::iota(orders[0].begin(), orders[0].end(), 0u);
    orders[1].assign(orders[0].rbegin(), orders[0].rend());
    orders[2] = orders[0];
    std::shuffle(orders[2].begin(), orders[2].end(), std::mt19937(1));
    char* src = static_cast<char*>(std::aligned_alloc(kCacheLine, block_bytes + kCacheLine));
    if (!src) return 1;
    std::memset(src, 7, block_bytes + kCacheLine);
    std::vector<double> reps[3][kNumStores];
    size_t next = 0;
    for (int rep = 0; rep < 3; ++rep)
      for (int o = 0; o < 3; ++o)
        for (int s = 0; s < kNumStores; ++s)
          reps[o][s].push_back(copy_rate(bench.map, block_bytes, orders[o], src + kStores[s].src_offset, payload,
                                         kStores[s].stream, bench.seconds, &next));
    char line[200];
    std::snprintf(line, sizeof line, "  %6zu B:", payload);
    summary += line;
    for (int o = 0; o < 3; ++o)
      for (int s = 0; s < kNumStores; ++s) {
        double ips = engram::bench::median(reps[o][s]);
        bench.f << (first ? "" : ",") << "\n  {\"payload_bytes\": " << payload << ", \"order\": \"" << kOrders[o]
                << "\", \"store\": \"" << kStores[s].name << "\", \"items_per_s\": " << ips
                << ", \"mb_per_s\": " << ips * double(payload) / 1e6 << "}";
        first = false;
        std::snprintf(line, sizeof line, " %s/%s %.3fM", kOrders[o], kStores[s].name, ips / 1e6);
        summary += line;
      }
    summary += "\n";
    std::free(src);
  }
  return engram::bench::finish_copy_bench(&bench, "", "items/s by block order and store (medians of 3)", summary);
}
