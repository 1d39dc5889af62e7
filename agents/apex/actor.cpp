// An Ape-X actor: M envs stepped together, one batched forward pass per
// step, each env exploring with its own epsilon; n-step transitions with
// initial priorities from the actor's own network, written into engram;
// parameters pulled from the parameter table every pull_every frames.
// It runs until it is stopped (SIGTERM: it then writes its counts to
// OUT/actor-K.json and exits 0) or the server goes away.
#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include "agents/apex/bookkeeping.hpp"
#include "agents/apex/roles.hpp"
#include "agents/apex/tables.hpp"
#include "agents/common/call_clock.hpp"
#include "agents/common/children.hpp"
#include "agents/common/episodes.hpp"
#include "agents/common/env.hpp"
#include "agents/common/nets.hpp"
#include "agents/common/params.hpp"
#include "agents/common/rng.hpp"

namespace engram::agents::apex {

namespace {

volatile sig_atomic_t g_stop = 0;
void on_term(int) { g_stop = 1; }

}  // namespace

int run_actor(const Options& o) {
  setup_process();
  ::signal(SIGTERM, on_term);
  torch::NoGradGuard no_grad;
  api::Client client = api::Client::connect(o.socket);
  api::Table replay = client.open_table(kReplayTable);
  api::Table episodes = client.open_table(kEpisodesTable);

  const size_t m = static_cast<size_t>(o.envs_per_actor);
  const size_t total = static_cast<size_t>(o.actors) * m;
  std::vector<std::unique_ptr<Env>> envs;
  std::vector<double> eps(m);
  std::vector<NStep> nstep;
  for (size_t j = 0; j < m; ++j) {
    envs.push_back(make_env(o.env));
    size_t global = static_cast<size_t>(o.actor_id) * m + j;
    eps[j] = epsilon(global, total);
    nstep.emplace_back(static_cast<size_t>(o.n_step), o.gamma);
  }
  const std::vector<int64_t> shape = envs[0]->observation_shape();
  const size_t obs_size = envs[0]->observation_size();
  const int actions = envs[0]->num_actions();
  Rng rng(Rng::derive(o.seed, 1000003 + static_cast<uint64_t>(o.actor_id)));

  DuelingQ net(o.env, shape, actions);
  ParamReader reader(client);
  std::vector<float> params(parameter_count(*net));
  // An actor acts only with the learner's first parameters.
  int64_t version = reader.wait(0, 1, &params, [] { return g_stop != 0; }, std::chrono::milliseconds(10));
  if (g_stop) return 0;
  load_parameters(*net, params.data(), params.size());

  api::WriterOptions wo;
  wo.columns = replay_columns(o, shape);
  // Transitions go kChunkTransitions to a chunk, each its own item of one
  // step: one block and one chunk header per 16 transitions instead of per
  // transition, and the items of a chunk travel together once it is full
  // (Ape-X's local batching of transitions).
  wo.chunk_length = kChunkTransitions;
  wo.max_item_steps = 1;
  api::Writer writer = client.writer(wo);  // waits for the rate limiter as long as it takes
  api::WriterOptions eo;
  eo.columns = episode_columns();
  api::Writer episode_writer = client.writer(eo);

  std::vector<int64_t> batch_shape = {static_cast<int64_t>(m)};
  batch_shape.insert(batch_shape.end(), shape.begin(), shape.end());
  torch::Tensor obs = torch::zeros(batch_shape);
  float* obs_p = obs.data_ptr<float>();
  for (size_t j = 0; j < m; ++j)
    envs[j]->reset(Rng::derive(o.seed, static_cast<uint64_t>(o.actor_id) * m + j), obs_p + j * obs_size);
  std::vector<float> next(obs_size), ret(m, 0.0f);
  std::vector<int32_t> len(m, 0);
  std::vector<Transition> done;
  std::vector<double> priority;
  std::vector<uint8_t> bytes_obs(obs_size), bytes_next(obs_size);
  int64_t frames = 0, last_pull = 0;
  CallClock in_engram;  // inserts and parameter reads
  double wall0 = wall_s(), cpu0 = thread_cpu_s();

  while (!g_stop) {
    torch::Tensor q = net->forward(obs);
    auto qa = q.accessor<float, 2>();
    done.clear();
    for (size_t j = 0; j < m; ++j) {
      int32_t a = 0;
      if (rng.uniform() < eps[j]) {
        a = static_cast<int32_t>(rng.below(static_cast<uint32_t>(actions)));
      } else {
        for (int k = 1; k < actions; ++k)
          if (qa[j][k] > qa[j][a]) a = k;
      }
      float* o_j = obs_p + j * obs_size;
      StepResult r = envs[j]->step(a, next.data());
      ret[j] += r.reward;
      ++len[j];
      nstep[j].add(o_j, obs_size, a, qa[j][a], r.reward, next.data(), r.terminated, r.truncated, &done);
      if (r.terminated || r.truncated) {
        int32_t global = static_cast<int32_t>(static_cast<size_t>(o.actor_id) * m + j);
        float e = static_cast<float>(eps[j]);
        in_engram([&] {
          episode_writer.append({&global, &e, &ret[j], &len[j]});
          episode_writer.create_item(episodes, 1, 1.0);
        });
        ret[j] = 0;
        len[j] = 0;
        envs[j]->reset(o_j);
      } else {
        std::copy(next.begin(), next.end(), o_j);
      }
    }
    frames += static_cast<int64_t>(m);
    if (!done.empty()) {
      // Initial priorities: |n-step target - Q(s, a)| by this actor's network.
      std::vector<int64_t> next_shape = {static_cast<int64_t>(done.size())};
      next_shape.insert(next_shape.end(), shape.begin(), shape.end());
      torch::Tensor nx = torch::empty(next_shape);
      float* nx_p = nx.data_ptr<float>();
      for (size_t i = 0; i < done.size(); ++i) std::copy(done[i].next_obs.begin(), done[i].next_obs.end(), nx_p + i * obs_size);
      torch::Tensor best = std::get<0>(net->forward(nx).max(1));
      auto best_a = best.accessor<float, 1>();
      priority.resize(done.size());
      for (size_t i = 0; i < done.size(); ++i) {
        const Transition& t = done[i];
        double td = t.reward + t.discount * best_a[static_cast<int64_t>(i)] - t.q;
        priority[i] = std::isfinite(td) ? std::abs(td) + 1e-6 : 1.0;
      }
      // One clock reading per step's batch of transitions, not per call:
      // reading a thread's CPU clock is a system call.
      in_engram([&] {
        for (size_t i = 0; i < done.size(); ++i) {
          const Transition& t = done[i];
          const void* ob = t.obs.data();
          const void* next_ob = t.next_obs.data();
          if (byte_observations(o)) {
            for (size_t k = 0; k < obs_size; ++k) {
              bytes_obs[k] = static_cast<uint8_t>(t.obs[k]);
              bytes_next[k] = static_cast<uint8_t>(t.next_obs[k]);
            }
            ob = bytes_obs.data();
            next_ob = bytes_next.data();
          }
          writer.append({ob, &t.action, &t.reward, &t.discount, next_ob});
          writer.create_item(replay, 1, priority[i]);
        }
      });
    }
    if (frames - last_pull >= o.pull_every) {
      last_pull = frames;
      int64_t v = in_engram([&] { return reader.read(version, &params); });
      if (v != version) {
        load_parameters(*net, params.data(), params.size());
        version = v;
      }
    }
  }
  write_actor_counts(o.out, o.actor_id, frames, wall_s() - wall0, thread_cpu_s() - cpu0, in_engram);
  return 0;
}

}  // namespace engram::agents::apex
