// What the machine was like around a repetition: cross-core round trips,
// futex wake-ups, how busy it was, what DAMON ran, and what it is.
#pragma once

#include <cstdint>
#include <string>

namespace throughput {

// The round trip of a cache line between two cores: two threads pinned to
// the first two CPUs this process may use hand a counter back and forth.
// Every item crosses between the writer's and the owner's cores several
// times, and in this VM the round trip has been seen at about 150 and about
// 600 ns in different hours; every scenario's repetition records it, so
// that a run's numbers can be read against it (how far it explains their
// swings is open: bench/NOTES.md). -1 with fewer than two CPUs.
// Threads are joined before the next fork.
double core_round_trip_ns();

// How long a thread that slept on a futex takes to run again once another
// CPU wakes it: percentiles (us) over `count` wake-ups between two threads
// pinned to the first two CPUs, the sleeper idle for at least `idle_us`
// each time. A queue's item may wait for two such wake-ups (the owner's,
// the sampler's), so every queue repetition records this baseline next to
// its latency. In this VM a vCPU left idle is slow to come back
// (bench/NOTES.md). -1s with fewer than two CPUs.
struct WakeUp {
  double p50 = -1, p99 = -1;
};

WakeUp futex_wake_up_us(int idle_us, int count);

// The share of all CPUs' time, 0 to 1, that was not idle (steal included:
// a vCPU the host did not run is not ours either) during window_ms, from
// /proc/stat; -1 if it cannot be read. Taken while the harness and its
// servers sit idle, so anything above a tick or two is another process: a
// stray CPU hog once spoiled 20 minutes of measurements unnoticed. The
// counters tick every 10 ms, so a 50 ms window on 2 CPUs resolves 10%.
double machine_busy(int window_ms);

// CPU time (ns) that the kernel's DAMON threads (kdamond) have used so far,
// from /proc/PID/schedstat; -1 without DAMON. Its sampling and pageout
// passes come in bursts of tens of milliseconds on one CPU, long enough to
// stall a queue's items (bench/NOTES.md), so each repetition records
// how much of them it ran beside.
int64_t kdamond_run_ns();

// What the machine was like just before a repetition, and what ran beside
// it; kept next to its result in the JSON.
struct Conditions {
  double round_trip_ns;      // core_round_trip_ns()
  double busy;               // machine_busy()
  int64_t kdamond_ns;        // kdamond_run_ns() before the repetition
  double kdamond_ms = -1;    // kdamond's CPU time during it (collect())
};

// A busier machine than this before a repetition is reported at once: more
// than 0.8 of one of this VM's two CPUs went to something else.
constexpr double kBusyWarning = 0.4;

// The window machine_busy() is measured over before each repetition.
int busy_window_ms();

// The conditions now, before a repetition of `what`; warns on stderr when
// the machine was busier than kBusyWarning.
Conditions conditions(const std::string& what);

std::string cpu_model();
// Whether the kernel's DAMON monitor runs: "on" if any kdamond does, "off",
// or "absent" (no DAMON sysfs). It samples and ages pages of every process,
// the arena's too, so runs with and without it are told apart.
std::string damon_state();
// Whether the arenas can sit in huge pages. They are memfds (engramd(8),
// SHARED MEMORY), which follow the kernel's shmem_enabled setting for the
// internal shmem mount, not the options of the mount at /dev/shm (where
// the arenas lived until layout 6). Huge pages shorten DAMON's walk over
// the arenas (bench/NOTES.md).
std::string shm_huge_pages();

}  // namespace throughput
