#include "memcpy_worker.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <random>

namespace throughput {

size_t map_bytes() { return g_opt.quick ? size_t{64} << 20 : size_t{512} << 20; }

Result memcpy_worker(bool gather, uint64_t payload, const std::function<void()>& ready) {
  size_t bytes = std::max<size_t>(map_bytes(), payload * 64);
  auto* map = static_cast<char*>(::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (map == MAP_FAILED) return failed("mmap", -1);
  std::memset(map, 1, bytes);  // fault every page in before timing
  size_t slots = bytes / payload, next = 0;
  Bytes local(payload * 256);
  Bytes data = random_bytes(payload, 5);
  std::mt19937_64 rng(9);
  auto batch = [&]() -> double {
    for (int i = 0; i < 256; ++i) {
      if (gather) std::memcpy(local.data() + size_t(i) * payload, map + (rng() % slots) * payload, payload);
      else std::memcpy(map + (next++ % slots) * payload, data.data(), payload);
    }
    return 256;
  };
  ready();
  Result r = timed(batch);
  ::munmap(map, bytes);
  return r;
}

}  // namespace throughput
