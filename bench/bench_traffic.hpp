// What the checkpoint and export benchmarks share: a writer of float32
// steps, inserts at an actor's pace whose latencies are the traffic that
// must go on, percentiles, and the disk's own sequential write speed as
// the baseline.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "stats.hpp"
#include "engram/engram.hpp"

namespace bench {

using Clock = std::chrono::steady_clock;
inline double secs_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

namespace api = engram::api;

// A writer of steps of one float32 column of `floats` values, chunk_length 1.
inline api::Writer float_writer(api::Client& c, uint32_t floats) {
  api::WriterOptions wo;
  wo.columns.add("x", ENGRAM_FLOAT32, {floats});
  return c.writer(wo);
}

struct Insert {
  Clock::time_point start;
  double us;
};

// Small inserts into table "small" (100 float32s; each flushed: one round
// trip) until stop.
inline void insert_loop(const std::string& socket, std::atomic<bool>* stop, std::vector<Insert>* out) try {
  api::Client c = api::Client::connect(socket);
  api::Table t = c.open_table("small");
  api::Writer w = float_writer(c, 100);
  float x[100] = {};
  while (!stop->load()) {
    auto t0 = Clock::now();
    w.append({x});
    w.create_item(t, 1, 1.0);
    w.flush(-1);
    out->push_back({t0, secs_since(t0) * 1e6});
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // an actor's pace, not a flood
  }
} catch (const api::Error& e) {
  std::fprintf(stderr, "bench: inserts: %s\n", e.what());
  std::exit(1);
}

using engram::bench::median;
using engram::bench::pct;

// Sequential write of `bytes` in 1 MiB writes, then fsync: dd conv=fsync.
inline double disk_seq_mb_per_s(const std::string& dir, uint64_t bytes) {
  std::string path = dir + "/seq.bin";
  std::vector<char> buf(1 << 20);
  std::mt19937 rng(3);
  for (auto& b : buf) b = static_cast<char>(rng());
  auto t0 = Clock::now();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0640);
  if (fd < 0) return 0;
  for (uint64_t done = 0; done < bytes; done += buf.size())
    if (::write(fd, buf.data(), buf.size()) != static_cast<ssize_t>(buf.size())) break;
  ::fsync(fd);
  ::close(fd);
  double s = secs_since(t0);
  std::filesystem::remove(path);
  return double(bytes) / 1e6 / s;
}

}  // namespace bench
