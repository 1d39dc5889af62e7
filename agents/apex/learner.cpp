// The Ape-X learner: starts the server (unless given one) and the actor
// processes, samples prioritized batches (a prefetch thread fetches the
// next while this one trains), learns with double Q-learning on a dueling
// network, writes new priorities back by key, publishes its parameters,
// and reports progress once a second. Also: playing a saved model.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iterator>
#include <fstream>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>
#include <vector>

#include "agents/apex/bookkeeping.hpp"
#include "agents/apex/roles.hpp"
#include "agents/apex/tables.hpp"
#include "agents/common/call_clock.hpp"
#include "agents/common/env.hpp"
#include "agents/common/nets.hpp"
#include "agents/common/params.hpp"
#include "agents/common/rng.hpp"

namespace engram::agents::apex {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A sampled batch, as the prefetch thread copied it out of engram.
struct Sampled {
  uint32_t n = 0;
  std::vector<float> obs, next;          // float observations (CartPole)
  std::vector<uint8_t> obs_b, next_b;    // byte observations (Breakout)
  std::vector<int32_t> action;
  std::vector<float> reward, discount;
  std::vector<engram_sample_info> info;
};

// Fetches batches on its own connection (a client is one thread's), one
// ahead of the trainer.
class Prefetcher {
 public:
  Prefetcher(const Options& o, const std::string& socket, size_t obs_size)
      : o_(o), socket_(socket), obs_size_(obs_size), thread_([this] { run(); }) {}
  ~Prefetcher() { stop(); }
  void stop() {
    stop_ = true;
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  // The thread's CPU time, all of it engram's (sampling copies); valid
  // once stopped.
  double cpu_s() const { return cpu_s_; }
  // The next batch; nullopt if the thread stopped (its error is printed).
  std::optional<Sampled> next() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return ready_.has_value() || failed_; });
    if (!ready_) return std::nullopt;
    std::optional<Sampled> b = std::move(ready_);
    ready_.reset();
    cv_.notify_all();
    return b;
  }

 private:
  void run() {
    try {
      api::Client c = api::Client::connect(socket_);
      api::Table t = c.open_table(kReplayTable);
      size_t b = static_cast<size_t>(o_.batch);
      while (!stop_) {
        Sampled s;
        bool bytes = byte_observations(o_);
        if (bytes) {
          s.obs_b.resize(b * obs_size_);
          s.next_b.resize(b * obs_size_);
        } else {
          s.obs.resize(b * obs_size_);
          s.next.resize(b * obs_size_);
        }
        s.action.resize(b);
        s.reward.resize(b);
        s.discount.resize(b);
        s.info.resize(b);
        std::vector<void*> bufs = {bytes ? static_cast<void*>(s.obs_b.data()) : s.obs.data(), s.action.data(),
                                   s.reward.data(), s.discount.data(),
                                   bytes ? static_cast<void*>(s.next_b.data()) : s.next.data()};
        try {
          s.n = t.sample(api::sample_options(static_cast<uint32_t>(b), 1, 200), bufs, s.info);
        } catch (const api::Error& e) {
          if (e.code() == ENGRAM_E_TIMEOUT) continue;  // the rate limiter: actors have not caught up
          throw;
        }
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return !ready_.has_value() || stop_; });
        ready_ = std::move(s);
        cv_.notify_all();
      }
    } catch (const std::exception& e) {
      if (!stop_) std::fprintf(stderr, "engram-apex learner: prefetch: %s\n", e.what());
      std::lock_guard<std::mutex> lk(mu_);
      failed_ = true;
      cv_.notify_all();
    }
    cpu_s_ = thread_cpu_s();
  }

  const Options& o_;
  std::string socket_;
  size_t obs_size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Sampled> ready_;
  std::atomic<bool> stop_{false};
  bool failed_ = false;
  double cpu_s_ = 0;
  std::thread thread_;
};

// The embedded server's config: an arena with room for the replay, the
// episodes, the parameters and what is in flight.
std::string server_toml(const Options& o, size_t params) {
  // Chunks of kChunkTransitions transitions: CartPole's fit 1 KB, Breakout's
  // (two 4x10x10 byte planes a step) 16 KB; episodes' chunks of one step 512 B.
  uint64_t chunks = o.capacity / kChunkTransitions + o.capacity / (4 * kChunkTransitions) + 4096 +
                    64 * static_cast<uint64_t>(o.actors);
  uint64_t param_block = (params * 4 + 4096 + 63) / 64 * 64;
  std::string t = "[arena]\nclasses = [ { block_size = 512, count = 120000 }, { block_size = " +
                  std::string(byte_observations(o) ? "16384" : "1024") + ", count = " + std::to_string(chunks) + " }";
  t += ", { block_size = " + std::to_string(param_block) + ", count = 64 } ]\n";
  return t;
}

