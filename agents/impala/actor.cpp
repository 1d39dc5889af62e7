// An IMPALA actor: M envs stepped together, the policy sampled per env
// from its own random stream, each env a stream of steps in engram with
// an item per unroll (tables.hpp). Parameters come from the parameter
// table: the newest before each unroll, or, with --reproducible, exactly
// those of update k - 1 for rollout k. It runs until it is stopped
// (SIGTERM: it writes its counts to OUT/actor-K.json and exits 0) or the
// server goes away.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "agents/common/call_clock.hpp"
#include "agents/common/children.hpp"
#include "agents/common/env.hpp"
#include "agents/common/episodes.hpp"
#include "agents/common/nets.hpp"
#include "agents/common/params.hpp"
#include "agents/common/rng.hpp"
#include "agents/impala/roles.hpp"
#include "agents/impala/tables.hpp"

namespace engram::agents::impala {

namespace {

volatile sig_atomic_t g_stop = 0;
void on_term(int) { g_stop = 1; }

// Waits until the parameter table holds version `want` or newer (0: any);
// the version read, or `have` when stopped first.
int64_t wait_parameters(ParamReader& reader, int64_t have, int64_t want, std::vector<float>* params) {
  for (;;) {
    int64_t v = reader.read(have, params);
    if ((v > 0 && v >= want) || g_stop) return v;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

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

}  // namespace

int run_actor(const Options& o) {
  single_threaded();
  ::signal(SIGTERM, on_term);
  torch::NoGradGuard no_grad;
  api::Client client = api::Client::connect(o.socket);
  api::Table unrolls = client.open_table(kUnrollTable);
  api::Table episodes = client.open_table(kEpisodesTable);

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
  ParamReader reader(client);
  std::vector<float> params(parameter_count(*net));
  int64_t version = wait_parameters(reader, 0, 1, &params);
  if (g_stop) return 0;
  load_parameters(*net, params.data(), params.size());

  // One writer per env. Chunks of T steps end on an unroll's last step, so
  // that an item (T + 1 steps over two chunks) goes out the moment it is
  // created: the first chunk holds step 0 alone.
  std::vector<api::Writer> writers;
  api::WriterOptions wo;
  wo.columns = unroll_columns(o, shape, actions);
  wo.chunk_length = static_cast<uint32_t>(o.unroll);
  wo.max_item_steps = static_cast<uint32_t>(o.unroll + 1);
  for (size_t j = 0; j < m; ++j) writers.push_back(client.writer(wo));
  api::WriterOptions eo;
  eo.columns = episode_columns();
  api::Writer episode_writer = client.writer(eo);

  std::vector<int64_t> batch_shape = {static_cast<int64_t>(m)};
  batch_shape.insert(batch_shape.end(), shape.begin(), shape.end());
  torch::Tensor obs = torch::zeros(batch_shape);
  float* obs_p = obs.data_ptr<float>();
  for (size_t j = 0; j < m; ++j) {
    Stream& s = envs[j];
    s.env->reset(Rng::derive(o.seed, static_cast<uint64_t>(s.global)), obs_p + j * obs_size);
    s.rng.reseed(Rng::derive(o.seed, (1ULL << 32) + static_cast<uint64_t>(s.global)));
    s.logits.assign(static_cast<size_t>(actions), 0.0f);
  }
  std::vector<uint8_t> bytes(obs_size);
  std::vector<float> final_obs(obs_size), next(obs_size);
  int32_t rollout = 0;
  // Step s of env j into its stream (tables.hpp); an item at each unroll's end.
  auto append = [&](size_t j, bool item) {
    Stream& s = envs[j];
    const float* x = obs_p + j * obs_size;
    const void* ob = x;
    if (byte_observations(o)) {
      for (size_t k = 0; k < obs_size; ++k) bytes[k] = static_cast<uint8_t>(x[k]);
      ob = bytes.data();
    }
    writers[j].append({ob, &s.action, &s.reward, &s.discount, s.logits.data(), &s.global, &rollout});
    if (item) writers[j].create_item(unrolls, static_cast<uint32_t>(o.unroll + 1), 1.0);
  };
  CallClock in_engram;  // appends, items and parameter reads
  in_engram([&] {
    for (size_t j = 0; j < m; ++j) {
      append(j, false);
      writers[j].flush(-1);  // step 0 alone in the first chunk
    }
  });

  int64_t frames = 0;
  double wall0 = wall_s(), cpu0 = thread_cpu_s();
  const int64_t micro = o.micro();
  while (!g_stop) {
    for (int t = 0; t < o.unroll && !g_stop; ++t) {
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
          float eps = 0;
          in_engram([&] {
            episode_writer.append({&s.global, &eps, &s.ret, &s.length});
            episode_writer.create_item(episodes, 1, 1.0);
          });
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
      frames += static_cast<int64_t>(m);
      bool last = t == o.unroll - 1;
      if (last && o.reproducible && rollout >= 1) {
        // Rollout k + 1 acts with update k's parameters (table version
        // k + 1), read before rollout k goes out: update k + 1, which needs
        // rollout k, cannot have replaced them yet.
        int64_t v = in_engram([&] { return wait_parameters(reader, version, rollout + 1, &params); });
        if (g_stop) break;
        if (v != version) load_parameters(*net, params.data(), params.size());
        version = v;
      }
      in_engram([&] {
        for (size_t j = 0; j < m; ++j) append(j, last);
        // The queue's rate limiter holds items, not the writer: without a
        // wait here an actor runs on with its items queued in its request
        // ring, and learns the learner from data many updates old. Each
        // flush sends nothing new (the chunk ended with the item) and
        // returns once the item is in the queue.
        if (last)
          for (size_t j = 0; j < m; ++j) writers[j].flush(-1);
      });
    }
    ++rollout;
    if (!o.reproducible) {
      int64_t v = in_engram([&] { return reader.read(version, &params); });
      if (v != version) load_parameters(*net, params.data(), params.size());
      version = v;
    }
  }
  write_actor_counts(o.out, o.actor_id, frames, wall_s() - wall0, thread_cpu_s() - cpu0, in_engram);
  return 0;
}

}  // namespace engram::agents::impala
