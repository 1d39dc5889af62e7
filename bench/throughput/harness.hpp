// The harness's frame: its options, the clock, a worker's result, forked
// workers started together, a timed loop, and payload buffers.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engram/engram.hpp"

namespace throughput {

struct Options {
  std::string engram_socket, redis_socket, out, git = "unknown";
  bool quick = false;
  int reps = 3;
  double seconds = 1.0, warmup = 0.3;
  std::vector<uint64_t> payloads = {400, 4000, 40000, 400000};
  std::vector<std::string> only;  // "system/op" prefixes to run (profiling); empty: all
};
extern Options g_opt;

int64_t now_ns();

// What a worker reports.
struct Result {
  double items = 0, seconds = 0;
  int error = 0;
  char message[200] = {};
};

Result failed(const char* what, int rc);
Result failed(const char* what, const engram::api::Error& e);

// Runs `body` in `n` forked workers at once; returns their results. body(i,
// ready) must call ready() once prepared; the clock starts for all together.
std::vector<Result> run_workers(int n, const std::function<Result(int, const std::function<void()>&)>& body);

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

// n bytes of a fixed random sequence (seed).
Bytes random_bytes(size_t n, uint64_t seed);

}  // namespace throughput
