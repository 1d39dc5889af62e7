// The Redis baseline: hiredis over a Unix socket, pipelined.
#pragma once

#include <cstdint>
#include <functional>

#include "harness.hpp"

namespace throughput {

constexpr int kPipeline = 64;  // commands per pipeline

// SET (sample false) or GET of random keys k0..k(keys-1). With fill, SETs
// every one of those keys once instead, untimed.
Result redis_worker(bool sample, uint64_t payload, uint64_t key_base, uint64_t keys, const std::function<void()>& ready,
                    bool fill = false);

}  // namespace throughput
