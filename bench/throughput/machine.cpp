#include "machine.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>
#include <vector>

#include "harness.hpp"

namespace throughput {

namespace {

// The first two CPUs this process may use; false with fewer.
bool first_two_cpus(int cpus[2]) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return false;
  int n = 0;
  for (int c = 0; c < CPU_SETSIZE && n < 2; ++c)
    if (CPU_ISSET(c, &allowed)) cpus[n++] = c;
  return n == 2;
}

bool pin(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  return pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
}

}  // namespace

double core_round_trip_ns() {
  int cpus[2];
  if (!first_two_cpus(cpus)) return -1;
  constexpr int kRounds = 20000;
  alignas(64) std::atomic<int> ping{0};
  alignas(64) std::atomic<int> pong{0};
  std::atomic<bool> pinned_ok{true};
  std::thread echo([&] {
    if (!pin(cpus[1])) pinned_ok = false;
    for (int i = 1; i <= kRounds; ++i) {
      while (ping.load(std::memory_order_acquire) != i)
        if (!pinned_ok.load(std::memory_order_relaxed)) return;
      pong.store(i, std::memory_order_release);
    }
  });
  double ns = -1;
  std::thread serve([&] {
    if (!pin(cpus[0])) pinned_ok = false;
    if (!pinned_ok) return;
    int64_t t0 = now_ns();
    for (int i = 1; i <= kRounds; ++i) {
      ping.store(i, std::memory_order_release);
      while (pong.load(std::memory_order_acquire) != i)
        if (!pinned_ok.load(std::memory_order_relaxed)) return;
    }
    ns = double(now_ns() - t0) / kRounds;
  });
  serve.join();
  echo.join();
  return ns;
}

WakeUp futex_wake_up_us(int idle_us, int count) {
  WakeUp w;
  int cpus[2];
  if (!first_two_cpus(cpus)) return w;
  alignas(64) std::atomic<uint32_t> word{0};
  alignas(64) std::atomic<int> asleep{0};  // the sleeper is about to wait
  std::atomic<int64_t> stamp{0};
  std::atomic<int> ready{0};
  std::atomic<bool> pinned_ok{true};
  auto start = [&](int cpu) {  // both pinned, or both give up
    if (!pin(cpu)) pinned_ok = false;
    ready.fetch_add(1);
    while (ready.load() < 2) std::this_thread::yield();
    return pinned_ok.load();
  };
  std::vector<double> lat;
  lat.reserve(size_t(count));
  std::thread sleeper([&] {
    if (!start(cpus[1])) return;
    for (int i = 0; i < count; ++i) {
      uint32_t seen = word.load();
      asleep.store(1);
      while (word.load() == seen) syscall(SYS_futex, &word, FUTEX_WAIT, seen, nullptr, nullptr, 0);
      lat.push_back((now_ns() - stamp.load()) / 1e3);
    }
  });
  std::thread waker([&] {
    if (!start(cpus[0])) return;
    for (int i = 0; i < count; ++i) {
      std::this_thread::sleep_for(std::chrono::microseconds(idle_us));
      while (asleep.exchange(0) == 0) std::this_thread::yield();
      stamp.store(now_ns());
      word.fetch_add(1);
      syscall(SYS_futex, &word, FUTEX_WAKE, 1, nullptr, nullptr, 0);
    }
  });
  waker.join();
  sleeper.join();
  if (lat.empty()) return w;
  std::sort(lat.begin(), lat.end());
  w.p50 = lat[lat.size() / 2];
  w.p99 = lat[std::min(lat.size() - 1, lat.size() * 99 / 100)];
  return w;
}

double machine_busy(int window_ms) {
  auto sample = [](uint64_t* busy, uint64_t* total) {
    std::ifstream in("/proc/stat");
    std::string cpu;
    uint64_t v[8] = {};
    if (!(in >> cpu) || cpu != "cpu") return false;
    for (uint64_t& x : v)
      if (!(in >> x)) return false;
    // user nice system idle iowait irq softirq steal
    *total = 0;
    for (uint64_t x : v) *total += x;
    *busy = *total - v[3] - v[4];
    return true;
  };
  uint64_t b0, t0, b1, t1;
  if (!sample(&b0, &t0)) return -1;
  std::this_thread::sleep_for(std::chrono::milliseconds(window_ms));
  if (!sample(&b1, &t1) || t1 <= t0) return -1;
  return double(b1 - b0) / double(t1 - t0);
}

int64_t kdamond_run_ns() {
  const std::string dir = "/sys/kernel/mm/damon/admin/kdamonds/";
  std::ifstream n(dir + "nr_kdamonds");
  int count = 0;
  if (!(n >> count) || count <= 0) return -1;
  int64_t total = 0;
  for (int i = 0; i < count; ++i) {
    std::ifstream p(dir + std::to_string(i) + "/pid");
    int pid = 0;
    int64_t ns = 0;
    if (!(p >> pid) || pid <= 0) continue;  // that kdamond is off
    std::ifstream st("/proc/" + std::to_string(pid) + "/schedstat");
    if (st >> ns) total += ns;
  }
  return total;
}

int busy_window_ms() { return g_opt.quick ? 10 : 50; }

Conditions conditions(const std::string& what) {
  double busy = machine_busy(busy_window_ms());
  if (busy > kBusyWarning)
    std::fprintf(stderr, "  warning: the machine was %.0f%% busy just before %s: another process is using the CPU "
                         "(see top); this repetition may run slow\n", 100 * busy, what.c_str());
  return {core_round_trip_ns(), busy, kdamond_run_ns()};
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

std::string damon_state() {
  const std::string dir = "/sys/kernel/mm/damon/admin/kdamonds/";
  std::ifstream n(dir + "nr_kdamonds");
  int count = 0;
  if (!(n >> count)) return "absent";
  for (int i = 0; i < count; ++i) {
    std::ifstream st(dir + std::to_string(i) + "/state");
    std::string s;
    if (st >> s && s == "on") return "on";
  }
  return "off";
}

std::string shm_huge_pages() {
  std::ifstream sys("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
  std::string word, enabled = "unknown";
  while (sys >> word)
    if (word.size() > 2 && word.front() == '[' && word.back() == ']') enabled = word.substr(1, word.size() - 2);
  return "memfd, shmem_enabled " + enabled;
}

}  // namespace throughput
