// Where an IMPALA actor's unrolls go and its parameters come from: engram
// (actor.cpp's EngramPort, the real thing), or the learner's own memory
// (handoff.hpp), the baseline that measures what going through engram
// costs. The actor's loop (act) is the same for both.
#pragma once

#include <cstdint>
#include <vector>

#include "agents/common/call_clock.hpp"
#include "agents/impala/options.hpp"

namespace engram::agents::impala {

class ActorPort {
 public:
  virtual ~ActorPort() = default;
  // The newest parameters into *out if their version differs from `have`
  // and is at least `want` (0: any), waiting until then; returns the
  // version read, or `have` once stopped.
  virtual int64_t parameters(int64_t have, int64_t want, std::vector<float>* out) = 0;
  // Env j's next step (tables.hpp): x_s (obs_size floats) and what led to
  // it. With `item`, it ends an unroll: the last T + 1 steps are one.
  virtual void step(size_t j, const float* x, int32_t action, float reward, float discount, const float* logits,
                    int32_t env, int32_t rollout, bool item) = 0;
  // Every env appended its first step (before any item).
  virtual void started() {}
  // Every env appended its unroll's last step; returns once those unrolls
  // are queued for the learner, so that an actor runs at most one unroll
  // ahead of the queue.
  virtual void unrolled() {}
  virtual void episode(int32_t env, float ret, int32_t length) = 0;
  virtual bool stopped() const = 0;
};

struct ActorCounts {
  int64_t frames = 0;
  CallClock in_port;  // time in the port's calls: engram's, or the handoff's
};

// Steps actor o.actor_id's envs until port.stopped().
void act(const Options& o, ActorPort& port, ActorCounts* counts);

}  // namespace engram::agents::impala