void create_tables(api::Client& c, const Options& o, const std::vector<int64_t>& shape, size_t params) {
  for (const char* name : {kReplayTable, kEpisodesTable, kParamsTable}) {
    try {
      c.drop_table(name);  // a previous run's, on a server that outlived it
    } catch (const api::Error& e) {
      if (e.code() != ENGRAM_E_NOT_FOUND) throw;
    }
  }
  api::TableOptions r;
  r.name = kReplayTable;
  r.max_size = o.capacity;
  r.sampler = ENGRAM_PRIORITIZED;
  r.priority_exponent = o.alpha;
  r.remover = ENGRAM_FIFO;
  double spi = o.samples_per_insert;
  // Free running (and actors alone): nobody waits for anybody, so that
  // throughput and the time in engram calls are measured without the
  // rate limiter's waits.
  r.rate_limiter = o.free_running || !o.train
                       ? api::RateLimiter::min_size(o.min_replay)
                       : api::RateLimiter::sample_to_insert_ratio(spi, o.min_replay, std::max(4.0 * o.batch, 200.0 * spi));
  r.columns = replay_columns(o, shape);
  c.create_table(r);
  api::TableOptions e;
  e.name = kEpisodesTable;
  e.max_size = 100000;
  e.sampler = ENGRAM_FIFO;
  e.max_times_sampled = 1;
  e.columns = episode_columns();
  c.create_table(e);
  c.create_table(params_table(params));
}

std::vector<pid_t> start_actors(const Options& o, const std::string& socket) {
  std::vector<pid_t> pids;
  for (int k = 0; k < o.actors; ++k) {
    std::vector<std::string> args = {"/proc/self/exe", "--role", "actor", "--actor-id", std::to_string(k),
                                     "--env", o.env, "--actors", std::to_string(o.actors),
                                     "--envs-per-actor", std::to_string(o.envs_per_actor),
                                     "--seed", std::to_string(o.seed), "--socket", socket, "--out", o.out};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // fork+exec, never fork alone: LibTorch's threads do not survive a fork.
    pid_t pid = ::fork();
    if (pid == 0) {
      ::execv("/proc/self/exe", argv.data());
      std::_Exit(127);
    }
    if (pid < 0) throw std::runtime_error("fork failed");
    pids.push_back(pid);
  }
  return pids;
}

// Trailing-100 means of finished episodes: of all envs and of those whose
// epsilon is at most 0.01 (the greedy end of Ape-X's spread).
struct Curve {
  std::deque<float> all, low;
  uint64_t episodes = 0, low_episodes = 0;
  void add(float ret, float eps) {
    ++episodes;
    all.push_back(ret);
    if (all.size() > 100) all.pop_front();
    if (eps <= 0.01f) {
      ++low_episodes;
      low.push_back(ret);
      if (low.size() > 100) low.pop_front();
    }
  }
  static double mean(const std::deque<float>& d) {
    return d.empty() ? 0.0 : std::accumulate(d.begin(), d.end(), 0.0) / static_cast<double>(d.size());
  }
};

void drain_episodes(api::Table& t, Curve* curve) {
  std::vector<int32_t> env(256), len(256);
  std::vector<float> eps(256), ret(256);
  std::vector<void*> bufs = {env.data(), eps.data(), ret.data(), len.data()};
  for (;;) {
    uint32_t n = 0;
    try {
      n = t.sample(api::sample_options(256, 1, 0), bufs);
    } catch (const api::Error& e) {
      if (e.code() == ENGRAM_E_RATE_LIMITED || e.code() == ENGRAM_E_TIMEOUT) return;
      throw;
    }
    for (uint32_t i = 0; i < n; ++i) curve->add(ret[i], eps[i]);
    if (n < 256) return;
  }
}

