// The engram side of the harness: a writer and a sampler in a worker.
#pragma once

#include <cstdint>
#include <functional>

#include "engram/engram.hpp"
#include "harness.hpp"

namespace throughput {

// Set-up goes through engram.hpp; the calls that are measured stay the C
// functions, on the wrappers' handles (get()), so that the numbers are the
// C ABI's, which every binding calls.
namespace api = engram::api;

api::Client connect_engram();
// One float32 column of payload bytes.
api::Columns payload_columns(uint64_t payload);

// Writes items of one step, the item number in the payload's first 8 bytes.
// With pace_ns > 0, one item per pace_ns, each create_item stamped. A queue
// writer outlives its reader by a moment: items refused by the full queue
// after that (ENGRAM_E_TIMEOUT) are not counted, and are not an error.
Result engram_writer_worker(const char* table, uint64_t payload, int64_t count, int64_t pace_ns,
                            const std::function<void()>& ready, bool queue = false);

// Samples batches of `batch` (zero-copy views or copies); with latency,
// stamps each item's return (queue_latency.hpp).
Result engram_sampler_worker(const char* table, uint64_t payload, uint32_t batch, bool zero_copy, bool latency,
                             const std::function<void()>& ready);

}  // namespace throughput
