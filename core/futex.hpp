// Waiting on a 32-bit word in shared memory: a bounded spin, then a shared
// (cross-process) futex. Nothing here busy-polls for ever.
#pragma once

#include <atomic>
#include <cstdint>

namespace engram {

// Sleeps while *word == expected, at most timeout_ns (< 0: no limit). Returns
// false on timeout. Spurious wake-ups are possible: re-check the condition.
bool futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns) noexcept;
// Wakes up to n waiters on word.
void futex_wake(std::atomic<uint32_t>* word, int n) noexcept;
void cpu_relax() noexcept;
// Gives the core to another runnable thread, if there is one (sched_yield).
void yield_cpu() noexcept;
int64_t monotonic_ns() noexcept;
// The CLOCK_MONOTONIC time `ms` milliseconds from now; -1 (no deadline) for
// ms < 0. Never early (but see below). From kCoarseDeadlineMs up it is
// read from the coarse clock (a writer computes one per insert, and the
// coarse clock costs a fraction of the precise one) plus three of its
// ticks (it lags the precise clock by up to two), so it may be up to three
// ticks late (12 ms at HZ=250). A tick held up by more than one more (a VM's vCPU paused
// then) lets the coarse clock lag further, and such a deadline can come
// early by the excess.
int64_t deadline_after_ms(int32_t ms) noexcept;
inline constexpr int32_t kCoarseDeadlineMs = 100;

// Rounds a waiter spins before it sleeps, yielding the core every 64
// rounds. Spinning saves the futex round trip when the wait is short; with
// more runnable threads than cores (two writers and a table owner on two
// cores), pure spinning starves the thread being waited for, and the
// yields hand it the core. The measurements: bench/NOTES.md, "Tuned
// constants".
inline constexpr int kDefaultSpin = 500;
// Rounds a waiter spins when it knows its wait is short: a client waiting
// for the answer to its own request, or a table owner holding a client's
// request back for the rate limiter (the request that lets it proceed is
// what the blocked client waits for). Long enough (about 0.1 ms) to outlast
// a typical wake-up from futex sleep, which it would otherwise pay
// (bench/NOTES.md, "Tuned constants").
inline constexpr int kAnswerSpin = 4000;

// A doorbell: a sequence word the producer rings and a word that says
// somebody sleeps on it, so that ringing costs one load when nobody waits.
// Layout (shared): { seq, sleepers }; both 32-bit atomics.
//
// `sleepers` counts waits that registered and that no ring has answered
// yet. A ring that finds any takes them all (exchanges it to 0) and wakes
// every waiter, so the rings that follow before the woken thread runs
// (60-80 us on the VM, bench/NOTES.md) cost a load each, not a system
// call each. A waiter that leaves on its own (ready, or timed out) takes
// back its registration unless a ring already took it. Each bell has one
// waiter (one thread per handle, one owner per table): were there two, one
// leaving could take back the other's registration, and the other would
// sleep until its timeout: never a hang, as the daemon's and the library's
// waits all wake within 0.1 s to look again (kMaxSleepNs, kSliceNs). Words
// that others may scribble on (clients share the table's bell) can delay a
// wake by as much, and no more; wake_all ignores them.
struct Doorbell {
  std::atomic<uint32_t> seq;
  std::atomic<uint32_t> sleepers;

  // Producer side, after publishing: wakes sleepers, if any. The fence pairs
  // with the one in wait() (Dekker): either the waiter sees the published
  // data or the producer sees the sleeper and bumps seq, so the waiter's
  // futex_wait(seq, old) returns at once.
  void ring() noexcept;
  // Wakes every sleeper whatever `sleepers` says: for a waker that must not
  // trust the word, because others may write it (the daemon waking its own
  // table owner on a bell that clients share). A system call each time.
  void wake_all() noexcept;
  // Consumer side: waits until ready() returns true or the timeout passes.
  // Spins `spin` rounds first. Returns ready()'s last value.
  template <typename Ready>
  bool wait(Ready ready, int64_t timeout_ns, int spin = kDefaultSpin) noexcept {
    for (int i = 0; i < spin; ++i) {
      if (ready()) return true;
      if ((i & 63) == 63) yield_cpu();  // let a runnable thread on this core go first
      else cpu_relax();
    }
    int64_t deadline = timeout_ns < 0 ? -1 : monotonic_ns() + timeout_ns;
    for (;;) {
      uint32_t s = seq.load(std::memory_order_seq_cst);
      sleepers.fetch_add(1, std::memory_order_seq_cst);
      std::atomic_thread_fence(std::memory_order_seq_cst);
      if (ready()) {
        unregister();
        return true;
      }
      int64_t left = -1;
      if (deadline >= 0) {
        left = deadline - monotonic_ns();
        if (left <= 0) {
          unregister();
          return ready();
        }
      }
      futex_wait(&seq, s, left);
      unregister();
      if (ready()) return true;
    }
  }

 private:
  // Takes back this waiter's registration, unless a ring took it.
  void unregister() noexcept {
    uint32_t n = sleepers.load(std::memory_order_relaxed);
    while (n != 0 && !sleepers.compare_exchange_weak(n, n - 1, std::memory_order_seq_cst)) {
    }
  }
};
static_assert(sizeof(Doorbell) == 8);

}  // namespace engram
