// The Ape-X learner: starts the server (unless given one) and the actor
// processes, samples prioritized batches (the next is drawn while this
// one trains), learns with double Q-learning on a dueling
// network, writes new priorities back by key, publishes its parameters,
// and reports progress once a second. Also: playing a saved model.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>
#include <vector>

#include "agents/apex/bookkeeping.hpp"
#include "agents/apex/roles.hpp"
#include "agents/apex/tables.hpp"
#include "agents/common/env/env.hpp"
#include "agents/common/env/rng.hpp"
#include "agents/common/host/call_clock.hpp"
#include "agents/common/host/learner_host.hpp"
#include "agents/common/host/learner_state.hpp"
#include "agents/common/host/reconnect.hpp"
#include "agents/common/nets/evaluate.hpp"
#include "agents/common/nets/flat_adam.hpp"
#include "agents/common/nets/nets.hpp"
#include "agents/common/tables/episodes.hpp"

namespace engram::agents::apex {

namespace {

// The batches the learner trains on. Each sample draws `per_sample`
// batches at once, and two samples are drawn ahead (engram_sample_begin),
// each on a connection of its own (one sample at a time per table
// handle), while the learner trains on the batches of the last, which the
// next collect() overwrites. So a sample has two samples' worth of updates
// to be drawn, and the learner seldom waits for the rate limiter or for
// the owner to be scheduled; and the owner, asleep between the learner's
// visits, is woken once per sample: its wake-up (about 20 us of the
// learner's CPU on a KVM guest) carries the priorities of the batches
// trained on, the release of their chunks and the next request (Ape-X's
// prefetch of several batches, without a thread: bench/NOTES.md, "Ape-X:
// time in engram calls"). The price: a batch's items were drawn up to
// 2 * per_sample updates before it trains, with the priorities of then.
class Batches {
 public:
  Batches(const Options& o, api::Table& replay, const std::string& socket, size_t obs_size)
      : replay_(replay),
        second_client_(api::Client::connect(socket)),
        second_(second_client_.open_table(kReplayTable)),
        bytes_(byte_observations(o)),
        batch_(static_cast<uint32_t>(o.batch)),
        options_(api::sample_options(sample_size(o), 1, 200)) {
    size_t b = options_.batch_size;
    if (bytes_) {
      obs_b.resize(b * obs_size);
      next_b.resize(b * obs_size);
    } else {
      obs.resize(b * obs_size);
      next.resize(b * obs_size);
    }
    action.resize(b);
    reward.resize(b);
    discount.resize(b);
    info.resize(b);
    priorities.resize(b);
    bufs_ = {bytes_ ? static_cast<void*>(obs_b.data()) : obs.data(), action.data(), reward.data(), discount.data(),
             bytes_ ? static_cast<void*>(next_b.data()) : next.data()};
    try {
      replay_.sample_begin(options_);
    } catch (const std::exception& e) {
      throw std::runtime_error(too_large(o) + e.what());
    }
    second_.sample_begin(options_);
  }
  // Is every batch of the last sample taken (next_batch)? Then collect().
  bool used_up() const { return taken_ == drawn_; }
  // Copies out the older sample begun over the one trained on, then sends
  // the latter's new priorities (`priorities`, set for every item of its
  // batches) and begins the next sample. 0 items when the rate limiter
  // held the sample past its timeout (the actors have not caught up).
  uint32_t collect() {
    // The keys are taken before sample_end overwrites `info`; the
    // priorities stay in place until the learner trains on the new batches.
    keys_.resize(taken_);
    for (size_t i = 0; i < keys_.size(); ++i) keys_[i] = info[i].key;
    api::Table& t = turn_ == 0 ? replay_ : second_;
    turn_ ^= 1;
    uint32_t n = 0;
    try {
      n = t.sample_end(bufs_, info);
    } catch (const api::Error& e) {
      if (e.code() != ENGRAM_E_TIMEOUT) throw;
    }
    if (!keys_.empty()) {
      // Not awaited: keys evicted meanwhile are skipped.
      replay_.update_priorities_async(keys_, api::Span<const double>(priorities.data(), keys_.size()));
    }
    t.sample_begin(options_);
    drawn_ = n;
    taken_ = 0;
    return n;
  }
  // The next batch of the last sample: items [*first, *first + return) of
  // the buffers below, whose priorities the learner sets in `priorities`.
  uint32_t next_batch(size_t* first) {
    *first = taken_;
    uint32_t n = std::min(batch_, drawn_ - taken_);
    taken_ += n;
    return n;
  }

