// The memcpy baseline: copies into (insert) or gathered out of (sample) a
// shared mapping larger than the caches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "harness.hpp"

namespace throughput {

// Larger than the caches. --quick, which only keeps the harness from
// rotting, maps 64 MB: faulting in 512 MB took this VM seconds per process.
size_t map_bytes();

// 256 copies of payload bytes per timed call: in at the next slot, or out
// of a random one (gather) into a local buffer.
Result memcpy_worker(bool gather, uint64_t payload, const std::function<void()>& ready);

}  // namespace throughput