// Stops the actors: their inserts first stop waiting for the learner
// (a rate limiter without an upper bound), so that each sees SIGTERM at
// its next step and writes its counts; one that does not end in 5 s is
// killed. Returns the actors' counts, summed: frames, wall, CPU, and the
// wall and CPU spent in engram calls.
std::vector<double> stop_actors(api::Client& c, std::vector<pid_t>& actors, const Options& o) {
  c.set_rate_limiter(kReplayTable, api::RateLimiter::min_size(1));
  for (pid_t pid : actors)
    if (pid > 0) ::kill(pid, SIGTERM);
  double deadline = now_s() + 5;
  for (pid_t& pid : actors) {
    while (pid > 0 && ::waitpid(pid, nullptr, WNOHANG) != pid) {
      if (now_s() > deadline) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    pid = -1;
  }
  std::vector<double> sum(5, 0.0);
  for (int k = 0; k < o.actors; ++k) {
    std::ifstream in(o.out + "/actor-" + std::to_string(k) + ".json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const char* keys[5] = {"\"frames\": ", "\"wall_s\": ", "\"cpu_s\": ", "\"engram_wall_s\": ", "\"engram_cpu_s\": "};
    for (int i = 0; i < 5; ++i) {
      size_t at = text.find(keys[i]);
      if (at != std::string::npos) sum[static_cast<size_t>(i)] += std::atof(text.c_str() + at + std::strlen(keys[i]));
    }
  }
  return sum;
}

void plot(const std::string& out) {
  std::ofstream gp(out + "/curve.gp");
  gp << "set terminal png size 900,500\nset output '" << out << "/curve.png'\n"
     << "set datafile separator ','\nset key bottom right\nset xlabel 'env steps'\n"
     << "set ylabel 'trailing-100 mean return'\nset grid\n"
     << "plot '" << out << "/curve.csv' every ::1 using 2:5 with lines lw 2 title 'epsilon <= 0.01', "
     << "'' every ::1 using 2:6 with lines title 'all actors'\n";
  gp.close();
  if (std::system(("gnuplot " + out + "/curve.gp 2>/dev/null").c_str()) != 0)
    std::fprintf(stderr, "engram-apex: gnuplot failed or is missing; the curve is in %s/curve.csv\n", out.c_str());
}

}  // namespace

