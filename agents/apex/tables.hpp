// The tables engram-apex trains through, besides the parameter table
// (params.hpp):
//   replay    one n-step transition per item: obs, action (int32), reward
//             (float32: the discounted n-step return), discount (float32:
//             gamma^m, 0 after a terminal state), next_obs. Observations are
//             float32 for CartPole and uint8 planes for Breakout (4x10x10,
//             0 or 1: a quarter of the memory). Prioritized (alpha), FIFO
//             eviction, a SampleToInsertRatio rate limiter.
//   episodes  one item per finished episode (agents/common/tables/episodes.hpp).
#pragma once

#include <engram/engram.hpp>

#include "agents/apex/options.hpp"
#include "agents/apex/roles.hpp"
#include "agents/common/host/server_config.hpp"

namespace engram::agents::apex {

inline bool byte_observations(const Options& o) { return o.env == "breakout"; }

// Transitions per chunk an actor writes (each its own item).
inline constexpr uint32_t kChunkTransitions = 16;

inline api::Columns replay_columns(const Options& o, const std::vector<int64_t>& obs_shape) {
  engram_dtype t = byte_observations(o) ? ENGRAM_UINT8 : ENGRAM_FLOAT32;
  api::Columns c;
  auto add_obs = [&](const char* name) {
    if (obs_shape.size() == 1) c.add(name, t, {static_cast<uint32_t>(obs_shape[0])});
    else c.add(name, t, {static_cast<uint32_t>(obs_shape[0]), static_cast<uint32_t>(obs_shape[1]), static_cast<uint32_t>(obs_shape[2])});
  };
  add_obs("obs");
  c.add("action", ENGRAM_INT32).add("reward", ENGRAM_FLOAT32).add("discount", ENGRAM_FLOAT32);
  add_obs("next_obs");
  return c;
}

// The replay's chunks for `items` transitions held (the learner's
// capacity, an actor machine's queue), kChunkTransitions to a chunk
// (CartPole's fit 1 KB, Breakout's two 4x10x10 byte planes a step 16 KB),
// and room for the items in flight and each actor's open chunks.
inline ArenaClass replay_chunks(const Options& o, uint64_t items) {
  uint64_t chunks = items / kChunkTransitions + items / (4 * kChunkTransitions) + 4096 +
                    64 * static_cast<uint64_t>(o.actors);
  return {byte_observations(o) ? 16384u : 1024u, chunks};
}

}  // namespace engram::agents::apex
