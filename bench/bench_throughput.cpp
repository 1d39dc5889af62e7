// The multi-process throughput harness (driven by bench/throughput.sh):
// engram against what users would pick instead (Redis, pipelined) and
// against the machine's copy bandwidth (memcpy into a shared mapping larger
// than the caches), same payloads, same processes, same run.
//
// The parent stays single-threaded and forks every worker, so that fork()
// is safe; workers connect, get ready, wait for "go", warm up, measure, and
// report one Result through a pipe. Each repetition runs every scenario of
// a payload once, and the median of each is kept. Output: one JSON document
// (written by write_json below; bench/summarize_throughput.py reads it).
#include <hiredis/hiredis.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "stats.hpp"
#include "engram/engram.hpp"

namespace {

struct Options {
  std::string engram_socket, redis_socket, out, git = "unknown";
  bool quick = false;
  int reps = 3;
  double seconds = 1.0, warmup = 0.3;
  std::vector<uint64_t> payloads = {400, 4000, 40000, 400000};
  std::vector<std::string> only;  // "system/op" prefixes to run (profiling); empty: all
};
Options g_opt;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// What a worker reports.
struct Result {
  double items = 0, seconds = 0;
  int error = 0;
  char message[200] = {};
};

Result failed(const char* what, int rc) {
  Result r;
  r.error = rc ? rc : -1;
  std::snprintf(r.message, sizeof r.message, "%s: %s (%s)", what, engram_strerror(rc), engram_last_error());
  return r;
}
Result failed(const char* what, const engram::api::Error& e) {
  Result r;
  r.error = e.code() ? e.code() : -1;
  std::snprintf(r.message, sizeof r.message, "%s: %s", what, e.what());
  return r;
}

// Runs `body` in `n` forked workers at once; returns their results. body(i,
// ready) must call ready() once prepared; the clock starts for all together.
std::vector<Result> run_workers(int n, const std::function<Result(int, const std::function<void()>&)>& body) {
  int ready_pipe[2], go_pipe[2];
  if (::pipe(ready_pipe) || ::pipe(go_pipe)) std::abort();
  std::vector<pid_t> pids;
  std::vector<int> result_fds;
  for (int i = 0; i < n; ++i) {
    int res[2];
    if (::pipe(res)) std::abort();
    pid_t p = ::fork();
    if (p == 0) {
      ::close(res[0]);
      bool said_ready = false;
      auto ready = [&] {
        said_ready = true;
        char c = 1;
        if (::write(ready_pipe[1], &c, 1) != 1) std::_Exit(3);
        if (::read(go_pipe[0], &c, 1) != 1) std::_Exit(3);
      };
      Result r = body(i, ready);
      // A worker that failed before it was ready (the server went away)
      // still counts as ready, or the parent would wait for it for ever.
      char c = 1;
      if (!said_ready && ::write(ready_pipe[1], &c, 1) != 1) std::_Exit(3);
      if (::write(res[1], &r, sizeof r) != sizeof r) std::_Exit(3);
      std::_Exit(0);
    }
    ::close(res[1]);
    pids.push_back(p);
    result_fds.push_back(res[0]);
  }
  for (int i = 0; i < n; ++i) {
    char c;
    if (::read(ready_pipe[0], &c, 1) != 1) break;
  }
  std::string go(static_cast<size_t>(n), '\1');
  if (::write(go_pipe[1], go.data(), go.size()) != static_cast<ssize_t>(go.size())) std::abort();
  std::vector<Result> out;
  for (int i = 0; i < n; ++i) {
    Result r;
    if (::read(result_fds[static_cast<size_t>(i)], &r, sizeof r) != sizeof r) {
      r.error = -1;
      std::snprintf(r.message, sizeof r.message, "worker %d died", i);
    }
    ::close(result_fds[static_cast<size_t>(i)]);
    out.push_back(r);
  }
  for (pid_t p : pids) ::waitpid(p, nullptr, 0);
  for (int fd : {ready_pipe[0], ready_pipe[1], go_pipe[0], go_pipe[1]}) ::close(fd);
  return out;
}

// Runs f() repeatedly for warmup then seconds; f returns items done. The
// clock is read every `stride` calls: a clock_gettime per single-item call
// showed in profiles as a tenth of a writer's time, charged to the system
// under test.
template <typename F>
Result timed(F f, int stride = 1) {
  int64_t t0 = now_ns(), warm_end = t0 + int64_t(g_opt.warmup * 1e9);
  while (now_ns() < warm_end) f();
  Result r;
  int64_t start = now_ns(), end = start + int64_t(g_opt.seconds * 1e9), t = start;
  while (t < end) {
    for (int i = 0; i < stride; ++i) r.items += f();
    t = now_ns();
  }
  r.seconds = (t - start) / 1e9;
  return r;
}

// Queue latency: the writer stamps each item's create_item call, the
// reader the moment the sample that returns it comes back, both by item
// number (the payload's first 8 bytes), into arrays shared by fork. The
// parent matches them. Both clocks are CLOCK_MONOTONIC, system-wide.
constexpr size_t kMaxStamped = 1 << 20;
int64_t* g_created = nullptr;   // [kMaxStamped]
int64_t* g_returned = nullptr;  // [kMaxStamped]

// Set by a queue's reader when its measurement is over: its writer keeps
// writing until then, so that the reader's last batch is never left
// waiting for items nobody writes any more (its 1 s timeout would count).
std::atomic<int>* g_reader_done = nullptr;

void init_stamps() {
  size_t bytes = 2 * kMaxStamped * sizeof(int64_t) + 64;
  void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) std::abort();
  g_created = static_cast<int64_t*>(m);
  g_returned = g_created + kMaxStamped;
  g_reader_done = new (g_returned + kMaxStamped) std::atomic<int>(0);
}

