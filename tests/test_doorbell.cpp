// The doorbell's wake-up protocol (core/futex.hpp): one system call per
// burst of rings, and a registration count that ends where it began.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <new>

#include "core/futex.hpp"

namespace engram {
namespace {

struct Shared {
  Doorbell bell;
  std::atomic<uint32_t> data;
};

Shared* map_shared() {
  void* mem = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return nullptr;
  return new (mem) Shared{};
}

// The rings that come before the woken waiter runs (60-80 us on the VM)
// make one system call between them: the first takes the registration,
// the others find none. The waiter is a stopped process here, so that it
// cannot run between the rings and take its registration back itself.
TEST(Doorbell, ABurstOfRingsWakesOnce) {
  Shared* sh = map_shared();
  ASSERT_NE(sh, nullptr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    bool ok = sh->bell.wait([&] { return sh->data.load() != 0; }, 10'000'000'000, /*spin=*/0);
    _exit(ok ? 0 : 1);
  }
  for (int i = 0; i < 50000 && sh->bell.sleepers.load() == 0; ++i) usleep(100);
  ASSERT_EQ(sh->bell.sleepers.load(), 1u) << "the child never went to sleep";
  int st = 0;
  kill(pid, SIGSTOP);
  waitpid(pid, &st, WUNTRACED);
  uint32_t seq0 = sh->bell.seq.load();
  sh->data.store(1);
  sh->bell.ring();
  EXPECT_EQ(sh->bell.sleepers.load(), 0u) << "the ring left the registration for the next ring to wake again";
  EXPECT_EQ(sh->bell.seq.load(), seq0 + 1);
  sh->bell.ring();
  sh->bell.ring();
  EXPECT_EQ(sh->bell.seq.load(), seq0 + 1) << "a later ring of the burst woke again";
  kill(pid, SIGCONT);
  waitpid(pid, &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "the waiter did not see the data";
  // Its registration was taken by the ring; it must not take another.
  EXPECT_EQ(sh->bell.sleepers.load(), 0u);
  munmap(sh, 4096);
}

// A waiter that leaves on its own takes its registration back, so that
// rings after it cost a load.
TEST(Doorbell, AWaiterThatTimesOutUnregisters) {
  Doorbell bell{};
  EXPECT_FALSE(bell.wait([] { return false; }, 1'000'000, /*spin=*/0));
  EXPECT_EQ(bell.sleepers.load(), 0u);
  uint32_t seq0 = bell.seq.load();
  bell.ring();
  EXPECT_EQ(bell.seq.load(), seq0);  // nobody asleep: no wake-up
}

}  // namespace
}  // namespace engram
