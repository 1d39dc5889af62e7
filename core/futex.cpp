#include <sched.h>
#include "core/futex.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace engram {

bool futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns) noexcept {
  struct timespec ts, *tp = nullptr;
  if (timeout_ns >= 0) {
    ts.tv_sec = timeout_ns / 1000000000;
    ts.tv_nsec = timeout_ns % 1000000000;
    tp = &ts;
  }
  // Not FUTEX_PRIVATE: the word is shared between processes.
  long rc = syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, tp, nullptr, 0);
  return !(rc == -1 && errno == ETIMEDOUT);
}

void futex_wake(std::atomic<uint32_t>* word, int n) noexcept {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, n, nullptr, nullptr, 0);
}

void yield_cpu() noexcept { sched_yield(); }

void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

namespace {
int64_t ns_of(const struct timespec& ts) { return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec; }
}  // namespace

int64_t monotonic_ns() noexcept {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ns_of(ts);
}

int64_t deadline_after_ms(int32_t ms) noexcept {
  if (ms < 0) return -1;
  // The coarse clock is the precise one as of the last tick it was
  // advanced at. That is not always the last tick: behind by up to two
  // ticks and a little (read after the precise clock on a 2-core VM,
  // HZ=250: 7.96 ms idle and beside CPU hogs, and deadlines from a margin
  // of two ticks came 44 ns early 20 times in 300 loops of the test), so
  // three ticks of margin keep the deadline from coming early. 0 if the
  // kernel has no coarse clock (precise clock instead).
  static const int64_t margin_ns = [] {
    struct timespec res;
    return clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0 ? 3 * ns_of(res) : int64_t{0};
  }();
  struct timespec ts;
  int64_t now = ms >= kCoarseDeadlineMs && margin_ns > 0 && clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) == 0
                    ? ns_of(ts) + margin_ns
                    : monotonic_ns();
  return now + int64_t{ms} * 1000000;
}

void Doorbell::ring() noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // The load keeps the common case (nobody asleep) free of a locked
  // instruction; the exchange lets one ring of a burst make the call.
  if (sleepers.load(std::memory_order_relaxed) != 0 && sleepers.exchange(0, std::memory_order_seq_cst) != 0) {
    seq.fetch_add(1, std::memory_order_seq_cst);
    futex_wake(&seq, INT_MAX);
  }
}

void Doorbell::wake_all() noexcept {
  seq.fetch_add(1, std::memory_order_seq_cst);
  futex_wake(&seq, INT_MAX);
}

}  // namespace engram
