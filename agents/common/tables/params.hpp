// The parameter table: how a learner hands its network to actors in any
// language. One table, "params", of one item that each publish replaces
// (max_size 1, FIFO eviction), with two columns:
//   version  int64    a count that grows with every publish (1, 2, ...)
//   params   float32  [P]: every parameter tensor of the network in the
//                     order the network registers them (LibTorch's
//                     named_parameters()), each flattened row-major, one
//                     after the other (nets.hpp).
// An actor samples the one item (batch 1) every so often and loads the
// floats if the version moved. See the README, "The parameter table".
#pragma once

#include <engram/engram.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace engram::agents {

inline constexpr const char* kParamsTable = "params";

inline api::TableOptions params_table(size_t floats) {
  api::TableOptions t;
  t.name = kParamsTable;
  t.max_size = 1;
  t.sampler = ENGRAM_UNIFORM;
  t.remover = ENGRAM_FIFO;
  t.columns.add("version", ENGRAM_INT64).add("params", ENGRAM_FLOAT32, {static_cast<uint32_t>(floats)});
  return t;
}

class ParamPublisher {
 public:
  ParamPublisher(api::Client& c, size_t floats) : table_(c.open_table(kParamsTable)) {
    api::WriterOptions o;
    o.columns = params_table(floats).columns;
    writer_ = c.writer(o);
  }
  void publish(int64_t version, const std::vector<float>& params) {
    writer_.append({&version, params.data()});
    writer_.create_item(table_, 1, 1.0);
    writer_.flush(10000);
  }

 private:
  api::Table table_;
  api::Writer writer_;
};

class ParamReader {
 public:
  explicit ParamReader(api::Client& c) : table_(c.open_table(kParamsTable)) {}
  // The newest parameters into *out if their version differs from `have`;
  // returns the version read, or `have` when nothing newer (or nothing yet)
  // is there. Never waits.
  int64_t read(int64_t have, std::vector<float>* out) {
    api::Batch b;
    try {
      b = table_.sample_view(api::sample_options(1, 1, 0));
    } catch (const api::Error& e) {
      if (e.code() == ENGRAM_E_RATE_LIMITED || e.code() == ENGRAM_E_TIMEOUT) return have;  // none yet
      throw;
    }
    if (b.size() == 0) return have;
    int64_t version = *static_cast<const int64_t*>(b.views(0, 0).at(0).data);
    if (version == have) return have;
    auto v = b.views(0, 1).at(0);
    const float* p = static_cast<const float*>(v.data);
    out->assign(p, p + out->size());
    return version;
  }
  // As read, but waits (polling every `poll`) until the version read is at
  // least `want` (1: any published one), or until stopped() says so; then
  // it returns whatever read returns.
  template <typename Stopped>
  int64_t wait(int64_t have, int64_t want, std::vector<float>* out, Stopped stopped,
               std::chrono::microseconds poll = std::chrono::microseconds(200)) {
    for (;;) {
      int64_t v = read(have, out);
      if (v >= want || stopped()) return v;
      std::this_thread::sleep_for(poll);
    }
  }

 private:
  api::Table table_;
};

}  // namespace engram::agents
