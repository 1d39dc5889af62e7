// The episodes table, which every reference agent's actors write and its
// learner reads for the learning curve: one item per finished episode,
// read once (FIFO, max_times_sampled 1), with four columns:
//   env      int32    the env's global index (0..N-1 over all actors)
//   epsilon  float32  its exploration rate (Ape-X), 0 for a policy's own
//                     sampling (IMPALA)
//   return   float32  the episode's undiscounted return
//   length   int32    its steps
// The learner reads it into a Curve (host/progress.hpp).
#pragma once

#include <engram/engram.hpp>

#include <string>
#include <vector>

#include "agents/common/host/progress.hpp"

namespace engram::agents {

inline constexpr const char* kEpisodesTable = "episodes";

inline api::Columns episode_columns() {
  api::Columns c;
  c.add("env", ENGRAM_INT32).add("epsilon", ENGRAM_FLOAT32).add("return", ENGRAM_FLOAT32).add("length", ENGRAM_INT32);
  return c;
}

inline api::TableOptions episodes_table() {
  api::TableOptions e;
  e.name = kEpisodesTable;
  e.max_size = 100000;
  e.sampler = ENGRAM_FIFO;
  e.max_times_sampled = 1;
  e.columns = episode_columns();
  return e;
}

// Reads every finished episode there is into *curve; never waits.
inline void drain_episodes(api::Table& t, Curve* curve) {
  std::vector<int32_t> env(256), len(256);
  std::vector<float> eps(256), ret(256);
  std::vector<void*> bufs = {env.data(), eps.data(), ret.data(), len.data()};
  for (;;) {
    uint32_t n = 0;
    try {
      n = t.sample(api::sample_options(256, 1, 0), bufs);
    } catch (const api::Error& e) {
      if (e.code() == ENGRAM_E_RATE_LIMITED || e.code() == ENGRAM_E_TIMEOUT) return;
      throw;
    }
    for (uint32_t i = 0; i < n; ++i) curve->add(ret[i], eps[i]);
    if (n < 256) return;
  }
}

}  // namespace engram::agents
