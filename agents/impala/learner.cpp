// The IMPALA learner: starts the server (unless given one) and the actor
// processes, takes batches of unrolls from the queue, learns with V-trace
// (vtrace.hpp), publishes its parameters after every update, and reports
// progress once a second. With --reproducible it learns from whole
// rollouts in env order, one update per rollout, and logs a hash of its
// parameters after each update. Also: playing a saved model.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <thread>
#include <map>
#include <optional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/fnv.hpp"
#include "agents/common/call_clock.hpp"
#include "agents/common/children.hpp"
#include "agents/common/env.hpp"
#include "agents/common/episodes.hpp"
#include "agents/common/evaluate.hpp"
#include "agents/common/flat_adam.hpp"
#include "agents/common/nets.hpp"
#include "agents/common/params.hpp"
#include "agents/common/replace_tables.hpp"
#include "agents/common/rng.hpp"
#include "agents/impala/roles.hpp"
#include "agents/impala/handoff.hpp"
#include "agents/impala/port.hpp"
#include "agents/impala/tables.hpp"
#include "agents/impala/unrolls.hpp"
#include "agents/impala/vtrace.hpp"
#include "engram/server.hpp"

namespace engram::agents::impala {

namespace {

// The parameters' fingerprint, logged after every update under
// --reproducible only: hashing them bytewise after every update costs the
// learner a few percent (bench/NOTES.md, "IMPALA").
uint64_t param_hash(const std::vector<float>& v) { return fnv1a(kFnvOffset, v.data(), v.size() * sizeof(float)); }

// The embedded server's config: blocks for the unrolls' chunks (two per
// queued item, the open ones of every env's writer, and its spares), the
// episodes and the parameters.
std::string server_toml(const Options& o, size_t params) {
  uint64_t chunks = 4 * static_cast<uint64_t>(queue_size(o)) + 8 * static_cast<uint64_t>(o.envs) + 1024;
  uint64_t param_block = (params * 4 + 4096 + 63) / 64 * 64;
  return "[arena]\nclasses = [ { block_size = 512, count = 120000 }, { block_size = " +
         std::string(byte_observations(o) ? "16384" : "2048") + ", count = " + std::to_string(chunks) +
         " }, { block_size = " + std::to_string(param_block) + ", count = 64 } ]\n";
}

void create_tables(api::Client& c, const Options& o, const std::vector<int64_t>& shape, int actions, size_t params) {
  api::TableOptions q;
  q.name = kUnrollTable;
  q.max_size = static_cast<uint64_t>(queue_size(o));
  q.sampler = ENGRAM_FIFO;
  q.remover = ENGRAM_FIFO;
  q.max_times_sampled = 1;
  q.rate_limiter = api::RateLimiter::queue(queue_size(o));
  q.columns = unroll_columns(o, shape, actions);
  replace_tables(c, {q, episodes_table(), params_table(params)});
}

std::vector<pid_t> start_actors(const Options& o, const std::string& socket) {
  std::vector<pid_t> pids;
  for (int k = 0; k < o.actors; ++k)
    pids.push_back(start_child({"--role", "actor", "--actor-id", std::to_string(k), "--env", o.env, "--actors",
                                std::to_string(o.actors), "--envs", std::to_string(o.envs), "--seed",
                                std::to_string(o.seed), "--socket", socket, "--out", o.out, "--reproducible",
                                o.reproducible ? "1" : "0", "--micro-batch", std::to_string(o.micro_batch),
                                "--unroll", std::to_string(o.unroll)}));
  return pids;
}

// Takes unrolls from the queue: `batch` of them in arrival order, or with
// --reproducible all E of rollout k in env order (items of rollout k + 1
// that come first are kept for the next call).
class Source {
 public:
  Source(const Options& o, api::Table& t, int64_t obs_size, int64_t actions)
      : o_(o), t_(t), obs_size_(obs_size), actions_(actions) {}
  // The next batch, or nullptr if `stop()` said so while waiting.
  template <typename Stop>
  std::unique_ptr<Unrolls> next(Stop stop) {
    const int64_t steps = o_.unroll + 1;
    auto batch = std::make_unique<Unrolls>(o_.batch, steps, obs_size_, actions_, byte_observations(o_));
    std::vector<bool> have(static_cast<size_t>(o_.batch), false);
    int64_t filled = 0;
    if (o_.reproducible) {  // what came early for this rollout
      auto it = early_.find(rollout_);
      if (it != early_.end()) {
        for (auto& [env, u] : it->second) place(*batch, have, *u, 0, &filled);
        early_.erase(it);
      }
    }
    while (filled < o_.batch) {
      if (stop()) return nullptr;
      // In arrival order the batch is sampled into as it is; the
      // reproducible order goes through `got`, to be placed by env.
      std::optional<Unrolls> staging;
      if (o_.reproducible) staging.emplace(o_.batch - filled, steps, obs_size_, actions_, byte_observations(o_));
      Unrolls& got = o_.reproducible ? *staging : *batch;
      int64_t first = o_.reproducible ? 0 : filled;
      std::vector<void*> bufs = got.buffers(first);
      uint32_t n = 0;
      try {
        n = t_.sample(api::sample_options(static_cast<uint32_t>(o_.batch - filled), static_cast<uint32_t>(steps), 200),
                      bufs);
      } catch (const api::Error& e) {
        if (e.code() == ENGRAM_E_TIMEOUT) continue;  // actors have not caught up: look at stop() again
        throw;
      }
      for (int64_t i = first; i < first + n; ++i) {
        if (!got.whole(i))
          throw std::runtime_error("unroll of env " + std::to_string(got.env_of(i)) + " is not one env's " +
                                   std::to_string(o_.unroll + 1) + " consecutive steps");
        if (!o_.reproducible) {
          ++filled;
        } else if (got.rollout_of(i) == rollout_) {
          place(*batch, have, got, i, &filled);
        } else if (got.rollout_of(i) == rollout_ + 1) {
          auto u = std::make_unique<Unrolls>(1, steps, obs_size_, actions_, byte_observations(o_));
          u->copy_item(got, i, 0);
          early_[rollout_ + 1][got.env_of(i)] = std::move(u);
        } else {
          throw std::runtime_error("rollout " + std::to_string(got.rollout_of(i)) + " of env " +
                                   std::to_string(got.env_of(i)) + " while learning from rollout " +
                                   std::to_string(rollout_));
        }
      }
    }
    ++rollout_;
    return batch;
  }

