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
#include <optional>
#include <string>
#include <vector>

#include "agents/common/env/env.hpp"
#include "agents/common/host/call_clock.hpp"
#include "agents/common/host/learner_host.hpp"
#include "agents/common/host/learner_state.hpp"
#include "agents/common/host/reconnect.hpp"
#include "agents/common/nets/evaluate.hpp"
#include "agents/common/nets/flat_adam.hpp"
#include "agents/common/nets/nets.hpp"
#include "agents/impala/engram_port.hpp"
#include "agents/impala/handoff_port.hpp"
#include "agents/impala/roles.hpp"
#include "agents/impala/rollout_log.hpp"
#include "agents/impala/vtrace.hpp"
#include "core/fnv.hpp"

namespace engram::agents::impala {

namespace {

// The parameters' fingerprint, logged after every update under
// --reproducible only: hashing them bytewise after every update costs the
// learner a few percent (bench/NOTES.md, "IMPALA").
uint64_t param_hash(const std::vector<float>& v) { return fnv1a(kFnvOffset, v.data(), v.size() * sizeof(float)); }

// param_hashes.txt of a resumed run: its lines up to update `updates`
// (a killed run wrote more, which the resumed one writes again).
void keep_hashes(const std::string& path, uint64_t updates) {
  std::ifstream in(path);
  std::vector<std::string> kept;
  for (std::string line; std::getline(in, line) && kept.size() <= updates;) kept.push_back(line);
  in.close();
  std::ofstream out(path, std::ios::trunc);
  for (const std::string& l : kept) out << l << '\n';
}

}  // namespace

int run_learner(const Options& o) {
  install_stop_signal();
  const EnvShape env = start_learner(o.env, o.seed);
  const std::vector<int64_t>& shape = env.observation;
  const int64_t obs_size = static_cast<int64_t>(env.observation_size);
  const int actions = env.actions;
  PolicyValue net(o.env, shape, actions);
  const size_t params = parameter_count(*net);
  FlatAdam adam(*net, o.lr);
  std::vector<float> flat = flatten_parameters(*net);
  // --reproducible: what the actors need to go on after a resume
  // (rollout_log.hpp), and the parameters rollout `updates` acts with.
  RolloutLog log(o.envs, o.unroll, obs_size, actions);
  std::vector<float> acting = flat;

  // --resume: the network, the optimiser and the counters of a saved
  // state. The queue is not saved: it holds a fraction of one rollout,
  // which --reproducible's actors act again, bit for bit, and which a
  // free-running run does without.
  LearnerStates states("engram-impala", o);
  std::optional<RunState> resumed;
  std::string resumed_path;
  if (!o.resume.empty()) {
    StateIn in = states.load(o.resume, [&](const StateIn& s) {
      RunState r = RunState::load(s, "engram-impala", o, params);
      if (s.value<uint8_t>("reproducible") != o.reproducible)
        throw std::runtime_error(std::string("a state of a run ") + (o.reproducible ? "without" : "with") +
                                 " --reproducible 1");
      if (o.reproducible) {
        if (s.value<int64_t>("envs") != o.envs || s.value<int64_t>("unroll") != o.unroll)
          throw std::runtime_error("a state of --envs " + std::to_string(s.value<int64_t>("envs")) + " --unroll " +
                                   std::to_string(s.value<int64_t>("unroll")) + "; this run has --envs " +
                                   std::to_string(o.envs) + " --unroll " + std::to_string(o.unroll));
        RolloutLog(o.envs, o.unroll, obs_size, actions).load(s, static_cast<int64_t>(r.updates));
        s.get<float>("act_params", params);
      }
    }, &resumed_path);
    resumed = RunState::load(in, "engram-impala", o, params);
    flat = in.get<float>("params", params);
    load_parameters(*net, flat.data(), flat.size());
    adam.restore(in.get<float>("adam"), in.value<int64_t>("adam_steps"));
    set_torch_rng_state(in.get<uint8_t>("torch_rng"));
    if (o.reproducible) {
      log.load(in, static_cast<int64_t>(resumed->updates));
      acting = in.get<float>("act_params", params);
    }
    std::printf("engram-impala: resuming from %s: %llu updates, %lld env steps\n", resumed_path.c_str(),
                static_cast<unsigned long long>(resumed->updates), static_cast<long long>(resumed->steps));
  }

  make_out_dir(o.out);
  std::unique_ptr<LearnerPort> port;
  if (o.handoff) port = std::make_unique<HandoffLearnerPort>(o, obs_size, actions);
  else port = std::make_unique<EngramLearnerPort>(o, shape, actions, params);
  uint64_t updates = resumed ? resumed->updates : 0;
  port->publish(static_cast<int64_t>(updates) + 1, flat);  // version = updates + 1
  std::ofstream hashes;
  if (o.reproducible) {
    const std::string path = o.out + "/param_hashes.txt";
    if (resumed) {
      keep_hashes(path, updates);
      hashes.open(path, std::ios::app);
    } else {
      hashes.open(path);
      hashes << "0 " << std::hex << param_hash(flat) << std::dec << '\n';
    }
    // The actors rebuild their envs from the same state file.
    if (resumed) port->resume(static_cast<int32_t>(updates), {"--resume", resumed_path});
  }

  port->start();
  std::optional<CurveResume> from;
  if (resumed) from = CurveResume{resumed->wall_s, resumed->steps, resumed->updates};
  double t0 = wall_s() - (resumed ? resumed->wall_s : 0);
  Progress progress(o.out, t0, nullptr, from ? &*from : nullptr);
  std::printf("engram-impala: %s, %d actors x %d envs, learner batch %d unrolls of %d%s%s; curve in %s/curve.csv\n",
              o.env.c_str(), o.actors, o.envs_per_actor(), o.batch, o.unroll,
              o.reproducible ? " (reproducible)" : "", o.handoff ? " (actors as threads, no engram)" : "",
              o.out.c_str());

  Curve curve = resumed ? resumed->curve : Curve();
  double cpu0 = thread_cpu_s();
  bool solved = false;
  int64_t steps = resumed ? resumed->steps : 0;
  // The queue's inserts count on from steps_before: the state resumed,
  // or the steps before an engramd that went away came back.
  int64_t steps_before = steps;
  const int64_t T = o.unroll, B = o.batch;
  std::vector<int64_t> obs_shape = {B, T + 1};
  obs_shape.insert(obs_shape.end(), shape.begin(), shape.end());
  std::vector<int64_t> flat_obs = {B * (T + 1)};
  flat_obs.insert(flat_obs.end(), shape.begin(), shape.end());
  auto done = [&] {
    return solved || steps >= o.steps || (o.updates > 0 && static_cast<int64_t>(updates) >= o.updates) || stop_asked();
  };
  // The learner's state between two updates. Under --reproducible its
  // env steps are those learned from (the queue's extra unrolls are acted
  // again after a resume), so that the curve resumes where the actors do.
  double saved_at = wall_s();
  auto save_state = [&] {
    hashes.flush();  // a resume keeps the lines up to the state's update
    StateOut s;
    int64_t at = o.reproducible ? static_cast<int64_t>(updates) * B * T : steps;
    RunState{updates, at, wall_s() - t0, static_cast<int64_t>(updates) + 1, curve}.save(&s, "engram-impala", o, params);
    s.put("params", flat);
    s.put("adam", adam.moments());
    s.put_value("adam_steps", adam.steps());
    s.put("torch_rng", torch_rng_state());
    s.put_value("reproducible", static_cast<uint8_t>(o.reproducible));
    if (o.reproducible) {
      s.put_value("envs", static_cast<int64_t>(o.envs));
      s.put_value("unroll", static_cast<int64_t>(o.unroll));
      s.put("act_params", acting);
      log.save(&s);
    }
    states.save(s, updates);
    saved_at = wall_s();
  };
  auto report = [&] {
    double now = wall_s();
    if (!progress.due(now)) return;
    int64_t unrolls = 0;
    uint64_t queued = 0;
    port->poll(&curve, &unrolls, &queued);
    steps = steps_before + unrolls * T;
    solved = curve.all.size() >= 100 && Curve::mean(curve.all) >= o.solved;
    progress.report(now, steps, updates, curve, queued, "queued", done());
    if (o.checkpoint_every > 0 && now - saved_at >= o.checkpoint_every) save_state();
  };

  while (!done()) try {
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
    if (o.reproducible) {
      // Rollout `updates` acts with the parameters of update updates - 1
      // (version max(1, updates)): those of before this update.
      acting = flat;
      log.add(*u);
    }
    flat = flatten_parameters(*net);
    port->publish(static_cast<int64_t>(updates) + 1, flat);
    if (o.reproducible) hashes << updates << ' ' << std::hex << param_hash(flat) << std::dec << '\n';
    report();
  } catch (const api::Error& e) {
    // engramd went away (--socket): its queue comes back from its
    // checkpoint, or empty; the network and the curve are the learner's.
    // A reproducible run cannot skip unrolls: it resumes (--resume).
    if (!server_gone(e) || o.reproducible) throw;
    // Until the session is whole again: the server may go away again
    // while the learner reopens what it holds.
    for (bool whole = false; !whole;) {
      if (!port->reconnect()) throw;
      try {
        int64_t unrolls = 0;
        uint64_t queued = 0;
        port->poll(&curve, &unrolls, &queued);
        steps_before = steps - unrolls * T;
        port->publish(static_cast<int64_t>(updates) + 1, flat);
        whole = true;
      } catch (const api::Error& again) {
        if (!server_gone(again)) throw;
      }
    }
  }
  hashes.close();
  if (o.checkpoint_every > 0) save_state();  // the end, SIGTERM's included
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
