// A batch of unrolls in the learner's memory: item-major, [n, T + 1, ...]
// per column, as engram's sample copies them out (tables.hpp says what
// step s of an unroll holds).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace engram::agents::impala {

struct Unrolls {
  int64_t n = 0, steps = 0, obs_size = 0, actions = 0;
  std::vector<float> obs;       // float observations (CartPole)
  std::vector<uint8_t> obs_b;   // byte observations (Breakout)
  std::vector<int32_t> action, env, rollout;
  std::vector<float> reward, discount, logits;

  Unrolls(int64_t n_, int64_t steps_, int64_t obs_size_, int64_t actions_, bool bytes)
      : n(n_), steps(steps_), obs_size(obs_size_), actions(actions_) {
    size_t ns = static_cast<size_t>(n * steps);
    if (bytes) obs_b.resize(ns * static_cast<size_t>(obs_size));
    else obs.resize(ns * static_cast<size_t>(obs_size));
    action.resize(ns);
    env.resize(ns);
    rollout.resize(ns);
    reward.resize(ns);
    discount.resize(ns);
    logits.resize(ns * static_cast<size_t>(actions));
  }
  // The column buffers in unroll_columns' order from item `first` on, for
  // engram's sample.
  std::vector<void*> buffers(int64_t first = 0) {
    size_t at = static_cast<size_t>(first * steps);
    size_t o = at * static_cast<size_t>(obs_size);
    return {obs_b.empty() ? static_cast<void*>(obs.data() + o) : obs_b.data() + o, action.data() + at,
            reward.data() + at, discount.data() + at, logits.data() + at * static_cast<size_t>(actions),
            env.data() + at, rollout.data() + at};
  }
  int32_t env_of(int64_t i) const { return env[static_cast<size_t>(i * steps)]; }
  int32_t rollout_of(int64_t i) const { return rollout[static_cast<size_t>(i * steps + steps - 1)]; }
  // Whether item i is one env's whole unroll: one env throughout, and steps
  // 1..T of one rollout. Anything else is a broken stream.
  bool whole(int64_t i) const {
    for (int64_t s = 1; s < steps; ++s) {
      size_t at = static_cast<size_t>(i * steps + s);
      if (env[at] != env_of(i) || rollout[at] != rollout_of(i)) return false;
    }
    return true;
  }
  // Step s of item i.
  void set_step(int64_t i, int64_t s, const float* x, int32_t a, float r, float d, const float* l, int32_t e,
                int32_t k) {
    size_t at = static_cast<size_t>(i * steps + s);
    size_t o = at * static_cast<size_t>(obs_size);
    if (obs_b.empty()) std::copy_n(x, obs_size, obs.begin() + static_cast<std::ptrdiff_t>(o));
    else
      for (int64_t q = 0; q < obs_size; ++q) obs_b[o + static_cast<size_t>(q)] = static_cast<uint8_t>(x[q]);
    action[at] = a;
    reward[at] = r;
    discount[at] = d;
    std::copy_n(l, actions, logits.begin() + static_cast<std::ptrdiff_t>(at * static_cast<size_t>(actions)));
    env[at] = e;
    rollout[at] = k;
  }
  // Copies steps [from_step, from_step + count) of item i of `from` into
  // item `to` of this, starting at step `to_step`.
  void copy_steps(const Unrolls& from, int64_t i, int64_t from_step, int64_t to, int64_t to_step, int64_t count) {
    auto cp = [&](auto& dst, const auto& src, int64_t per_step) {
      size_t len = static_cast<size_t>(count * per_step);
      size_t src_at = static_cast<size_t>((i * from.steps + from_step) * per_step);
      size_t dst_at = static_cast<size_t>((to * steps + to_step) * per_step);
      std::copy_n(src.begin() + static_cast<std::ptrdiff_t>(src_at), len, dst.begin() + static_cast<std::ptrdiff_t>(dst_at));
    };
    if (obs_b.empty()) cp(obs, from.obs, obs_size);
    else cp(obs_b, from.obs_b, obs_size);
    cp(action, from.action, 1);
    cp(env, from.env, 1);
    cp(rollout, from.rollout, 1);
    cp(reward, from.reward, 1);
    cp(discount, from.discount, 1);
    cp(logits, from.logits, actions);
  }
  void copy_item(const Unrolls& from, int64_t i, int64_t to) { copy_steps(from, i, 0, to, 0, steps); }
};

}  // namespace engram::agents::impala
