// The IMPALA learner: through its port (engram's, or the in-memory
// baseline's: port.hpp) starts the actors and takes batches of unrolls;
// learns with V-trace (vtrace.hpp), publishes its parameters after every update, and reports
// progress once a second. With --reproducible it learns from whole
// rollouts in env order, one update per rollout, and logs a hash of its
// parameters after each update. Also: playing a saved model.

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "agents/common/env/env.hpp"
#include "agents/common/host/call_clock.hpp"
#include "agents/common/host/learner_host.hpp"
#include "agents/common/nets/evaluate.hpp"
#include "agents/common/nets/flat_adam.hpp"
#include "agents/common/nets/nets.hpp"
#include "agents/impala/engram_port.hpp"
#include "agents/impala/handoff_port.hpp"
#include "agents/impala/roles.hpp"
#include "agents/impala/vtrace.hpp"
#include "core/fnv.hpp"

namespace engram::agents::impala {

namespace {

// The parameters' fingerprint, logged after every update under
// --reproducible only: hashing them bytewise after every update costs the
// learner a few percent (bench/NOTES.md, "IMPALA").
uint64_t param_hash(const std::vector<float>& v) { return fnv1a(kFnvOffset, v.data(), v.size() * sizeof(float)); }

}  // namespace

int run_learner(const Options& o) {
  const EnvShape env = start_learner(o.env, o.seed);
  const std::vector<int64_t>& shape = env.observation;
  const int64_t obs_size = static_cast<int64_t>(env.observation_size);
  const int actions = env.actions;
  PolicyValue net(o.env, shape, actions);
  const size_t params = parameter_count(*net);
  FlatAdam adam(*net, o.lr);

  make_out_dir(o.out);
  std::unique_ptr<LearnerPort> port;
  if (o.handoff) port = std::make_unique<HandoffLearnerPort>(o, obs_size, actions);
  else port = std::make_unique<EngramLearnerPort>(o, shape, actions, params);
  std::vector<float> flat = flatten_parameters(*net);
  port->publish(1, flat);  // version = updates + 1
  std::ofstream hashes;
  if (o.reproducible) {
    hashes.open(o.out + "/param_hashes.txt");
    hashes << "0 " << std::hex << param_hash(flat) << std::dec << '\n';
  }

  port->start();
  double t0 = wall_s();
  Progress progress(o.out, t0, nullptr);
  std::printf("engram-impala: %s, %d actors x %d envs, learner batch %d unrolls of %d%s%s; curve in %s/curve.csv\n",
              o.env.c_str(), o.actors, o.envs_per_actor(), o.batch, o.unroll,
              o.reproducible ? " (reproducible)" : "", o.handoff ? " (actors as threads, no engram)" : "",
              o.out.c_str());

  Curve curve;
  double cpu0 = thread_cpu_s();
  uint64_t updates = 0;
  bool solved = false;
  int64_t steps = 0;
  const int64_t T = o.unroll, B = o.batch;
  std::vector<int64_t> obs_shape = {B, T + 1};
  obs_shape.insert(obs_shape.end(), shape.begin(), shape.end());
  std::vector<int64_t> flat_obs = {B * (T + 1)};
  flat_obs.insert(flat_obs.end(), shape.begin(), shape.end());
  auto done = [&] { return solved || steps >= o.steps || (o.updates > 0 && static_cast<int64_t>(updates) >= o.updates); };
  auto report = [&] {
    double now = wall_s();
    if (!progress.due(now)) return;
    int64_t unrolls = 0;
    uint64_t queued = 0;
    port->poll(&curve, &unrolls, &queued);
    steps = unrolls * T;
    solved = curve.all.size() >= 100 && Curve::mean(curve.all) >= o.solved;
    progress.report(now, steps, updates, curve, queued, "queued", done());
  };

  while (!done()) {
    std::unique_ptr<Unrolls> u = port->next([&] {
      report();
      return done();
    });
    if (!u) break;
    // Time-major: [B, T + 1, ...] -> [T + 1, B, ...].
    torch::Tensor obs = byte_observations(o) ? torch::from_blob(u->obs_b.data(), obs_shape, torch::kUInt8).to(torch::kFloat32)
                                              : torch::from_blob(u->obs.data(), obs_shape, torch::kFloat32);
    obs = obs.transpose(0, 1).reshape(flat_obs);
    auto steps_1_to_T = [&](torch::Tensor x) { return x.slice(1, 1, T + 1).transpose(0, 1); };
    torch::Tensor action = steps_1_to_T(torch::from_blob(u->action.data(), {B, T + 1}, torch::kInt32)).to(torch::kLong);
    torch::Tensor reward = steps_1_to_T(torch::from_blob(u->reward.data(), {B, T + 1}, torch::kFloat32));
    torch::Tensor discount = steps_1_to_T(torch::from_blob(u->discount.data(), {B, T + 1}, torch::kFloat32));
    torch::Tensor behaviour = steps_1_to_T(torch::from_blob(u->logits.data(), {B, T + 1, actions}, torch::kFloat32));

    auto [logits_all, values_all] = net->forward(obs);
    torch::Tensor logits = logits_all.view({T + 1, B, actions}).slice(0, 0, T);
    torch::Tensor values_tb = values_all.view({T + 1, B});
    torch::Tensor values = values_tb.slice(0, 0, T);
    torch::Tensor log_rhos;
    {
      torch::NoGradGuard no_grad;
      auto chosen = [&](const torch::Tensor& l) { return torch::log_softmax(l, -1).gather(-1, action.unsqueeze(-1)).squeeze(-1); };
      log_rhos = chosen(logits.detach()) - chosen(behaviour);
    }
    VTrace targets = vtrace(log_rhos, discount, reward, values, values_tb[T]);
    Loss loss = impala_loss(logits, action, values, targets, o.baseline_cost, o.entropy_cost);
    adam.zero_grad();
    (loss.total / static_cast<double>(T * B)).backward();
    adam.step(o.clip_grad_norm);  // the gradient clipped to that norm first
    ++updates;
    flat = flatten_parameters(*net);
    port->publish(static_cast<int64_t>(updates) + 1, flat);
    if (o.reproducible) hashes << updates << ' ' << std::hex << param_hash(flat) << std::dec << '\n';
    report();
  }
  hashes.close();
  RunEnd end;
  end.wall_s = wall_s() - t0;
  double main_cpu = thread_cpu_s() - cpu0;
  end.actors = port->stop();
  end.solved = solved;
  end.steps = steps;
  end.updates = updates;
  end.mean100 = Curve::mean(curve.all);
  end.episodes = curve.episodes;
  end.learner_cpu_share = port->learner_cpu_s() / std::max(1e-9, main_cpu);
  end.calls = o.handoff ? "handoff" : "engram";
  torch::save(net, o.out + "/model.pt");
  finish_run("engram-impala", o, progress, nullptr, end,
             SummaryFields()
                 .add("envs", static_cast<double>(o.envs))
                 .add("handoff", o.handoff)
                 .add("reproducible", o.reproducible)
                 .add("mean100", Curve::mean(curve.all)));
  return 0;
}

int run_eval(const Options& o) {
  return eval_model<PolicyValue>(o, [](PolicyValue& net, const torch::Tensor& obs) {
    return static_cast<int>(net->forward(obs).first.argmax(1).item<int64_t>());
  });
}

}  // namespace engram::agents::impala
