// What a reproducible run (--reproducible 1) saves so that its actors can
// go on after a resume exactly where the learner's state stands: update U
// learned from rollout U - 1, so the actors must act rollout U next, from
// the envs' states after rollouts 0..U-1, with the parameters of update
// U - 1 (version max(1, U)).
//
// Env states are not saved: each env is a pure function of its seed and
// the actions it was given (AGENTS.md, section 1), and its action-sampling
// stream draws once per step, so an actor rebuilds both by replaying the
// logged actions without inference (millions of steps a second), and
// checks that the replay ends at the logged observation. What the next
// unroll carries over from the last (its step 0: the observation, action,
// reward with any bootstrap folded in, discount and logits) is logged too.
//
// Sections (learner_state.hpp): rollout_actions, u8 [U][E][T], the action
// taken at each step; carry_obs float [E][obs], carry_action i32 [E],
// carry_reward, carry_discount float [E], carry_logits float [E][A]; and
// act_params, the parameters rollout U acts with.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "agents/common/host/learner_state.hpp"
#include "agents/impala/unrolls.hpp"

namespace engram::agents::impala {

struct RolloutLog {
  int64_t envs = 0, unroll = 0, obs_size = 0, actions = 0;
  std::vector<uint8_t> taken;  // [rollouts][envs][unroll]
  std::vector<float> carry_obs, carry_reward, carry_discount, carry_logits;
  std::vector<int32_t> carry_action;

  RolloutLog(int64_t e, int64_t t, int64_t obs, int64_t a) : envs(e), unroll(t), obs_size(obs), actions(a) {}

  int64_t rollouts() const { return static_cast<int64_t>(taken.size()) / (envs * unroll); }
  uint8_t action(int64_t rollout, int64_t env, int64_t t) const {
    return taken[static_cast<size_t>((rollout * envs + env) * unroll + t)];
  }

  // A rollout's batch, in env order (UnrollSource's reproducible order).
  void add(const Unrolls& u) {
    if (u.n != envs || u.steps != unroll + 1) throw std::logic_error("RolloutLog: not one rollout of every env");
    carry_obs.resize(static_cast<size_t>(envs * obs_size));
    carry_action.resize(static_cast<size_t>(envs));
    carry_reward.resize(static_cast<size_t>(envs));
    carry_discount.resize(static_cast<size_t>(envs));
    carry_logits.resize(static_cast<size_t>(envs * actions));
    for (int64_t j = 0; j < envs; ++j) {
      for (int64_t t = 1; t <= unroll; ++t) taken.push_back(static_cast<uint8_t>(u.action[static_cast<size_t>(j * u.steps + t)]));
      size_t last = static_cast<size_t>(j * u.steps + unroll);
      for (int64_t q = 0; q < obs_size; ++q)
        carry_obs[static_cast<size_t>(j * obs_size + q)] =
            u.obs_b.empty() ? u.obs[last * static_cast<size_t>(obs_size) + static_cast<size_t>(q)]
                            : static_cast<float>(u.obs_b[last * static_cast<size_t>(obs_size) + static_cast<size_t>(q)]);
      carry_action[static_cast<size_t>(j)] = u.action[last];
      carry_reward[static_cast<size_t>(j)] = u.reward[last];
      carry_discount[static_cast<size_t>(j)] = u.discount[last];
      for (int64_t k = 0; k < actions; ++k)
        carry_logits[static_cast<size_t>(j * actions + k)] = u.logits[last * static_cast<size_t>(actions) + static_cast<size_t>(k)];
    }
  }

  void save(StateOut* s) const {
    s->put("rollout_actions", taken);
    s->put("carry_obs", carry_obs);
    s->put("carry_action", carry_action);
    s->put("carry_reward", carry_reward);
    s->put("carry_discount", carry_discount);
    s->put("carry_logits", carry_logits);
  }

  // `rollouts`: the state's updates, whose rollouts the log must hold.
  void load(const StateIn& in, int64_t rollouts) {
    size_t e = static_cast<size_t>(envs);
    taken = in.get<uint8_t>("rollout_actions", static_cast<size_t>(rollouts * envs * unroll));
    if (rollouts == 0) return;  // nothing carried yet: the envs start afresh
    carry_obs = in.get<float>("carry_obs", e * static_cast<size_t>(obs_size));
    carry_action = in.get<int32_t>("carry_action", e);
    carry_reward = in.get<float>("carry_reward", e);
    carry_discount = in.get<float>("carry_discount", e);
    carry_logits = in.get<float>("carry_logits", e * static_cast<size_t>(actions));
  }
};

}  // namespace engram::agents::impala
