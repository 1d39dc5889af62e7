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

int64_t monotonic_ns() noexcept {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

void Doorbell::ring() noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleepers.load(std::memory_order_relaxed) != 0) {
    seq.fetch_add(1, std::memory_order_seq_cst);
    futex_wake(&seq, INT_MAX);
  }
}

}  // namespace engram