int run_learner(const Options& o) {
  single_threaded();
  torch::manual_seed(o.seed);
  ::mkdir(o.out.c_str(), 0755);
  std::unique_ptr<Env> probe = make_env(o.env);
  const std::vector<int64_t> shape = probe->observation_shape();
  const size_t obs_size = probe->observation_size();
  const int64_t actions = probe->num_actions();
  DuelingQ online(o.env, shape, actions), target(o.env, shape, actions);
  copy_parameters(*online, *target);
  const size_t params = parameter_count(*online);
  torch::optim::Adam adam(online->parameters(), torch::optim::AdamOptions(o.lr));

  std::unique_ptr<api::Server> server;
  std::string socket = o.socket;
  if (socket.empty()) {
    char abs[4096];
    socket = std::string(::realpath(o.out.c_str(), abs) ? abs : o.out.c_str()) + "/engram.sock";
    server = std::make_unique<api::Server>(server_toml(o, params), socket);
  }
  api::Client c = api::Client::connect(socket);
  create_tables(c, o, shape, params);
  ParamPublisher publisher(c, params);
  int64_t version = 1;
  publisher.publish(version, flatten_parameters(*online));
  api::Table replay = c.open_table(kReplayTable);
  api::Table episodes = c.open_table(kEpisodesTable);

  std::vector<pid_t> actors = start_actors(o, socket);
  double t0 = now_s();
  std::ofstream csv(o.out + "/curve.csv");
  csv << "wall_s,env_steps,updates,episodes,mean100_low_epsilon,mean100_all\n";
  std::printf("engram-apex: %s, %d actors x %d envs, learner batch %d; curve in %s/curve.csv\n", o.env.c_str(), o.actors,
              o.envs_per_actor, o.batch, o.out.c_str());

  Curve curve;
  CallClock in_engram;  // the main thread's engram calls
  double cpu0 = thread_cpu_s(), prefetch_cpu = 0;
  uint64_t updates = 0, last_updates = 0, last_steps = 0;
  double last_report = t0;
  bool solved = false;
  int64_t steps = 0;
  {
    std::optional<Prefetcher> prefetch;
    if (o.train) prefetch.emplace(o, socket, obs_size);
    std::vector<int64_t> batch_shape = {o.batch};
    batch_shape.insert(batch_shape.end(), shape.begin(), shape.end());
    std::vector<uint64_t> keys(static_cast<size_t>(o.batch));
    std::vector<double> prio(static_cast<size_t>(o.batch));
    while (!solved && steps < o.steps) {
      if (!o.train) {  // actors alone: only watch
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      } else {
        std::optional<Sampled> s = in_engram([&] { return prefetch->next(); });
        if (!s) throw std::runtime_error("the prefetch thread stopped");
        int64_t n = s->n;
        auto shape_n = batch_shape;
        shape_n[0] = n;
        torch::Tensor obs, next;
        if (byte_observations(o)) {
          obs = torch::from_blob(s->obs_b.data(), shape_n, torch::kUInt8).to(torch::kFloat32);
          next = torch::from_blob(s->next_b.data(), shape_n, torch::kUInt8).to(torch::kFloat32);
        } else {
          obs = torch::from_blob(s->obs.data(), shape_n, torch::kFloat32);
          next = torch::from_blob(s->next.data(), shape_n, torch::kFloat32);
        }
        torch::Tensor action = torch::from_blob(s->action.data(), {n}, torch::kInt32).to(torch::kInt64);
        torch::Tensor reward = torch::from_blob(s->reward.data(), {n}, torch::kFloat32);
        torch::Tensor discount = torch::from_blob(s->discount.data(), {n}, torch::kFloat32);
        std::vector<double> p(static_cast<size_t>(n));
        std::vector<uint32_t> size(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) {
          p[static_cast<size_t>(i)] = s->info[static_cast<size_t>(i)].probability;
          size[static_cast<size_t>(i)] = s->info[static_cast<size_t>(i)].table_size;
        }
        std::vector<float> w = importance_weights(p, size, o.beta);
        torch::Tensor weight = torch::from_blob(w.data(), {n}, torch::kFloat32);

        torch::Tensor y;
        {
          torch::NoGradGuard no_grad;  // double Q: the online net picks, the target net values
          torch::Tensor pick = online->forward(next).argmax(1, /*keepdim=*/true);
          torch::Tensor value = target->forward(next).gather(1, pick).squeeze(1);
          y = reward + discount * value;
        }
        torch::Tensor q = online->forward(obs).gather(1, action.unsqueeze(1)).squeeze(1);
        torch::Tensor td = y - q;
        torch::Tensor loss = (weight * torch::nn::functional::huber_loss(
                                           q, y, torch::nn::functional::HuberLossFuncOptions().reduction(torch::kNone)))
                                 .mean();
        adam.zero_grad();
        loss.backward();
        torch::nn::utils::clip_grad_norm_(online->parameters(), 10.0);
        adam.step();
        ++updates;

        torch::Tensor abs_td = td.detach().abs();
        auto a = abs_td.accessor<float, 1>();
        for (int64_t i = 0; i < n; ++i) {
          keys[static_cast<size_t>(i)] = s->info[static_cast<size_t>(i)].key;
          prio[static_cast<size_t>(i)] = std::isfinite(a[i]) ? a[i] + 1e-6 : 1.0;
        }
        std::vector<int32_t> results(static_cast<size_t>(n));
        in_engram([&] {  // stale keys (evicted meanwhile) are reported in results, not thrown
          replay.update_priorities(api::Span<const uint64_t>(keys.data(), static_cast<size_t>(n)),
                                   api::Span<const double>(prio.data(), static_cast<size_t>(n)), results);
        });
        if (updates % static_cast<uint64_t>(o.target_every) == 0) copy_parameters(*online, *target);
        if (updates % static_cast<uint64_t>(o.publish_every) == 0) {
          std::vector<float> flat = flatten_parameters(*online);
          in_engram([&] { publisher.publish(++version, flat); });
        }

      }
      double now = now_s();
      if (now - last_report >= 1.0) {
        engram_table_info info = in_engram([&] {
          drain_episodes(episodes, &curve);
          return c.info(kReplayTable);
        });
        steps = static_cast<int64_t>(info.inserts);
        double dt = now - last_report;
        double low = Curve::mean(curve.low), all = Curve::mean(curve.all);
        std::printf("%7.1f s  steps %9lld  %7.0f steps/s  %6.0f updates/s  episodes %6llu  mean100 %6.1f (eps<=0.01) %6.1f (all)  replay %llu\n",
                    now - t0, static_cast<long long>(steps), static_cast<double>(steps - static_cast<int64_t>(last_steps)) / dt,
                    static_cast<double>(updates - last_updates) / dt, static_cast<unsigned long long>(curve.episodes), low, all,
                    static_cast<unsigned long long>(info.size));
        std::fflush(stdout);
        csv << now - t0 << ',' << steps << ',' << updates << ',' << curve.episodes << ',' << low << ',' << all << '\n';
        csv.flush();
        last_report = now;
        last_updates = updates;
        last_steps = static_cast<uint64_t>(steps);
        solved = curve.low.size() >= 100 && low >= o.solved;
      }
      for (pid_t& pid : actors) {  // an actor that died: the others go on
        int st = 0;
        if (pid > 0 && ::waitpid(pid, &st, WNOHANG) == pid) {
          std::fprintf(stderr, "engram-apex: actor pid %d ended (%s %d); training goes on with the others\n", pid,
                       WIFSIGNALED(st) ? "signal" : "status", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
          pid = -1;
        }
      }
    }
    if (prefetch) {
      prefetch->stop();
      prefetch_cpu = prefetch->cpu_s();
    }
  }
  double wall = now_s() - t0;
  double main_cpu = thread_cpu_s() - cpu0;
  std::vector<double> act = stop_actors(c, actors, o);
  // Shares of time in engram calls: the learner's main thread (waiting
  // for a batch included in wall, not in CPU) plus its prefetch thread
  // (all engram), and the actors' whole.
  double learner_cpu_share = (in_engram.cpu() + prefetch_cpu) / std::max(1e-9, main_cpu + prefetch_cpu);
  double learner_wall_share = in_engram.wall() / std::max(1e-9, wall);
  double actor_cpu_share = act[4] / std::max(1e-9, act[2]);
  double actor_wall_share = act[3] / std::max(1e-9, act[1]);
  torch::save(online, o.out + "/model.pt");
  csv.close();
  plot(o.out);
  std::ofstream(o.out + "/summary.json") << "{\"env\": \"" << o.env << "\", \"seed\": " << o.seed << ", \"actors\": "
                                        << o.actors << ", \"envs_per_actor\": " << o.envs_per_actor
                                        << ", \"solved\": " << (solved ? "true" : "false") << ", \"env_steps\": " << steps
                                        << ", \"updates\": " << updates << ", \"wall_s\": " << wall
                                        << ", \"episodes\": " << curve.episodes
                                        << ", \"mean100_low_epsilon\": " << Curve::mean(curve.low)
                                        << ", \"mean100_all\": " << Curve::mean(curve.all)
                                        << ", \"actor_frames\": " << act[0]
                                        << ", \"learner_engram_cpu_share\": " << learner_cpu_share
                                        << ", \"learner_engram_wall_share\": " << learner_wall_share
                                        << ", \"actor_engram_cpu_share\": " << actor_cpu_share
                                        << ", \"actor_engram_wall_share\": " << actor_wall_share << "}\n";
  std::printf("engram-apex: time in engram calls: learner %.1f%% of CPU (%.1f%% of wall, waiting for batches included), "
              "actors %.1f%% of CPU (%.1f%% of wall)\n",
              100 * learner_cpu_share, 100 * learner_wall_share, 100 * actor_cpu_share, 100 * actor_wall_share);
  std::printf("engram-apex: %s after %lld env steps, %llu updates, %.1f s; trailing-100 mean %.1f (eps<=0.01)\n",
              solved ? "solved" : "stopped", static_cast<long long>(steps), static_cast<unsigned long long>(updates), wall,
              Curve::mean(curve.low));
  std::printf("engram-apex: curve %s/curve.csv, plot %s/curve.png, model %s/model.pt\n", o.out.c_str(), o.out.c_str(),
              o.out.c_str());
  return 0;
}

int run_eval(const Options& o) {
  single_threaded();
  torch::NoGradGuard no_grad;
  std::unique_ptr<Env> env = make_env(o.env);
  DuelingQ net(o.env, env->observation_shape(), env->num_actions());
  torch::load(net, o.eval);
  std::vector<int64_t> shape = {1};
  for (int64_t d : env->observation_shape()) shape.push_back(d);
  torch::Tensor obs = torch::zeros(shape);
  double total = 0;
  for (int e = 0; e < o.eval_episodes; ++e) {
    env->reset(Rng::derive(o.seed, 77 + static_cast<uint64_t>(e)), obs.data_ptr<float>());
    double ret = 0;
    for (int t = 0; t < 100000; ++t) {
      int a = static_cast<int>(net->forward(obs).argmax(1).item<int64_t>());
      StepResult r = env->step(a, obs.data_ptr<float>());
      ret += r.reward;
      if (r.terminated || r.truncated) break;
    }
    std::printf("episode %d: return %.0f\n", e + 1, ret);
    total += ret;
  }
  std::printf("mean return over %d greedy episodes: %.1f\n", o.eval_episodes, total / o.eval_episodes);
  return 0;
}

}  // namespace engram::agents::apex
