// An Ape-X actor: M envs stepped together, one batched forward pass per
// step, each env exploring with its own epsilon; n-step transitions with
// initial priorities from the actor's own network, written into engram in
// batches; parameters pulled from the parameter table every pull_every
// frames.
// It runs until it is stopped (SIGTERM: it then writes its counts to
// OUT/actor-K.json and exits 0). When the server goes away it connects
// again and goes on (reconnect.hpp).
#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "agents/apex/bookkeeping.hpp"
#include "agents/apex/roles.hpp"
#include "agents/apex/tables.hpp"
#include "agents/common/env/env.hpp"
#include "agents/common/env/rng.hpp"
#include "agents/common/host/actor_host.hpp"
#include "agents/common/host/call_clock.hpp"
#include "agents/common/host/children.hpp"
#include "agents/common/host/reconnect.hpp"
#include "agents/common/nets/nets.hpp"
#include "agents/common/tables/episodes.hpp"
#include "agents/common/tables/params.hpp"

namespace engram::agents::apex {

namespace {

volatile sig_atomic_t g_stop = 0;
void on_term(int) { g_stop = 1; }

// Transitions an actor machine holds while the learner's rate limiter
// holds the link: two of the link's requests (1024 items each at most),
// so that one can fill while the other is in flight; more would only
// make the learner's data older.
constexpr uint64_t kMachineQueue = 2048;

// Transitions go to engram in batches of at least this many (Ape-X's local
// buffer; the paper's B is 50). A burst of inserts wakes the table's
// sleeping owner thread once, and per-step bursts made those wake-ups the
// largest part of what engram cost an actor alone (bench/NOTES.md, "Ape-X:
// time in engram calls").
constexpr size_t kLocalBatch = 50;

// What the actor holds of engram, made again after the server went away.
struct Session {
  api::Client client;
  api::Table replay, episodes;
  ParamReader reader;
  api::Writer writer, episode_writer;

  Session(const Options& o, const std::vector<int64_t>& shape)
      : client(api::Client::connect(o.socket)),
        replay(client.open_table(kReplayTable)),
        episodes(client.open_table(kEpisodesTable)),
        reader(client),
        writer(client.writer(transition_writer(o, shape))),  // waits for the rate limiter as long as it takes
        episode_writer(client.writer(episode_writer_options())) {}

