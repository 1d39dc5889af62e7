#include "engram_workers.hpp"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "queue_latency.hpp"

namespace throughput {

api::Client connect_engram() { return api::Client::connect(g_opt.engram_socket); }

api::Columns payload_columns(uint64_t payload) {
  api::Columns c;
  c.add("x", ENGRAM_FLOAT32, {uint32_t(payload / 4)});
  return c;
}

Result engram_writer_worker(const char* table, uint64_t payload, int64_t count, int64_t pace_ns,
                            const std::function<void()>& ready, bool queue) try {
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

}  // namespace throughput
