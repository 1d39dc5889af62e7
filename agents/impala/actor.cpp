// An IMPALA actor: M envs stepped together, the policy sampled per env
// from its own random stream, each env a stream of steps with an unroll
// every T steps (tables.hpp), written through an ActorPort (port.hpp):
// engram's in an actor process, or the in-memory baseline's. Parameters
// come before each unroll: the newest, or, with --reproducible, exactly
// those of update k - 1 for rollout k. A process actor runs until it is
// stopped (SIGTERM: it writes its counts to OUT/actor-K.json and exits 0)
// or the server goes away.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "agents/common/env/env.hpp"
#include "agents/common/env/rng.hpp"
#include "agents/common/host/call_clock.hpp"
#include "agents/common/host/children.hpp"
#include "agents/common/host/reconnect.hpp"
#include "agents/common/nets/nets.hpp"
#include "agents/common/tables/episodes.hpp"
#include "agents/common/tables/params.hpp"
#include "agents/impala/engram_port.hpp"
#include "agents/impala/roles.hpp"
#include "agents/impala/rollout_log.hpp"
#include "agents/impala/tables.hpp"

namespace engram::agents::impala {

namespace {

volatile sig_atomic_t g_stop = 0;
void on_term(int) { g_stop = 1; }

// One env's stream: what its next step carries besides the observation.
struct Stream {
  std::unique_ptr<Env> env;
  Rng rng;  // the env's action-sampling stream
  int32_t global = 0;
  int32_t action = 0;
  float reward = 0, discount = 0, ret = 0;
  int32_t length = 0;
  std::vector<float> logits;
};

// Brings env stream `s` to the start of rollout `rollouts` by replaying
// the logged actions (rollout_log.hpp): the env steps and its action
// stream draws as acting did, without inference. Throws if the replay
// does not end at the logged observation (another env's code or seed).
void replay(Stream& s, const RolloutLog& log, int32_t rollouts, float* x, float* next) {
  const size_t g = static_cast<size_t>(s.global), obs = static_cast<size_t>(log.obs_size);
  for (int32_t k = 0; k < rollouts; ++k)
    for (int64_t t = 0; t < log.unroll; ++t) {
      (void)s.rng.uniform();  // the draw the action was sampled with
      StepResult r = s.env->step(log.action(k, s.global, t), next);
      s.ret += r.reward;
      ++s.length;
      if (r.terminated || r.truncated) {
        s.ret = 0;
        s.length = 0;
        s.env->reset(x);
      } else {
        std::copy(next, next + obs, x);
      }
    }
  if (rollouts == 0) return;
  if (!std::equal(x, x + obs, log.carry_obs.begin() + static_cast<std::ptrdiff_t>(g * obs)))
    throw std::runtime_error("env " + std::to_string(g) + " replayed to rollout " + std::to_string(rollouts) +
                             " does not reach the state's observation: another --seed, env or build?");
  s.action = log.carry_action[g];
  s.reward = log.carry_reward[g];
  s.discount = log.carry_discount[g];
  std::copy_n(log.carry_logits.begin() + static_cast<std::ptrdiff_t>(g * static_cast<size_t>(log.actions)), log.actions,
              s.logits.begin());
}

}  // namespace

void act(const Options& o, ActorPort& port, ActorCounts* counts) {
  torch::NoGradGuard no_grad;
  CallClock& in_port = counts->in_port;
  const size_t m = static_cast<size_t>(o.envs_per_actor());
  std::vector<Stream> envs(m);
  for (size_t j = 0; j < m; ++j) {
    envs[j].env = make_env(o.env);
    envs[j].global = static_cast<int32_t>(static_cast<size_t>(o.actor_id) * m + j);
  }
  const std::vector<int64_t> shape = envs[0].env->observation_shape();
  const size_t obs_size = envs[0].env->observation_size();
  const int actions = envs[0].env->num_actions();
  PolicyValue net(o.env, shape, actions);
  std::vector<float> params(parameter_count(*net));
  // A reproducible run resumed (the learner passes its state file): the
  // envs go on after the state's rollouts, acting with its parameters.
  const bool resuming = o.reproducible && !o.resume.empty();
  RolloutLog log(o.envs, o.unroll, static_cast<int64_t>(obs_size), actions);
  int32_t rollout = 0;
  int64_t version = 0;
  // Runs f again after each outage of the server (reconnecting, and
  // saying what was `lost`) until it returns: false if stopped first. A
  // reproducible run cannot lose a rollout: it resumes from the learner's
  // state instead (--resume), so an outage ends it.
  auto through_outages = [&](const std::string& lost, const auto& f) {
    for (;;) try {
        f();
        return true;
      } catch (const api::Error& e) {
        if (!server_gone(e) || o.reproducible) throw;
        if (!port.reconnect(lost)) return false;
      }
  };
  if (resuming) {
    std::string path;
    StateIn in = LearnerStates("engram-impala actor", o).load(o.resume, [](const StateIn&) {}, &path);
    rollout = static_cast<int32_t>(in.value<uint64_t>("updates"));
    log.load(in, rollout);
    params = in.get<float>("act_params", params.size());
    version = std::max(1, rollout);
  } else {
    // A server gone while this actor still starts (the actors of a busy
    // machine start seconds apart) is an outage like the loop's.
    auto first = [&] { version = in_port([&] { return port.parameters(0, 1, &params); }); };
    if (!through_outages("nothing: it had not acted yet", first) || port.stopped()) return;
  }
  load_parameters(*net, params.data(), params.size());
  const uint64_t seed = o.reproducible ? o.seed : actor_seed(o.seed, version);

  std::vector<int64_t> batch_shape = {static_cast<int64_t>(m)};
  batch_shape.insert(batch_shape.end(), shape.begin(), shape.end());
  torch::Tensor obs = torch::zeros(batch_shape);
  float* obs_p = obs.data_ptr<float>();
  for (size_t j = 0; j < m; ++j) {
    Stream& s = envs[j];
    s.env->reset(Rng::derive(seed, static_cast<uint64_t>(s.global)), obs_p + j * obs_size);
    s.rng.reseed(Rng::derive(seed, (1ULL << 32) + static_cast<uint64_t>(s.global)));
    s.logits.assign(static_cast<size_t>(actions), 0.0f);
  }
  std::vector<float> final_obs(obs_size), next(obs_size);
  if (resuming) {
    for (size_t j = 0; j < m; ++j) replay(envs[j], log, rollout, obs_p + j * obs_size, next.data());
  }
  auto append = [&](size_t j, bool item) {
    const Stream& s = envs[j];
    port.step(j, obs_p + j * obs_size, s.action, s.reward, s.discount, s.logits.data(), s.global, rollout, item);
  };
  // Each stream's step 0 alone in its first chunk, at the start and again
  // after an outage (each stream then starts anew from its current step).
  auto start_streams = [&] {
    in_port([&] {
      for (size_t j = 0; j < m; ++j) append(j, false);
      port.started();
    });
  };
  if (!through_outages("nothing: it had not acted yet", start_streams)) return;

  const int64_t micro = o.micro();
  while (!port.stopped()) try {
    for (int t = 0; t < o.unroll && !port.stopped(); ++t) {
      // Inference in fixed micro-batches under --reproducible: LibTorch's
      // last bits depend on the batch's shape, which must not change with K.
      std::vector<torch::Tensor> parts;
      for (int64_t b = 0; b < static_cast<int64_t>(m); b += micro) parts.push_back(net->forward(obs.slice(0, b, b + micro)).first);
      torch::Tensor logits = parts.size() == 1 ? parts[0] : torch::cat(parts, 0);
      torch::Tensor probs = torch::softmax(logits, 1).to(torch::kDouble);
      auto la = logits.accessor<float, 2>();
      auto pa = probs.accessor<double, 2>();
      for (size_t j = 0; j < m; ++j) {
        Stream& s = envs[j];
        double u = s.rng.uniform(), acc = 0;
        int32_t a = actions - 1;
        for (int k = 0; k < actions; ++k) {
          acc += pa[static_cast<int64_t>(j)][k];
          if (u < acc) {
            a = k;
            break;
          }
        }
        for (int k = 0; k < actions; ++k) s.logits[static_cast<size_t>(k)] = la[static_cast<int64_t>(j)][k];
        float* x = obs_p + j * obs_size;
        StepResult r = s.env->step(a, next.data());
        s.action = a;
        s.reward = r.reward;
        s.discount = r.terminated || r.truncated ? 0.0f : o.gamma;
        s.ret += r.reward;
        ++s.length;
        if (r.terminated || r.truncated) {
          if (r.truncated) final_obs = next;  // a time limit: bootstrap below from the state it cut off
          in_port([&] { port.episode(s.global, s.ret, s.length); });
          s.ret = 0;
          s.length = 0;
          s.env->reset(x);
          if (r.truncated) {
            // Folds gamma V(x_final) into the reward (the discount stays 0, as
            // x_s is the next episode's): the value the time limit cut off.
            std::vector<int64_t> one = {1};
            one.insert(one.end(), shape.begin(), shape.end());
            torch::Tensor v = net->forward(torch::from_blob(final_obs.data(), one, torch::kFloat32)).second;
            s.reward += o.gamma * v.item<float>();
          }
        } else {
          std::copy(next.begin(), next.end(), x);
        }
      }
      counts->frames += static_cast<int64_t>(m);
      bool last = t == o.unroll - 1;
      if (last && o.reproducible && rollout >= 1) {
        // Rollout k + 1 acts with update k's parameters (version k + 1),
        // read before rollout k goes out: update k + 1, which needs
        // rollout k, cannot have replaced them yet.
        int64_t v = in_port([&] { return port.parameters(version, rollout + 1, &params); });
        if (port.stopped()) break;
        if (v != version) load_parameters(*net, params.data(), params.size());
        version = v;
      }
      in_port([&] {
        for (size_t j = 0; j < m; ++j) append(j, last);
        if (last) port.unrolled();
      });
    }
    ++rollout;
    if (!o.reproducible) {
      int64_t v = in_port([&] { return port.parameters(version, 0, &params); });
      if (v != version) load_parameters(*net, params.data(), params.size());
      version = v;
    }
  } catch (const api::Error& e) {
    // engramd went away (--socket): the envs go on where they are, each
    // stream starts anew from its current step, and the rollout being
    // acted is lost.
    if (!server_gone(e) || o.reproducible) throw;
    const std::string lost =
        "the unroll being written by each of " + std::to_string(m) + " envs, and the unrolls the server had not queued";
    if (!port.reconnect(lost) || !through_outages(lost, start_streams)) break;  // stopped
  }
}

int run_actor(const Options& o) {
  setup_process();
  ::signal(SIGTERM, on_term);
  std::unique_ptr<Env> probe = make_env(o.env);
  EngramActorPort port(o, static_cast<size_t>(o.envs_per_actor()), *probe, &g_stop);
  ActorCounts counts;
  double wall0 = wall_s(), cpu0 = thread_cpu_s();
  if (!port.stopped()) act(o, port, &counts);  // stopped while its server was away
  write_actor_counts(o.out, o.actor_id, counts.frames, wall_s() - wall0, thread_cpu_s() - cpu0, counts.in_port);
  return 0;
}

int run_actors(const Options& o) {
  std::unique_ptr<Env> probe = make_env(o.env);
  PolicyValue net(o.env, probe->observation_shape(), probe->num_actions());
  return run_actor_machine("engram-impala", o,
                           machine_tables(o, probe->observation_shape(), probe->num_actions(), parameter_count(*net)));
}

}  // namespace engram::agents::impala