  static api::WriterOptions transition_writer(const Options& o, const std::vector<int64_t>& shape) {
    api::WriterOptions wo;
    wo.columns = replay_columns(o, shape);
    // Transitions go kChunkTransitions to a chunk, each its own item of
    // one step: one block and one chunk header per 16 transitions instead
    // of per transition, and the items of a chunk travel together once it
    // is full (Ape-X's local batching of transitions).
    wo.chunk_length = kChunkTransitions;
    wo.max_item_steps = 1;
    return wo;
  }
  static api::WriterOptions episode_writer_options() {
    api::WriterOptions eo;
    eo.columns = episode_columns();
    return eo;
  }
};

}  // namespace

int run_actor(const Options& o) {
  setup_process();
  ::signal(SIGTERM, on_term);
  torch::NoGradGuard no_grad;
  const size_t m = static_cast<size_t>(o.envs_per_actor);
  const size_t total = static_cast<size_t>(o.total_actors()) * m;
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

  DuelingQ net(o.env, shape, actions);
  const std::string who = "engram-apex actor " + std::to_string(o.actor_id);
  std::optional<Session> s;
  std::vector<float> params(parameter_count(*net));
  int64_t version = 0;
  // An actor acts only with the learner's first parameters. A server that
  // goes away while this actor still starts is an outage like any other
  // (the actors of a busy machine start seconds apart): said, and waited
  // out; one never there is said at once.
  auto start = [&] {
    s.emplace(o, shape);
    version = s->reader.wait(0, 1, &params, [] { return g_stop != 0; }, std::chrono::milliseconds(10));
  };
  try {
    start();
  } catch (const api::Error& e) {
    if (!(s ? server_gone(e) : killed_server_left(e, o.socket))) throw;
    s.reset();
    if (!reconnect(who.c_str(), "nothing: it had not acted yet", start, [] { return g_stop != 0; })) return 0;
  }
  if (g_stop) return 0;
  load_parameters(*net, params.data(), params.size());
  const uint64_t seed = actor_seed(o.seed, version);
  Rng rng(Rng::derive(seed, 1000003 + static_cast<uint64_t>(o.actor_id)));

  std::vector<int64_t> batch_shape = {static_cast<int64_t>(m)};
  batch_shape.insert(batch_shape.end(), shape.begin(), shape.end());
  torch::Tensor obs = torch::zeros(batch_shape);
  float* obs_p = obs.data_ptr<float>();
  for (size_t j = 0; j < m; ++j)
    envs[j]->reset(Rng::derive(seed, static_cast<uint64_t>(o.actor_id) * m + j), obs_p + j * obs_size);
  std::vector<float> next(obs_size), ret(m, 0.0f);
  std::vector<int32_t> len(m, 0);
  std::vector<Transition> done;
  std::vector<double> priority;
  std::vector<uint8_t> bytes_obs, bytes_next;  // byte_observations: the batch's, converted
  int64_t frames = 0, last_pull = 0;
  CallClock in_engram;  // inserts and parameter reads
  double wall0 = wall_s(), cpu0 = thread_cpu_s();

  // Episodes ended since the last batch: an episode's last steps are in
  // `done`, so they leave together, and the episodes table's owner is not
  // woken once per episode (CartPole's first episodes last ten steps).
  struct Ended {
    int32_t env;
    float epsilon;
    float ret;
    int32_t len;
  };
  std::vector<Ended> ended;
  // Writes what `done` and `ended` hold: the transitions with initial
  // priorities |n-step target - Q(s, a)| from one forward pass over their
  // next observations, then the episodes.
  auto send = [&] {
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
    // Byte observations are converted before the clock starts: the
    // conversion is the actor's work, not engram's.
    const bool bytes = byte_observations(o);
    if (bytes) {
      bytes_obs.resize(done.size() * obs_size);
      bytes_next.resize(done.size() * obs_size);
      for (size_t i = 0; i < done.size(); ++i)
        for (size_t k = 0; k < obs_size; ++k) {
          bytes_obs[i * obs_size + k] = static_cast<uint8_t>(done[i].obs[k]);
          bytes_next[i * obs_size + k] = static_cast<uint8_t>(done[i].next_obs[k]);
        }
    }
    // One clock reading per batch of transitions, not per call: reading a
    // thread's CPU clock is a system call.
    in_engram([&] {
      for (size_t i = 0; i < done.size(); ++i) {
        const Transition& t = done[i];
        const void* ob = bytes ? static_cast<const void*>(&bytes_obs[i * obs_size]) : t.obs.data();
        const void* next_ob = bytes ? static_cast<const void*>(&bytes_next[i * obs_size]) : t.next_obs.data();
        s->writer.append({ob, &t.action, &t.reward, &t.discount, next_ob});
        s->writer.create_item(s->replay, 1, priority[i]);
      }
      for (Ended& e : ended) {
        s->episode_writer.append({&e.env, &e.epsilon, &e.ret, &e.len});
        s->episode_writer.create_item(s->episodes, 1, 1.0);
      }
    });
    done.clear();
    ended.clear();
  };

  while (!g_stop) {
    torch::Tensor q = net->forward(obs);
    auto qa = q.accessor<float, 2>();
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
        ended.push_back({static_cast<int32_t>(static_cast<size_t>(o.actor_id) * m + j), static_cast<float>(eps[j]),
                         ret[j], len[j]});
        ret[j] = 0;
        len[j] = 0;
        envs[j]->reset(o_j);
      } else {
        std::copy(next.begin(), next.end(), o_j);
      }
    }
    frames += static_cast<int64_t>(m);
    // Transitions leave in batches of at least kLocalBatch (Ape-X's local
    // buffer), and before new parameters change the network that scores them.
    bool pull = frames - last_pull >= o.pull_every;
    try {
      if (done.size() >= kLocalBatch || (pull && !done.empty())) send();
      if (pull) {
        last_pull = frames;
        int64_t v = in_engram([&] { return s->reader.read(version, &params); });
        if (v != version) {
          load_parameters(*net, params.data(), params.size());
          version = v;
        }
      }
    } catch (const api::Error& e) {
      if (!server_gone(e)) throw;
      // The envs go on where they were; what was on its way to the server
      // is gone with it. The parameters are kept until the learner
      // publishes newer ones.
      std::string lost = std::to_string(done.size()) + " transitions and " + std::to_string(ended.size()) +
                         " episodes being written, and those the server had not applied";
      done.clear();
      ended.clear();
      s.reset();
      if (!reconnect(who.c_str(), lost, [&] { s.emplace(o, shape); }, [] { return g_stop != 0; })) break;
    }
  }
  write_actor_counts(o.out, o.actor_id, frames, wall_s() - wall0, thread_cpu_s() - cpu0, in_engram);
  return 0;
}

int run_actors(const Options& o) {
  std::unique_ptr<Env> env = make_env(o.env);
  DuelingQ net(o.env, env->observation_shape(), env->num_actions());
  MachineTables t;
  t.own.name = kReplayTable;
  t.own.columns = replay_columns(o, env->observation_shape());
  t.queue = kMachineQueue;
  t.chunks = replay_chunks(o, kMachineQueue);
  t.params = parameter_count(*net);
  return run_actor_machine("engram-apex", o, t);
}

}  // namespace engram::agents::apex