 private:
  void place(Unrolls& batch, std::vector<bool>& have, const Unrolls& from, int64_t i, int64_t* filled) {
    int32_t env = from.env_of(i);
    if (env < 0 || env >= o_.envs || have[static_cast<size_t>(env)])
      throw std::runtime_error("env " + std::to_string(env) + " twice or out of range in rollout " +
                               std::to_string(rollout_));
    batch.copy_item(from, i, env);
    have[static_cast<size_t>(env)] = true;
    ++*filled;
  }

  const Options& o_;
  api::Table& t_;
  int64_t obs_size_, actions_;
  int32_t rollout_ = 0;
  std::map<int32_t, std::map<int32_t, std::unique_ptr<Unrolls>>> early_;
};

// What the learner trains through: engram, or the in-process baseline.
class Transport {
 public:
  virtual ~Transport() = default;
  // The next batch, or nullptr once stop() (asked while waiting) says so.
  virtual std::unique_ptr<Unrolls> next(const std::function<bool()>& stop) = 0;
  virtual void publish(int64_t version, const std::vector<float>& flat) = 0;
  // Takes finished episodes into *curve; sets the unrolls queued in all
  // and those waiting now.
  virtual void poll(Curve* curve, int64_t* unrolls, uint64_t* queued) = 0;
  virtual void start() = 0;  // the actors
  // Stops the actors; their counts summed (children.hpp, actor_counts).
  virtual ActorReport stop() = 0;
};

// Actor processes writing into engram: the embedded server, or --socket's.
class EngramTransport : public Transport {
 public:
  EngramTransport(const Options& o, const std::vector<int64_t>& shape, int actions, size_t params)
      : o_(o),
        socket_(o.socket.empty() ? embedded_socket(o.out) : o.socket),
        server_(o.socket.empty() ? std::make_unique<api::Server>(server_toml(o, params), socket_) : nullptr),
        c_(api::Client::connect(socket_)) {
    create_tables(c_, o, shape, actions, params);
    publisher_ = std::make_unique<ParamPublisher>(c_, params);
    queue_ = c_.open_table(kUnrollTable);
    episodes_ = c_.open_table(kEpisodesTable);
    int64_t obs_size = 1;
    for (int64_t d : shape) obs_size *= d;
    source_ = std::make_unique<Source>(o, queue_, obs_size, actions);
  }
  void start() override { actors_ = start_actors(o_, socket_); }
  std::unique_ptr<Unrolls> next(const std::function<bool()>& stop) override {
    return in_engram_([&] { return source_->next(stop); });
  }
  void publish(int64_t version, const std::vector<float>& flat) override {
    in_engram_([&] { publisher_->publish(version, flat); });
  }
  void poll(Curve* curve, int64_t* unrolls, uint64_t* queued) override {
    engram_table_info info = in_engram_([&] {
      drain_episodes(episodes_, curve);
      return c_.info(kUnrollTable);
    });
    *unrolls = static_cast<int64_t>(info.inserts);
    *queued = info.size;
    reap_children(actors_, "engram-impala");
  }
  ActorReport stop() override {
    // Actors first stop waiting for the queue: each sees SIGTERM at its next step.
    c_.set_rate_limiter(kUnrollTable, api::RateLimiter::min_size(1));
    stop_children(actors_);
    return actor_counts(o_.out, o_.actors);
  }
  const CallClock& in_engram() const { return in_engram_; }

