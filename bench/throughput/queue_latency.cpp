#include "queue_latency.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

namespace throughput {

int64_t* g_created = nullptr;
int64_t* g_returned = nullptr;
std::atomic<int>* g_reader_done = nullptr;

void init_stamps() {
  size_t bytes = 2 * kMaxStamped * sizeof(int64_t) + 64;
  void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) std::abort();
  g_created = static_cast<int64_t*>(m);
  g_returned = g_created + kMaxStamped;
  g_reader_done = new (g_returned + kMaxStamped) std::atomic<int>(0);
}

Latency latency() {
  std::vector<double> lat;
  int64_t first = 0, last = 0;
  size_t created = 0;
  for (size_t i = 0; i < kMaxStamped; ++i) {
    if (!g_created[i]) continue;
    if (!created++) first = g_created[i];
    last = g_created[i];
    if (g_returned[i]) lat.push_back((g_returned[i] - g_created[i]) / 1e3);
  }
  std::sort(lat.begin(), lat.end());
  std::memset(g_created, 0, 2 * kMaxStamped * sizeof(int64_t));
  Latency l;
  if (lat.empty()) return l;
  auto at = [&](size_t per_mille) { return lat[std::min(lat.size() - 1, lat.size() * per_mille / 1000)]; };
  l.p50 = at(500);
  l.p99 = at(990);
  l.p999 = at(999);
  l.max = lat.back();
  if (created > 1) l.pace = (last - first) / 1e3 / double(created - 1);
  return l;
}

}  // namespace throughput