  std::vector<float> obs, next;          // float observations (CartPole)
  std::vector<uint8_t> obs_b, next_b;    // byte observations (Breakout)
  std::vector<int32_t> action;
  std::vector<float> reward, discount;
  std::vector<engram_sample_info> info;
  std::vector<double> priorities;        // the new ones, by item, for the next collect()

 private:
  api::Table& replay_;
  api::Client second_client_;
  api::Table second_;
  bool bytes_;
  uint32_t batch_;
  engram_sample_options options_;
  std::vector<void*> bufs_;
  std::vector<uint64_t> keys_;
  uint32_t drawn_ = 0, taken_ = 0;  // items of the last sample, and of them those trained on
  int turn_ = 0;  // whose sample is collected next: replay_'s or second_'s

  static std::string too_large(const Options& o) {
    return "a sample of --batch " + std::to_string(o.batch) + " x --batches-per-sample " +
           std::to_string(o.batches_per_sample) + " items: ";
  }
  // The items one sample draws; each flag may be up to 2^20, and their
  // product must not wrap in the C API's uint32 into a size that passes.
  static uint32_t sample_size(const Options& o) {
    uint64_t n = static_cast<uint64_t>(o.batch) * static_cast<uint64_t>(o.batches_per_sample);
    if (n > UINT32_MAX) throw std::runtime_error(too_large(o) + "more than a sample can hold");
    return static_cast<uint32_t>(n);
  }
};

// The network saved as OUT/model.pt: the best, by a short greedy
// evaluation, of the final one and those of the last kKeptNetworks
// progress lines. Off-policy Q-learning on a small replay swings: the
// network at a run's end may be in a dip the trailing-100 mean (of
// episodes played over the last seconds, with older parameters) does not
// show yet (4 of 18 models saved at a solve played under 410 greedily,
// two CI runs under 100). The evaluation's episodes are seeded apart from
// --eval's, and cut at kEvalSteps steps so that a good Breakout policy
// does not make it long.
constexpr size_t kKeptNetworks = 5;
constexpr int kEvalEpisodes = 3;
constexpr int kEvalSteps = 5000;

// The action the network picks for an observation batch of one: --eval's
// and best_network's.
int greedy_action(DuelingQ& net, const torch::Tensor& obs) {
  return static_cast<int>(net->forward(obs).argmax(1).item<int64_t>());
}

struct BestNetwork {
  double mean = 0;  // its greedy mean return
  size_t age = 0;   // progress lines before the end; 0: the final network
};

// Loads into `net` the best of its own parameters and `kept`'s.
BestNetwork best_network(const Options& o, DuelingQ& net, const std::deque<std::vector<float>>& kept) {
  const std::vector<float> final_params = flatten_parameters(*net);
  auto score = [&](const std::vector<float>& p) {
    load_parameters(*net, p.data(), p.size());
    return greedy_mean(o.env, o.seed + 1000003, kEvalEpisodes,
                       [&](const torch::Tensor& obs) { return greedy_action(net, obs); }, false, kEvalSteps);
  };
  BestNetwork best{score(final_params), 0};
  for (size_t i = 0; i < kept.size(); ++i)
    if (double m = score(kept[i]); m > best.mean) best = {m, kept.size() - i};
  const std::vector<float>& p = best.age == 0 ? final_params : kept[kept.size() - best.age];
  load_parameters(*net, p.data(), p.size());
  return best;
}

api::TableOptions replay_table(const Options& o, const std::vector<int64_t>& shape) {
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
  return r;
}

}  // namespace

int run_learner(const Options& o) {
  install_stop_signal();
  const EnvShape env = start_learner(o.env, o.seed);
  const std::vector<int64_t>& shape = env.observation;
  const size_t obs_size = env.observation_size;
  DuelingQ online(o.env, shape, env.actions), target(o.env, shape, env.actions);
  copy_parameters(*online, *target);
  const size_t params = parameter_count(*online);
  FlatAdam adam(*online, o.lr);

  // --resume: the networks, the optimiser and the counters of a saved
  // state, and the replay of the table checkpoint taken with it.
  LearnerStates states("engram-apex", o);
  std::optional<RunState> resumed;
  std::string tables;  // the table checkpoint of the state resumed from
  if (!o.resume.empty()) {
    std::string path;
    StateIn in = states.load(o.resume, [&](const StateIn& s) {
      RunState::load(s, "engram-apex", o, params);
      s.get<float>("target", params);
      if (o.socket.empty() && !s.text("tables").empty() && !std::filesystem::is_directory(s.text("tables")))
        throw std::runtime_error("its tables' checkpoint " + s.text("tables") + " is gone");
    }, &path);
    resumed = RunState::load(in, "engram-apex", o, params);
    std::vector<float> p = in.get<float>("online", params), t = in.get<float>("target", params);
    load_parameters(*online, p.data(), p.size());
    load_parameters(*target, t.data(), t.size());
    adam.restore(in.get<float>("adam"), in.value<int64_t>("adam_steps"));
    set_torch_rng_state(in.get<uint8_t>("torch_rng"));
    if (o.socket.empty()) tables = in.text("tables");
    std::printf("engram-apex: resuming from %s: %llu updates, %lld env steps%s%s\n", path.c_str(),
                static_cast<unsigned long long>(resumed->updates), static_cast<long long>(resumed->steps),
                tables.empty() ? "" : ", the replay of ", tables.c_str());
  }

  LearnerHost host("engram-apex", o, replay_chunks(o, o.capacity), params, tables);
  host.create_tables(replay_table(o, shape));
  int64_t version = resumed ? resumed->version + 1 : 1;
  host.publish(version, flatten_parameters(*online));
  api::Client& c = host.client();
  std::optional<api::Table> replay(c.open_table(kReplayTable));

  host.start_actors();
  std::optional<CurveResume> from;
  if (resumed) from = CurveResume{resumed->wall_s, resumed->steps, resumed->updates};
  double t0 = wall_s() - (resumed ? resumed->wall_s : 0);
  Progress progress(o.out, t0, "eps<=0.01", from ? &*from : nullptr);
  std::printf("engram-apex: %s, %d actors x %d envs, learner batch %d; curve in %s/curve.csv\n", o.env.c_str(), o.actors,
              o.envs_per_actor, o.batch, o.out.c_str());
  if (!o.listen.empty())
    std::printf("engram-apex: serving the tables to actor machines on %s (engram-apex --role actors --upstream "
                "HOST:PORT there)\n", o.listen.c_str());
  else if (o.actors == 0)  // else the progress lines of zeros look like a hang
    std::printf("engram-apex: --actors 0: waiting for actors to connect to %s (e.g. "
                "bindings/python/examples/apex_actor.py --socket %s)\n", host.socket().c_str(), host.socket().c_str());

  Curve curve = resumed ? resumed->curve : Curve();
  CallClock in_engram;  // the main thread's engram calls
  double cpu0 = thread_cpu_s();
  uint64_t updates = resumed ? resumed->updates : 0;
  bool solved = false;
  int64_t steps = resumed ? resumed->steps : 0;
  // Env steps are the replay's inserts, and steps_before those of a server
  // that went away since (its restored counters run from its checkpoint)
  // or of the run resumed: the curve's steps never go back.
  int64_t steps_before = steps - static_cast<int64_t>(c.info(kReplayTable).inserts);
  // The learner's state and the replay, taken one after the other between
  // two updates (the table checkpoint first: the state names it).
  double saved_at = wall_s();
  auto save_state = [&] {
    StateOut s;
    RunState{updates, steps, wall_s() - t0, version, curve}.save(&s, "engram-apex", o, params);
    s.put("online", flatten_parameters(*online));
    s.put("target", flatten_parameters(*target));
    s.put("adam", adam.moments());
    s.put_value("adam_steps", adam.steps());
    s.put("torch_rng", torch_rng_state());
    s.put_text("tables", in_engram([&] { return host.checkpoint_tables(); }));
    states.save(s, updates);
    saved_at = wall_s();
  };
  std::deque<std::vector<float>> kept;  // the networks of the last progress lines, for best_network
  {
    std::optional<Batches> batches;
    if (o.train) in_engram([&] { batches.emplace(o, *replay, host.socket(), obs_size); });
    std::vector<int64_t> batch_shape = {o.batch};
    batch_shape.insert(batch_shape.end(), shape.begin(), shape.end());
    bool done = false;         // solved, or the step limit
    while (!done) try {
      size_t first = 0;
      int64_t n = 0;
      if (!o.train) {  // actors alone: only watch
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      } else if (!batches->used_up() || in_engram([&] { return batches->collect(); }) > 0) {
        n = batches->next_batch(&first);
      }
      if (n > 0) {
        Batches* s = &*batches;
        auto shape_n = batch_shape;
        shape_n[0] = n;
        torch::Tensor obs, next;
        if (byte_observations(o)) {
          obs = torch::from_blob(s->obs_b.data() + first * obs_size, shape_n, torch::kUInt8).to(torch::kFloat32);
          next = torch::from_blob(s->next_b.data() + first * obs_size, shape_n, torch::kUInt8).to(torch::kFloat32);
        } else {
          obs = torch::from_blob(s->obs.data() + first * obs_size, shape_n, torch::kFloat32);
          next = torch::from_blob(s->next.data() + first * obs_size, shape_n, torch::kFloat32);
        }
        torch::Tensor action = torch::from_blob(s->action.data() + first, {n}, torch::kInt32).to(torch::kInt64);
        torch::Tensor reward = torch::from_blob(s->reward.data() + first, {n}, torch::kFloat32);
        torch::Tensor discount = torch::from_blob(s->discount.data() + first, {n}, torch::kFloat32);
        std::vector<double> p(static_cast<size_t>(n));
        std::vector<uint32_t> size(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) {
          p[static_cast<size_t>(i)] = s->info[first + static_cast<size_t>(i)].probability;
          size[static_cast<size_t>(i)] = s->info[first + static_cast<size_t>(i)].table_size;
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
        adam.step(10.0);  // the gradient clipped to norm 10 first
        ++updates;

        torch::Tensor abs_td = td.detach().abs();
        auto a = abs_td.accessor<float, 1>();
        for (int64_t i = 0; i < n; ++i)
          s->priorities[first + static_cast<size_t>(i)] = std::isfinite(a[i]) ? a[i] + 1e-6 : 1.0;
        if (updates % static_cast<uint64_t>(o.target_every) == 0) copy_parameters(*online, *target);
        if (updates % static_cast<uint64_t>(o.publish_every) == 0) {
          std::vector<float> flat = flatten_parameters(*online);
          in_engram([&] { host.publish(++version, flat); });
        }

      }
      double now = wall_s();
      if (progress.due(now)) {
        engram_table_info info = in_engram([&] {
          host.poll(&curve);
          return c.info(kReplayTable);
        });
        steps = steps_before + static_cast<int64_t>(info.inserts);
        solved = curve.low.size() >= 100 && Curve::mean(curve.low) >= o.solved;
        done = solved || steps >= o.steps || stop_asked();
        progress.report(now, steps, updates, curve, info.size, "replay", done);
        if (o.checkpoint_every > 0 && (done || now - saved_at >= o.checkpoint_every)) save_state();
        kept.push_back(flatten_parameters(*online));
        if (kept.size() > kKeptNetworks) kept.pop_front();
      }
    } catch (const api::Error& e) {
      // engramd went away (--socket): its tables come back from its
      // checkpoint, or empty; the network and the curve are the
      // learner's, and go on.
      if (!server_gone(e)) throw;
      // Until the session is whole again: the server may go away again
      // while the learner reopens what it holds.
      for (bool whole = false; !whole;) {
        batches.reset();
        replay.reset();
        if (!host.reconnect("the batches drawn ahead and the priorities not yet sent", [] { return false; })) throw;
        try {
          replay.emplace(c.open_table(kReplayTable));
          steps_before = steps - static_cast<int64_t>(c.info(kReplayTable).inserts);
          if (o.train) batches.emplace(o, *replay, host.socket(), obs_size);
          host.publish(++version, flatten_parameters(*online));
          whole = true;
        } catch (const api::Error& again) {
          if (!server_gone(again)) throw;
        }
      }
    }
  }
  RunEnd end;
  end.wall_s = wall_s() - t0;
  double main_cpu = thread_cpu_s() - cpu0;
  end.actors = host.stop_actors(kReplayTable);
  end.solved = solved;
  end.steps = steps;
  end.updates = updates;
  end.mean100 = Curve::mean(curve.low);
  end.mean_of = " (eps<=0.01)";
  end.episodes = curve.episodes;
  end.learner_cpu_share = in_engram.cpu() / std::max(1e-9, main_cpu);
  end.learner_wall_share = in_engram.wall() / std::max(1e-9, end.wall_s);
  {
    torch::NoGradGuard no_grad;
    BestNetwork best = best_network(o, online, kept);
    torch::save(online, o.out + "/model.pt");
    std::printf("engram-apex: model.pt is the network of %s, greedy mean %.1f over %d episodes (the best of the "
                "last %zu progress lines' and the final)\n",
                best.age == 0 ? "the end" : (std::to_string(best.age) + " progress lines before the end").c_str(),
                best.mean, kEvalEpisodes, kept.size());
  }
  finish_run("engram-apex", o, progress, "epsilon <= 0.01", end,
             SummaryFields()
                 .add("envs_per_actor", static_cast<double>(o.envs_per_actor))
                 .add("mean100_low_epsilon", Curve::mean(curve.low))
                 .add("mean100_all", Curve::mean(curve.all))
                 .add("learner_engram_wall_share", end.learner_wall_share));
  return 0;
}

int run_eval(const Options& o) {
  return eval_model<DuelingQ>(o, greedy_action);
}

}  // namespace engram::agents::apex