 private:
  const Options& o_;
  std::string socket_;
  std::unique_ptr<api::Server> server_;
  api::Client c_;
  std::unique_ptr<ParamPublisher> publisher_;
  api::Table queue_, episodes_;
  std::unique_ptr<Source> source_;
  std::vector<pid_t> actors_;
  CallClock in_engram_;
};

// Actors as threads of this process, handing unrolls over in memory.
class HandoffTransport : public Transport {
 public:
  HandoffTransport(const Options& o, int64_t obs_size, int actions) : o_(o), h_(o, obs_size, actions) {}
  ~HandoffTransport() override { (void)stop(); }
  void start() override {
    counts_.resize(static_cast<size_t>(o_.actors));
    for (int k = 0; k < o_.actors; ++k)
      threads_.emplace_back([this, k] {
        Options mine = o_;
        mine.actor_id = k;
        HandoffPort port(h_, static_cast<size_t>(o_.envs_per_actor()));
        Counts& c = counts_[static_cast<size_t>(k)];
        double wall0 = wall_s(), cpu0 = thread_cpu_s();
        act(mine, port, &c.counts);
        c.wall = wall_s() - wall0;
        c.cpu = thread_cpu_s() - cpu0;
      });
  }
  std::unique_ptr<Unrolls> next(const std::function<bool()>& stop) override {
    for (;;) {
      if (stop()) return nullptr;
      if (auto b = h_.take(o_.batch, std::chrono::milliseconds(200))) return b;
    }
  }
  void publish(int64_t version, const std::vector<float>& flat) override { h_.publish(version, flat); }
  void poll(Curve* curve, int64_t* unrolls, uint64_t* queued) override {
    std::lock_guard<std::mutex> lk(h_.mu);
    for (float r : h_.returns) curve->add(r, 0.0f);
    h_.returns.clear();
    *unrolls = h_.pushed;
    *queued = h_.queue.size();
  }
  ActorReport stop() override {
    h_.stop_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
    ActorReport sum;
    for (const Counts& c : counts_)
      sum.add({static_cast<double>(c.counts.frames), c.wall, c.cpu, c.counts.in_port.wall(), c.counts.in_port.cpu()});
    return sum;
  }

