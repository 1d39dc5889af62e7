// The two ends of IMPALA's hand-off of unrolls and parameters between the
// actors and the learner, and the actor's loop (act), which is the same
// whichever implementation carries them:
//   engram_port.hpp   engram: actor processes write unrolls into the
//                     queue table, the learner samples them (the real thing);
//   handoff_port.hpp  the learner's own memory: actors as threads, a
//                     bounded queue, no server (the baseline that measures
//                     what going through engram costs).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agents/common/host/call_clock.hpp"
#include "agents/common/host/children.hpp"
#include "agents/common/host/progress.hpp"
#include "agents/impala/options.hpp"
#include "agents/impala/unrolls.hpp"

namespace engram::agents::impala {

// An actor's end.
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
  // After a call threw ENGRAM_E_DISCONNECTED (the port's server went
  // away): connects again (reconnect.hpp, saying what was `lost`) and
  // starts every env's stream anew. False if stopped first, or if this
  // port has no server to lose.
  virtual bool reconnect(const std::string& lost) {
    (void)lost;
    return false;
  }
};

// The learner's end; it also starts and stops the actors.
class LearnerPort {
 public:
  virtual ~LearnerPort() = default;
  // The next batch, or nullptr once stop() (asked while waiting) says so.
  virtual std::unique_ptr<Unrolls> next(const std::function<bool()>& stop) = 0;
  virtual void publish(int64_t version, const std::vector<float>& flat) = 0;
  // Takes finished episodes into *curve; sets the unrolls queued in all
  // and those waiting now.
  virtual void poll(Curve* curve, int64_t* unrolls, uint64_t* queued) = 0;
  virtual void start() = 0;  // the actors
  // A reproducible run resumed from the state of `updates` updates: the
  // actors (started with `extra` flags) act rollout `updates` next, and the
  // next batch is that rollout.
  virtual void resume(int32_t updates, const std::vector<std::string>& extra) = 0;
  // Stops the actors; their counts summed (children.hpp, actor_counts).
  virtual ActorReport stop() = 0;
  // The learner's CPU seconds in this port's calls; 0 where they are not
  // measured (the handoff's are waits on its queue).
  virtual double learner_cpu_s() const { return 0; }
  // After a call threw ENGRAM_E_DISCONNECTED: connects again (only to an
  // engramd of --socket's; an embedded server goes only with the learner),
  // opens the queue again. False if there is nothing to reconnect to.
  virtual bool reconnect() { return false; }
};

struct ActorCounts {
  int64_t frames = 0;
  CallClock in_port;  // time in the port's calls: engram's, or the handoff's
};

// Steps actor o.actor_id's envs until port.stopped().
void act(const Options& o, ActorPort& port, ActorCounts* counts);

}  // namespace engram::agents::impala
