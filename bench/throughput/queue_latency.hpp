#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace throughput {

// Queue latency: the writer stamps each item's create_item call, the
// reader the moment the sample that returns it comes back, both by item
// number (the payload's first 8 bytes), into arrays shared by fork. The
// parent matches them. Both clocks are CLOCK_MONOTONIC, system-wide.
constexpr size_t kMaxStamped = 1 << 20;
extern int64_t* g_created;   // [kMaxStamped]
extern int64_t* g_returned;  // [kMaxStamped]

// Set by a queue's reader when its measurement is over: its writer keeps
// writing until then, so that the reader's last batch is never left
// waiting for items nobody writes any more (its 1 s timeout would count).
extern std::atomic<int>* g_reader_done;

// Maps the stamps and the flag, shared with the workers forked after it.
void init_stamps();

// Percentiles of returned - created (us) over the items that have both; -1
// where no item has both. p99.9 and the maximum show the stalls behind a
// p99: rare, and in this VM milliseconds long (bench/NOTES.md). pace:
// the mean interval between the writer's items, which sleeps 20 us before
// each; timer slack and wake-ups make it longer (about 120 us here).
struct Latency {
  double p50 = -1, p99 = -1, p999 = -1, max = -1, pace = -1;
  double wake_p50 = -1, wake_p99 = -1;  // futex_wake_up_us(), just before
};

// The percentiles of the stamps taken since the last call; clears them.
Latency latency();

}  // namespace throughput