 private:
  struct Counts {
    ActorCounts counts;
    double wall = 0, cpu = 0;
  };
  const Options& o_;
  Handoff h_;
  std::vector<Counts> counts_;
  std::vector<std::thread> threads_;
};

}  // namespace

int run_learner(const Options& o) {
  setup_process();
  torch::manual_seed(o.seed);
  ::mkdir(o.out.c_str(), 0755);
  std::unique_ptr<Env> probe = make_env(o.env);
  const std::vector<int64_t> shape = probe->observation_shape();
  const int64_t obs_size = static_cast<int64_t>(probe->observation_size());
  const int actions = probe->num_actions();
  PolicyValue net(o.env, shape, actions);
  const size_t params = parameter_count(*net);
  FlatAdam adam(*net, o.lr);

  std::unique_ptr<Transport> transport;
  EngramTransport* engram = nullptr;  // for its clock: the handoff has no engram calls
  if (o.handoff) {
    transport = std::make_unique<HandoffTransport>(o, obs_size, actions);
  } else {
    auto e = std::make_unique<EngramTransport>(o, shape, actions, params);
    engram = e.get();
    transport = std::move(e);
  }
  std::vector<float> flat = flatten_parameters(*net);
  transport->publish(1, flat);  // version = updates + 1
  std::ofstream hashes;
  if (o.reproducible) {
    hashes.open(o.out + "/param_hashes.txt");
    hashes << "0 " << std::hex << param_hash(flat) << std::dec << '\n';
  }

  transport->start();
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
    transport->poll(&curve, &unrolls, &queued);
    steps = unrolls * T;
    solved = curve.all.size() >= 100 && Curve::mean(curve.all) >= o.solved;
    progress.report(now, steps, updates, curve, queued, "queued", done());
  };

  while (!done()) {
    std::unique_ptr<Unrolls> u = transport->next([&] {
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
    transport->publish(static_cast<int64_t>(updates) + 1, flat);
    if (o.reproducible) hashes << updates << ' ' << std::hex << param_hash(flat) << std::dec << '\n';
    report();
  }
  hashes.close();
  double wall = wall_s() - t0;
  double main_cpu = thread_cpu_s() - cpu0;
  ActorReport act = transport->stop();
  // The learner's share: engram's calls (the handoff's queue waits are not
  // counted; its actors' share is their time in the handoff's calls).
  double learner_cpu_share = engram ? engram->in_engram().cpu() / std::max(1e-9, main_cpu) : 0.0;
  double actor_cpu_share = act.engram_cpu_share();
  torch::save(net, o.out + "/model.pt");
  progress.close();
  plot_curve(o.out, "engram-impala", nullptr);
  std::ofstream(o.out + "/summary.json") << "{\"env\": \"" << o.env << "\", \"seed\": " << o.seed << ", \"actors\": "
                                        << o.actors << ", \"envs\": " << o.envs << ", \"handoff\": " << (o.handoff ? "true" : "false")
                                        << ", \"reproducible\": "
                                        << (o.reproducible ? "true" : "false") << ", \"solved\": "
                                        << (solved ? "true" : "false") << ", \"env_steps\": " << steps
                                        << ", \"updates\": " << updates << ", \"wall_s\": " << wall
                                        << ", \"episodes\": " << curve.episodes
                                        << ", \"mean100\": " << Curve::mean(curve.all)
                                        << ", \"actor_frames\": " << act.frames
                                        << ", \"frames_per_s\": " << static_cast<double>(steps) / std::max(1e-9, wall)
                                        << ", \"learner_engram_cpu_share\": " << learner_cpu_share
                                        << ", \"actor_engram_cpu_share\": " << actor_cpu_share << "}\n";
  std::printf("engram-impala: time in %s calls: learner %.1f%% of CPU, actors %.1f%% of CPU\n",
              o.handoff ? "handoff" : "engram", 100 * learner_cpu_share, 100 * actor_cpu_share);
  std::printf("engram-impala: %s after %lld env steps, %llu updates, %.1f s; trailing-100 mean %.1f\n",
              solved ? "solved" : "stopped", static_cast<long long>(steps), static_cast<unsigned long long>(updates),
              wall, Curve::mean(curve.all));
  say_outputs("engram-impala", o.out);
  return 0;
}

int run_eval(const Options& o) {
  setup_process();
  std::unique_ptr<Env> probe = make_env(o.env);
  PolicyValue net(o.env, probe->observation_shape(), probe->num_actions());
  load_model(net, o.eval, o.env);
  return play_greedy(o.env, o.seed, o.eval_episodes,
                     [&](const torch::Tensor& obs) { return static_cast<int>(net->forward(obs).first.argmax(1).item<int64_t>()); });
}

}  // namespace engram::agents::impala
