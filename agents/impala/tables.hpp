// The tables engram-impala trains through, besides the parameter table
// (params.hpp) and the episodes table (episodes.hpp):
//   unrolls  a queue (FIFO, each item sampled once, a Queue rate limiter
//            that holds actors back when the learner lags). Each env is
//            one stream of steps; an item is T + 1 consecutive steps, and
//            consecutive items of an env share their boundary step, which
//            is stored once. Step s of an env holds the observation x_s
//            and what led to it: the previous step's action a_{s-1}, its
//            reward r_{s-1}, its discount (gamma, or 0 when the episode
//            ended: x_s is then the next episode's first observation) and
//            the behaviour policy's logits at x_{s-1}. So an item's steps
//            0..T give T transitions and the bootstrap observation x_T.
//            Columns: obs (float32 for CartPole, uint8 planes for
//            Breakout), action (int32), reward, discount (float32),
//            logits (float32 [A]), env (int32: the env's global index),
//            rollout (int32: the index k of the unroll whose transition
//            the step carries; the learner reads it at step T).
#pragma once

#include <engram/engram.hpp>

#include <algorithm>
#include <vector>

#include "agents/impala/options.hpp"

namespace engram::agents::impala {

inline constexpr const char* kUnrollTable = "unrolls";

inline bool byte_observations(const Options& o) { return o.env == "breakout"; }

inline api::Columns unroll_columns(const Options& o, const std::vector<int64_t>& obs_shape, int actions) {
  auto dim = [&](size_t i) { return static_cast<uint32_t>(obs_shape[i]); };
  engram_dtype t = byte_observations(o) ? ENGRAM_UINT8 : ENGRAM_FLOAT32;
  api::Columns c;
  if (obs_shape.size() == 1) c.add("obs", t, {dim(0)});
  else c.add("obs", t, {dim(0), dim(1), dim(2)});
  c.add("action", ENGRAM_INT32).add("reward", ENGRAM_FLOAT32).add("discount", ENGRAM_FLOAT32);
  c.add("logits", ENGRAM_FLOAT32, {static_cast<uint32_t>(actions)});
  c.add("env", ENGRAM_INT32).add("rollout", ENGRAM_INT32);
  return c;
}

// Items the queue holds before actors wait: two batches, or in the
// reproducible mode two whole rollouts (rollout k + 1 can be written
// while rollout k waits to be learned from, never k + 2). Deeper is
// worse: the learner learns from older data (CartPole with 64 envs and
// 128 unrolls queued rose to 250 and fell back to 14; with 32 and 64 it
// solved in 5 of 5 seeds).
// A learner that listens holds one batch: its actor machines' queues
// (machine_tables) and their links in flight hold the rest, and as deep
// here too the learner's data was older than on one machine.
inline int64_t queue_size(const Options& o) { return (o.listen.empty() ? 2 : 1) * std::max(o.batch, o.envs); }

}  // namespace engram::agents::impala
