// Plays a trained policy greedily and prints each episode's return and the
// mean: the agents' --eval. `act` maps an observation batch of one to the
// action to take.
#pragma once

#include <torch/torch.h>

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "agents/common/env/env.hpp"
#include "agents/common/env/rng.hpp"
#include "agents/common/host/run_options.hpp"
#include "agents/common/nets/nets.hpp"

namespace engram::agents {

// Loads a model that training wrote (DIR/model.pt) into `net`, or throws an
// error that names the file and the cause without LibTorch's backtrace
// (c10::Error's what() carries twenty frames of it).
template <typename Net>
void load_model(Net& net, const std::string& path, const std::string& env_name) {
  try {
    torch::load(net, path);
  } catch (const c10::Error& e) {
    throw std::runtime_error("cannot load the model " + path + " for --env " + env_name + ": " +
                             e.what_without_backtrace() +
                             " (--eval takes the model.pt that training with the same --env wrote)");
  }
}

// The mean return of `episodes` greedy episodes (env e seeded from (seed,
// 77 + e)), each cut at max_steps; each episode's return printed if `say`.
template <typename Act>
double greedy_mean(const std::string& env_name, uint64_t seed, int episodes, Act act, bool say,
                   int max_steps = 100000) {
  torch::NoGradGuard no_grad;
  std::unique_ptr<Env> env = make_env(env_name);
  std::vector<int64_t> shape = {1};
  for (int64_t d : env->observation_shape()) shape.push_back(d);
  torch::Tensor obs = torch::zeros(shape);
  double total = 0;
  for (int e = 0; e < episodes; ++e) {
    env->reset(Rng::derive(seed, 77 + static_cast<uint64_t>(e)), obs.data_ptr<float>());
    double ret = 0;
    for (int t = 0; t < max_steps; ++t) {
      StepResult r = env->step(act(obs), obs.data_ptr<float>());
      ret += r.reward;
      if (r.terminated || r.truncated) break;
    }
    if (say) std::printf("episode %d: return %.0f\n", e + 1, ret);
    total += ret;
  }
  return total / episodes;
}

template <typename Act>
int play_greedy(const std::string& env_name, uint64_t seed, int episodes, Act act) {
  double mean = greedy_mean(env_name, seed, episodes, act, true);
  std::printf("mean return over %d greedy episodes: %.1f\n", episodes, mean);
  return 0;
}

// An agent's --eval: a `Net` (nets.hpp) for o.env's shapes, loaded from
// o.eval and played greedily for o.eval_episodes; `greedy(net, obs)` is
// the action the network picks for an observation batch of one.
template <typename Net, typename Greedy>
int eval_model(const RunOptions& o, Greedy greedy) {
  setup_process();
  const EnvShape env = env_shape(o.env);
  Net net(o.env, env.observation, env.actions);
  load_model(net, o.eval, o.env);
  return play_greedy(o.env, o.seed, o.eval_episodes, [&](const torch::Tensor& obs) { return greedy(net, obs); });
}

}  // namespace engram::agents