// Percentiles of returned - created (us) over the items that have both; -1
// where no item has both. p99.9 and the maximum show the stalls behind a
// p99: rare, and in this VM milliseconds long (bench/NOTES.md). pace:
// the mean interval between the writer's items, which sleeps 20 us before
// each; timer slack and wake-ups make it longer (about 120 us here).
struct Latency {
  double p50 = -1, p99 = -1, p999 = -1, max = -1, pace = -1;
  double wake_p50 = -1, wake_p99 = -1;  // futex_wake_up_us(), just before
};

Latency latency() {
  std::vector<double> lat;
  int64_t first = 0, last = 0;
  size_t created = 0;
  for (size_t i = 0; i < kMaxStamped; ++i) {
    if (!g_created[i]) continue;
    if (!created++) first = g_created[i];
    last = g_created[i];
    if (g_returned[i]) lat.push_back((g_returned[i] - g_created[i]) / 1e3);
  }
  std::sort(lat.begin(), lat.end());
  std::memset(g_created, 0, 2 * kMaxStamped * sizeof(int64_t));
  Latency l;
  if (lat.empty()) return l;
  auto at = [&](size_t per_mille) { return lat[std::min(lat.size() - 1, lat.size() * per_mille / 1000)]; };
  l.p50 = at(500);
  l.p99 = at(990);
  l.p999 = at(999);
  l.max = lat.back();
  if (created > 1) l.pace = (last - first) / 1e3 / double(created - 1);
  return l;
}

// --- engram workers ------------------------------------------------------

// Set-up goes through engram.hpp; the calls that are measured stay the C
// functions, on the wrappers' handles (get()), so that the numbers are the
// C ABI's, which every binding calls.
namespace api = engram::api;

api::Client connect_engram() { return api::Client::connect(g_opt.engram_socket); }

api::Columns payload_columns(uint64_t payload) {
  api::Columns c;
  c.add("x", ENGRAM_FLOAT32, {uint32_t(payload / 4)});
  return c;
}

// A payload buffer that starts on a cache line, as numpy's and LibTorch's
// tensors do; every payload buffer here is one, on all sides (engram,
// Redis, memcpy). glibc's memcpy is slower when source and destination
// disagree mod 32 (bench_memcpy_alignment.cpp prints by how much), and
// malloc's 16-byte alignment left each process to where its heap happened
// to put the buffer: a writer's source at 16 or 48 mod 64 against the
// 64-aligned chunk columns.
class Bytes {
 public:
  explicit Bytes(size_t n)
      : p_(static_cast<char*>(std::aligned_alloc(kAlign, (std::max<size_t>(n, 1) + kAlign - 1) / kAlign * kAlign))) {
    if (!p_) std::abort();
    std::memset(p_.get(), 0, n);
  }
  char* data() noexcept { return p_.get(); }

 private:
  static constexpr size_t kAlign = 64;
  struct Free {
    void operator()(char* p) const noexcept { std::free(p); }
  };
  std::unique_ptr<char[], Free> p_;
};

Bytes random_bytes(size_t n, uint64_t seed) {
  Bytes v(n);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i + 8 <= n; i += 8) {
    uint64_t x = rng();
    std::memcpy(v.data() + i, &x, 8);
  }
  return v;
}

// Writes items of one step, the item number in the payload's first 8 bytes.
// With pace_ns > 0, one item per pace_ns, each create_item stamped. A queue
// writer outlives its reader by a moment: items refused by the full queue
// after that (ENGRAM_E_TIMEOUT) are not counted, and are not an error.
Result engram_writer_worker(const char* table, uint64_t payload, int64_t count, int64_t pace_ns,
                            const std::function<void()>& ready, bool queue = false) try {
  api::Client c = connect_engram();
  api::Table table_handle = c.open_table(table);
  api::WriterOptions wo;
  wo.columns = payload_columns(payload);
  wo.insert_timeout_ms = 2000;  // a stuck run fails instead of hanging
  api::Writer writer = c.writer(wo);
  engram_writer* w = writer.get();
  engram_table* t = table_handle.get();
  Bytes data = random_bytes(payload, uint64_t(::getpid()));
  const void* cols[1] = {data.data()};
  uint64_t n = 0;
  int err = 0;
  auto one = [&]() -> double {
    // Sleep, not spin: a spinning writer would steal the core the server
    // and the reader need, and measure the scheduler instead.
    if (pace_ns > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(pace_ns));
    uint64_t item = n++;
    std::memcpy(data.data(), &item, 8);
    int rc = engram_writer_append(w, cols);
    if (pace_ns > 0 && item < kMaxStamped) g_created[item] = now_ns();
    if (!rc) rc = engram_writer_create_item(w, t, 1, 1.0 + double(n % 7));
    if (rc == ENGRAM_E_TIMEOUT && queue) return 0;
    if (rc && !err) err = rc;
    return rc ? 0 : 1;
  };
  ready();
  Result r;
  if (count > 0) {  // a fill, not a measurement
    for (int64_t i = 0; i < count; ++i) one();
  } else {
    r = timed(one, pace_ns > 0 ? 1 : 16);  // Redis pipelines 64 per call, memcpy copies 256
    // Uncounted: a queue's writer outlives its reader (at most 5 s more).
    for (int64_t cap = now_ns() + 5'000'000'000; queue && !g_reader_done->load() && now_ns() < cap;) one();
  }
  int64_t f0 = now_ns();
  if (int rc = engram_writer_flush(w, 60000); rc && !err && !(queue && rc == ENGRAM_E_TIMEOUT)) err = rc;
  r.seconds += (now_ns() - f0) / 1e9;  // what was created counts only once applied
  if (err) return failed("write", err);
  return r;
} catch (const api::Error& e) {
  return failed("writer set-up", e);
}

Result engram_sampler_worker(const char* table, uint64_t payload, uint32_t batch, bool zero_copy, bool latency,
                             const std::function<void()>& ready) try {
  api::Client c = connect_engram();
  api::Table table_handle = c.open_table(table);
  engram_table* t = table_handle.get();
  Bytes buf(payload * batch);
  void* bufs[1] = {buf.data()};
  std::vector<engram_sample_info> info(batch);
  engram_sample_options so = api::sample_options(batch, 1, 1000);
  int err = 0;
  auto one = [&]() -> double {
    uint32_t n = 0;
    int rc;
    if (zero_copy) {
      engram_batch* b = nullptr;
      rc = engram_sample_view(t, &so, &b);
      n = engram_batch_size(b);
      if (latency && n) {
        int64_t now = now_ns();
        for (uint32_t i = 0; i < n; ++i) {
          engram_view v;
          uint32_t nv = 0;
          uint64_t item;
          engram_batch_views(b, i, 0, &v, 1, &nv);
          std::memcpy(&item, v.data, 8);
          if (item < kMaxStamped) g_returned[item] = now;
        }
      }
      engram_batch_release(b);
    } else {
      rc = engram_sample(t, &so, bufs, info.data(), &n);
    }
    if (rc == ENGRAM_E_TIMEOUT) return 0;
    if (rc && !err) err = rc;
    return n;
  };
  ready();
  Result r = timed(one);
  g_reader_done->store(1);
  if (err) return failed("sample", err);
  return r;
} catch (const api::Error& e) {
  g_reader_done->store(1);
  return failed("sampler set-up", e);
}

// --- Redis workers (hiredis, 64 commands per pipeline) -----------------------

constexpr int kPipeline = 64;

// SET (sample false) or GET of random keys k0..k(keys-1). With fill, SETs
// every one of those keys once instead, untimed.
Result redis_worker(bool sample, uint64_t payload, uint64_t key_base, uint64_t keys, const std::function<void()>& ready,
                    bool fill = false) {
  redisContext* rc = redisConnectUnix(g_opt.redis_socket.c_str());
  if (!rc || rc->err) return failed("redis connect", -1);
  Bytes data = random_bytes(payload, key_base + 1);
  std::mt19937_64 rng(key_base + 7);
  uint64_t next = 0;
  int err = 0;
  auto batch = [&]() -> double {
    char key[32];
    for (int i = 0; i < kPipeline; ++i) {
      uint64_t k = sample ? rng() % keys : key_base + (next++ % keys);
      int n = std::snprintf(key, sizeof key, "k%llu", static_cast<unsigned long long>(k));
      if (sample) redisAppendCommand(rc, "GET %b", key, size_t(n));
      else redisAppendCommand(rc, "SET %b %b", key, size_t(n), data.data(), size_t(payload));
    }
    for (int i = 0; i < kPipeline; ++i) {
      void* reply = nullptr;
      if (redisGetReply(rc, &reply) != REDIS_OK) err = 1;
      else {
        auto* r = static_cast<redisReply*>(reply);
        if (sample && (r->type != REDIS_REPLY_STRING || r->len != payload)) err = 2;
        freeReplyObject(reply);
      }
    }
    return kPipeline;
  };
  ready();
  Result r;
  if (fill) {
    while (next < keys) batch();
  } else {
    r = timed(batch);
  }
  redisFree(rc);
  if (err) {
    Result f;
    f.error = -1;
    std::snprintf(f.message, sizeof f.message, "redis %s failed (%d)", sample ? "GET" : "SET", err);
    return f;
  }
  return r;
}

// --- memcpy into a shared mapping larger than the caches -----------------------

// Larger than the caches. --quick, which only keeps the harness from
// rotting, maps 64 MB: faulting in 512 MB took this VM seconds per process.
size_t map_bytes() { return g_opt.quick ? size_t{64} << 20 : size_t{512} << 20; }

Result memcpy_worker(bool gather, uint64_t payload, const std::function<void()>& ready) {
  size_t bytes = std::max<size_t>(map_bytes(), payload * 64);
  auto* map = static_cast<char*>(::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (map == MAP_FAILED) return failed("mmap", -1);
  std::memset(map, 1, bytes);  // fault every page in before timing
  size_t slots = bytes / payload, next = 0;
  Bytes local(payload * 256);
  Bytes data = random_bytes(payload, 5);
  std::mt19937_64 rng(9);
  auto batch = [&]() -> double {
    for (int i = 0; i < 256; ++i) {
      if (gather) std::memcpy(local.data() + size_t(i) * payload, map + (rng() % slots) * payload, payload);
      else std::memcpy(map + (next++ % slots) * payload, data.data(), payload);
    }
    return 256;
  };
  ready();
  Result r = timed(batch);
  ::munmap(map, bytes);
  return r;
}

// The round trip of a cache line between two cores: two threads pinned to
// the first two CPUs this process may use hand a counter back and forth.
// Every item crosses between the writer's and the owner's cores several
// times, and in this VM the round trip has been seen at about 150 and about
// 600 ns in different hours; every scenario's repetition records it, so
// that a run's numbers can be read against it (how far it explains their
// swings is open: bench/NOTES.md). -1 with fewer than two CPUs.
// Threads are joined before the next fork.
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

// The share of all CPUs' time, 0 to 1, that was not idle (steal included:
// a vCPU the host did not run is not ours either) during window_ms, from
// /proc/stat; -1 if it cannot be read. Taken while the harness and its
// servers sit idle, so anything above a tick or two is another process: a
// stray CPU hog once spoiled 20 minutes of measurements unnoticed. The
// counters tick every 10 ms, so a 50 ms window on 2 CPUs resolves 10%.
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

// CPU time (ns) that the kernel's DAMON threads (kdamond) have used so far,
// from /proc/PID/schedstat; -1 without DAMON. Its sampling and pageout
// passes come in bursts of tens of milliseconds on one CPU, long enough to
// stall a queue's items (bench/NOTES.md), so each repetition records
// how much of them it ran beside.
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

int busy_window_ms() { return g_opt.quick ? 10 : 50; }

Conditions conditions(const std::string& what) {
  double busy = machine_busy(busy_window_ms());
  if (busy > kBusyWarning)
    std::fprintf(stderr, "  warning: the machine was %.0f%% busy just before %s: another process is using the CPU "
                         "(see top); this repetition may run slow\n", 100 * busy, what.c_str());
  return {core_round_trip_ns(), busy, kdamond_run_ns()};
}

// --- scenarios ------------------------------------------------------------------

struct Record {
  std::string system, op, table;
  uint64_t payload;
  int processes;
  double items_per_s, mb_per_s;
  Latency latency;  // medians over the repetitions; the queue's only
  std::vector<double> reps;
  std::vector<Conditions> conditions;  // just before each repetition
};
std::vector<Record> g_records;
int g_failures = 0;

// Sum of items/s over workers; errors are reported and count as failures.
double rate(const std::vector<Result>& rs, size_t first, size_t n) {
  double total = 0;
  for (size_t i = first; i < first + n; ++i) {
    const Result& r = rs[i];
    if (r.error) {
      std::fprintf(stderr, "  worker error: %s\n", r.message);
      ++g_failures;
      continue;
    }
    if (r.seconds > 0) total += r.items / r.seconds;
  }
  return total;
}

using engram::bench::median;

void record(const std::string& system, const std::string& op, const std::string& table, uint64_t payload, int procs,
            const std::vector<double>& reps, const std::vector<Conditions>& conditions, const Latency& l = {}) {
  double ips = median(reps);
  g_records.push_back({system, op, table, payload, procs, ips, ips * double(payload) / 1e6, l, reps, conditions});
  std::fprintf(stderr, "  %-7s %-16s %-12s %7llu B  x%d  %12.0f items/s  %9.1f MB/s%s\n", system.c_str(), op.c_str(),
               table.c_str(), static_cast<unsigned long long>(payload), procs, ips, ips * double(payload) / 1e6,
               l.p99 >= 0 ? (" p50 " + std::to_string(int(l.p50)) + " us p99 " + std::to_string(int(l.p99)) + " us p99.9 " +
                             std::to_string(int(l.p999)) + " us max " + std::to_string(int(l.max)) + " us")
                                .c_str()
                          : "");
}

// Is system/op selected by --only?
bool wanted(const std::string& system, const std::string& op) {
  if (g_opt.only.empty()) return true;
  std::string name = system + "/" + op;
  for (const std::string& o : g_opt.only)
    if (name.rfind(o, 0) == 0) return true;
  return false;
}

// One payload's scenarios, collected over its repetitions. A repetition runs
// every scenario once, so the repetitions of engram and of its baselines
// alternate: a slow minute of this VM (cross-core latency here swings by
// 2x from one minute to the next) lands on all of them, not on one system.
struct Collected {
  std::string system, op, table;
  int processes;
  std::vector<double> reps;
  std::vector<Conditions> conditions;
  std::vector<Latency> latencies;
};
std::vector<Collected> g_collected;  // in order of first run

void collect(const std::string& system, const std::string& op, const std::string& table, int procs, double items_per_s,
             const Conditions& before, const Latency& l = {}) {
  auto it = std::find_if(g_collected.begin(), g_collected.end(), [&](const Collected& c) {
    return c.system == system && c.op == op && c.table == table && c.processes == procs;
  });
  if (it == g_collected.end()) it = g_collected.insert(g_collected.end(), Collected{system, op, table, procs, {}, {}, {}});
  it->reps.push_back(items_per_s);
  Conditions c = before;
  if (int64_t now = kdamond_run_ns(); now >= 0 && c.kdamond_ns >= 0) c.kdamond_ms = double(now - c.kdamond_ns) / 1e6;
  it->conditions.push_back(c);
  if (l.p99 >= 0) it->latencies.push_back(l);
}

// Medians of what was collected for `payload`, as records.
void record_collected(uint64_t payload) {
  for (const Collected& c : g_collected) {
    Latency l;
    if (!c.latencies.empty()) {
      auto med = [&](double Latency::*f) {
        std::vector<double> v;
        for (const Latency& x : c.latencies) v.push_back(x.*f);
        return median(v);
      };
      l = {med(&Latency::p50),  med(&Latency::p99),      med(&Latency::p999),
           med(&Latency::max),  med(&Latency::pace),     med(&Latency::wake_p50),
           med(&Latency::wake_p99)};
    }
    record(c.system, c.op, c.table, payload, c.processes, c.reps, c.conditions, l);
  }
  g_collected.clear();
}

// Runs a scenario once (one repetition), if --only selects it.
void scenario(const std::string& system, const std::string& op, const std::string& table, int procs,
              const std::function<double()> run) {
  if (!wanted(system, op)) return;
  Conditions before = conditions(system + "/" + op);
  collect(system, op, table, procs, run(), before);
}

// Drops a table, if there is one of that name (left over from an interrupted run).
void drop_table(api::Client& c, const char* name) {
  try {
    c.drop_table(name);
  } catch (const api::Error& e) {
    if (e.code() != ENGRAM_E_NOT_FOUND) throw;
  }
}

void create_table(api::Client& c, const char* name, uint64_t payload, uint64_t capacity, engram_selector sampler,
                  bool queue) {
  api::TableOptions o;
  o.name = name;
  o.max_size = capacity;
  o.sampler = sampler;
  o.priority_exponent = 0.6;
  o.columns = payload_columns(payload);
  if (queue) {
    o.max_times_sampled = 1;
    o.rate_limiter = api::RateLimiter::queue(int64_t(capacity));
  }
  drop_table(c, name);
  c.create_table(o);
}

// Sizing, shared with the server's config (--print-config): per payload an
// arena class of blocks that hold one step, with room for a full table plus
// what writers and samplers hold in flight, within a byte budget.
constexpr uint32_t kRing = 256;  // client.ring_records: also the sample batch
uint64_t budget() { return g_opt.quick ? (uint64_t{64} << 20) : (uint64_t{1} << 30); }
uint64_t block_bytes(uint64_t payload) { return 64 + (payload + 63) / 64 * 64; }
// Items a table holds: 1e5, fewer where that would take over half the budget.
uint64_t table_items(uint64_t payload) {
  return std::max<uint64_t>(64, std::min<uint64_t>(100000, budget() / 2 / payload));
}
uint64_t class_blocks(uint64_t payload) {
  return std::min<uint64_t>(table_items(payload) + 4 * kRing + 64, budget() / block_bytes(payload));
}

void print_config() {
  std::printf("# written by engram_bench_throughput --print-config%s\n[client]\nring_records = %u\n[arena]\nclasses = [\n",
              g_opt.quick ? " --quick" : "", kRing);
  for (uint64_t p : g_opt.payloads)
    std::printf("  { block_size = %llu, count = %llu },\n", static_cast<unsigned long long>(block_bytes(p)),
                static_cast<unsigned long long>(class_blocks(p)));
  std::printf("]\n");
}

// One repetition of every scenario of a payload.
void run_payload_once(uint64_t payload) {
  uint64_t items = table_items(payload);

  // memcpy: copy in (insert) with 1 and 2 processes, random gather (sample).
  for (int p : {1, 2})
    scenario("memcpy", "insert", "none", p, [&] {
      return rate(run_workers(p, [&](int, auto& ready) { return memcpy_worker(false, payload, ready); }), 0, size_t(p));
    });
  scenario("memcpy", "sample", "none", 1, [&] {
    return rate(run_workers(1, [&](int, auto& ready) { return memcpy_worker(true, payload, ready); }), 0, 1);
  });

  // Redis: SET with 1 and 2 clients, then GET of random keys of a filled set.
  if (!g_opt.redis_socket.empty()) {
    for (int p : {1, 2})
      scenario("redis", "insert", "none", p, [&] {
        return rate(run_workers(p, [&](int i, auto& ready) { return redis_worker(false, payload, uint64_t(i) << 40, items, ready); }),
                    0, size_t(p));
      });
    if (wanted("redis", "sample"))
      run_workers(1, [&](int, auto& ready) { return redis_worker(false, payload, 0, items, ready, true); });
    for (int p : {1, 2})
      scenario("redis", "sample", "none", p, [&] {
        return rate(run_workers(p, [&](int i, auto& ready) { return redis_worker(true, payload, uint64_t(i), items, ready); }), 0,
                    size_t(p));
      });
  }

  std::optional<api::Client> client;
  try {
    client.emplace(connect_engram());
    // Inserts into a uniform table that evicts FIFO once full.
    create_table(*client, "ins", payload, items, ENGRAM_UNIFORM, false);
  } catch (const api::Error& e) {
    std::fprintf(stderr, "engram at %s: %s\n", g_opt.engram_socket.c_str(), e.what());
    ++g_failures;
    return;
  }
  api::Client& c = *client;
  for (int p : {1, 2})
    scenario("engram", "insert", "uniform", p, [&] {
      return rate(run_workers(p, [&](int, auto& ready) { return engram_writer_worker("ins", payload, 0, 0, ready); }), 0,
                  size_t(p));
    });
  drop_table(c, "ins");

  // Samples from full prioritized and uniform tables.
  for (auto [name, sampler] : {std::pair<const char*, engram_selector>{"prioritized", ENGRAM_PRIORITIZED}, {"uniform", ENGRAM_UNIFORM}}) {
    if (!wanted("engram", "sample") && !wanted("engram", "sample_zero_copy")) continue;
    create_table(c, name, payload, items, sampler, false);
    run_workers(1, [&](int, auto& ready) { return engram_writer_worker(name, payload, int64_t(items), 0, ready); });
    for (bool zc : {false, true})
      for (int p : {1, 2})
        scenario("engram", zc ? "sample_zero_copy" : "sample", name, p, [&] {
          return rate(run_workers(p, [&](int, auto& ready) { return engram_sampler_worker(name, payload, 256, zc, false, ready); }),
                      0, size_t(p));
        });
    drop_table(c, name);
  }

  // Both at once: a writer and a sampler on one prioritized table.
  if (wanted("engram", "both")) {
    create_table(c, "both", payload, items, ENGRAM_PRIORITIZED, false);
    run_workers(1, [&](int, auto& ready) { return engram_writer_worker("both", payload, int64_t(items), 0, ready); });
    Conditions before = conditions("engram/both");
    auto rs = run_workers(2, [&](int k, auto& ready) {
      return k == 0 ? engram_writer_worker("both", payload, 0, 0, ready)
                    : engram_sampler_worker("both", payload, 256, false, false, ready);
    });
    collect("engram", "both_insert", "prioritized", 1, rate(rs, 0, 1), before);
    collect("engram", "both_sample", "prioritized", 1, rate(rs, 1, 1), before);
    drop_table(c, "both");
  }

  // A queue: items/s end to end at full speed, then the latency from
  // create_item to the (zero-copy) sample that returns it, paced at one item
  // per 20 us so that the queue does not back up (not rate-limited).
  if (!wanted("engram", "queue")) return;
  uint64_t queue_items = std::min<uint64_t>(items, 4096);
  uint32_t queue_batch = uint32_t(std::min<uint64_t>(256, queue_items));
  create_table(c, "queue", payload, queue_items, ENGRAM_FIFO, true);
  Conditions before = conditions("engram/queue");
  g_reader_done->store(0);
  auto rs = run_workers(2, [&](int k, auto& ready) {
    return k == 0 ? engram_writer_worker("queue", payload, 0, 0, ready, true)
                  : engram_sampler_worker("queue", payload, queue_batch, false, false, ready);
  });
  double thr = rate(rs, 1, 1);
  c.reset_table("queue");
  WakeUp wake = futex_wake_up_us(100, g_opt.quick ? 200 : 2000);
  g_reader_done->store(0);
  auto lat = run_workers(2, [&](int k, auto& ready) {
    return k == 0 ? engram_writer_worker("queue", payload, 0, 20000, ready, true)
                  : engram_sampler_worker("queue", payload, 1, true, true, ready);
  });
  rate(lat, 0, 2);
  Latency l = latency();
  l.wake_p50 = wake.p50;
  l.wake_p99 = wake.p99;
  collect("engram", "queue", "queue", 1, thr, before, l);
  drop_table(c, "queue");
}

void run_payload(uint64_t payload) {
  std::fprintf(stderr, "payload %llu B\n", static_cast<unsigned long long>(payload));
  for (int i = 0; i < g_opt.reps; ++i) {
    try {
      run_payload_once(payload);
    } catch (const api::Error& e) {  // a table's set-up: the repetition is lost, and counted as a failure
      std::fprintf(stderr, "payload %llu B: %s\n", static_cast<unsigned long long>(payload), e.what());
      ++g_failures;
    }
  }
  record_collected(payload);
}

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\';
    if (ch == '\n') {
      o += "\\n";
      continue;
    }
    o += ch;
  }
  return o + "\"";
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

// Whether the kernel's DAMON monitor runs: "on" if any kdamond does, "off",
// or "absent" (no DAMON sysfs). It samples and ages pages of every process,
// the arena's too, so runs with and without it are told apart.
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

// Whether the arenas can sit in huge pages. They are memfds (engramd(8),
// SHARED MEMORY), which follow the kernel's shmem_enabled setting for the
// internal shmem mount, not the options of the mount at /dev/shm (where
// the arenas lived until layout 6). Huge pages shorten DAMON's walk over
// the arenas (bench/NOTES.md).
std::string shm_huge_pages() {
  std::ifstream sys("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
  std::string word, enabled = "unknown";
  while (sys >> word)
    if (word.size() > 2 && word.front() == '[' && word.back() == ']') enabled = word.substr(1, word.size() - 2);
  return "memfd, shmem_enabled " + enabled;
}

double find(const std::string& system, const std::string& op, const std::string& table, uint64_t payload, int procs) {
  for (const Record& r : g_records)
    if (r.system == system && r.op == op && r.table == table && r.payload == payload && r.processes == procs)
      return r.items_per_s;
  return 0;
}

void write_json() {
  utsname u{};
  ::uname(&u);
  std::ostringstream o;
  o << "{\n  \"machine\": {\"cores\": " << std::thread::hardware_concurrency() << ", \"cpu\": " << json_str(cpu_model())
    << ", \"kernel\": " << json_str(std::string(u.sysname) + " " + u.release) << ", \"damon\": " << json_str(damon_state())
    << ", \"shm_huge_pages\": " << json_str(shm_huge_pages())
    << "},\n"
    << "  \"git\": " << json_str(g_opt.git) << ",\n  \"engram_version\": " << json_str(engram_version_string())
    << ",\n  \"config\": {\"quick\": " << (g_opt.quick ? "true" : "false") << ", \"repetitions\": " << g_opt.reps
    << ", \"seconds\": " << g_opt.seconds << ", \"warmup_seconds\": " << g_opt.warmup
    << ", \"statistic\": \"median of repetitions\", \"column\": \"float32\", \"chunk_length\": 1, \"item_steps\": 1"
    << ", \"sample_batch\": 256, \"queue_latency\": \"create_item call to the return of the zero-copy sample (batch 1) that "
       "delivers the item; the writer sleeps 20 us before each item (pace_us: the mean interval it reached); wake_up_p50_us / wake_up_p99_us: the machine's baseline, a thread asleep on a futex for 100 us or more woken from the other CPU\", \"redis_pipeline\": " << kPipeline << ", \"memcpy_mapping_bytes\": " << map_bytes()
    << ", \"busy_before\": \"share of all CPUs not idle in the " << busy_window_ms()
    << " ms before each repetition, from /proc/stat\", \"kdamond_ms\": \"CPU time of the kernel's DAMON threads during each "
       "repetition (-1: no DAMON)\"},\n"
    << "  \"results\": [\n";
  for (size_t i = 0; i < g_records.size(); ++i) {
    const Record& r = g_records[i];
    o << "    {\"system\": " << json_str(r.system) << ", \"op\": " << json_str(r.op) << ", \"table\": " << json_str(r.table)
      << ", \"payload_bytes\": " << r.payload << ", \"processes\": " << r.processes << ", \"items_per_s\": " << r.items_per_s
      << ", \"mb_per_s\": " << r.mb_per_s;
    if (r.latency.p99 >= 0)
      o << ", \"p50_us\": " << r.latency.p50 << ", \"p99_us\": " << r.latency.p99 << ", \"p999_us\": " << r.latency.p999
        << ", \"max_us\": " << r.latency.max << ", \"pace_us\": " << r.latency.pace
        << ", \"wake_up_p50_us\": " << r.latency.wake_p50 << ", \"wake_up_p99_us\": " << r.latency.wake_p99;
    o << ", \"repetitions\": [";
    for (size_t k = 0; k < r.reps.size(); ++k) o << (k ? ", " : "") << r.reps[k];
    o << "], \"round_trip_ns\": [";
    for (size_t k = 0; k < r.conditions.size(); ++k) o << (k ? ", " : "") << std::lround(r.conditions[k].round_trip_ns);
    o << "], \"busy_before\": [";
    for (size_t k = 0; k < r.conditions.size(); ++k)
      o << (k ? ", " : "") << std::round(r.conditions[k].busy * 100) / 100;
    o << "], \"kdamond_ms\": [";
    for (size_t k = 0; k < r.conditions.size(); ++k)
      o << (k ? ", " : "") << std::round(r.conditions[k].kdamond_ms * 10) / 10;
    o << "]}" << (i + 1 < g_records.size() ? "," : "") << "\n";
  }
  o << "  ],\n  \"ratios\": [\n";
  bool first = true;
  for (uint64_t p : g_opt.payloads) {
    double ei = find("engram", "insert", "uniform", p, 1), ri = find("redis", "insert", "none", p, 1),
           mi = find("memcpy", "insert", "none", p, 1), ei2 = find("engram", "insert", "uniform", p, 2),
           mi2 = find("memcpy", "insert", "none", p, 2), es = find("engram", "sample", "prioritized", p, 1),
           rs = find("redis", "sample", "none", p, 1), ms = find("memcpy", "sample", "none", p, 1),
           ez = find("engram", "sample_zero_copy", "prioritized", p, 1);
    auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
    o << (first ? "" : ",\n") << "    {\"payload_bytes\": " << p << ", \"insert_engram_over_redis\": " << ratio(ei, ri)
      << ", \"insert_engram_over_memcpy\": " << ratio(ei, mi) << ", \"insert_2_over_1_writers\": " << ratio(ei2, ei)
      << ", \"memcpy_2_over_1\": " << ratio(mi2, mi) << ", \"sample_engram_over_redis\": " << ratio(es, rs)
      << ", \"sample_engram_over_memcpy_gather\": " << ratio(es, ms) << ", \"zero_copy_items_per_s\": " << ez << "}";
    first = false;
  }
  o << "\n  ]\n}\n";
  std::ofstream(g_opt.out) << o.str();
}

}  // namespace

int main(int argc, char** argv) {
  bool print_only = false;
  std::vector<uint64_t> payloads;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--engram-socket") g_opt.engram_socket = next();
    else if (a == "--redis-socket") g_opt.redis_socket = next();
    else if (a == "--out") g_opt.out = next();
    else if (a == "--git") g_opt.git = next();
    else if (a == "--quick") g_opt.quick = true;
    else if (a == "--print-config") print_only = true;
    else if (a == "--reps") g_opt.reps = std::max(1, std::atoi(next().c_str()));
    else if (a == "--seconds") g_opt.seconds = std::atof(next().c_str());
    else if (a == "--warmup") g_opt.warmup = std::atof(next().c_str());
    else if (a == "--payload") payloads.push_back(std::strtoull(next().c_str(), nullptr, 10));
    else if (a == "--only") g_opt.only.push_back(next());
    else {
      std::fprintf(stderr,
                   "usage: engram_bench_throughput --engram-socket PATH [--redis-socket PATH] --out FILE\n"
                   "       engram_bench_throughput --print-config [--quick]   (the server config it needs)\n"
                   "       [--quick] [--reps N] [--seconds S] [--warmup S] [--git REV]\n"
                   "       [--payload BYTES]... [--only SYSTEM/OP]...   (a subset, for profiling)\n"
                   "(bench/throughput.sh starts the servers and runs this)\n");
      return 2;
    }
  }
  if (!payloads.empty()) g_opt.payloads = payloads;
  if (print_only) {
    print_config();
    return 0;
  }
  if (g_opt.engram_socket.empty() || g_opt.out.empty()) {
    std::fprintf(stderr, "--engram-socket and --out are required\n");
    return 2;
  }
  if (g_opt.quick) {
    g_opt.reps = 1;
    g_opt.seconds = 0.15;
    g_opt.warmup = 0.05;
  }
  init_stamps();
  for (uint64_t p : g_opt.payloads) run_payload(p);
  write_json();
  std::fprintf(stderr, "wrote %s (%zu results, %d worker failures)\n", g_opt.out.c_str(), g_records.size(), g_failures);
  return g_failures ? 1 : 0;
}
