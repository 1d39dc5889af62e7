// IMPALA's hand-off in the learner's own memory (port.hpp), the baseline
// beside engram: actors as threads of the learner's process,
// handing unrolls over through a bounded queue in memory (a mutex and two
// condition variables) and reading parameters from a shared vector. The
// same actor loop, the same copies of each step (into the unroll being
// built, and out of it into the learner's batch), no server: the ratio of
// the two runs' frames/s is what going through engram costs.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "agents/impala/port.hpp"
#include "agents/impala/tables.hpp"
#include "agents/impala/unrolls.hpp"

namespace engram::agents::impala {

// The queue and the parameters both ends share.
struct HandoffQueue {
  const Options& o;
  int64_t obs_size, actions;
  std::mutex mu;
  std::condition_variable not_full, not_empty, params_moved;
  std::deque<std::unique_ptr<Unrolls>> queue;  // one unroll each
  int64_t pushed = 0;                          // unrolls in all
  std::vector<float> params;
  int64_t version = 0;
  std::vector<float> returns;  // finished episodes, not yet taken
  bool stop = false;

  HandoffQueue(const Options& opts, int64_t obs, int64_t acts) : o(opts), obs_size(obs), actions(acts) {}
  void publish(int64_t v, const std::vector<float>& p) {
    std::lock_guard<std::mutex> lk(mu);
    params = p;
    version = v;
    params_moved.notify_all();
  }
  void stop_all() {
    std::lock_guard<std::mutex> lk(mu);
    stop = true;
    not_full.notify_all();
    not_empty.notify_all();
    params_moved.notify_all();
  }
  // `batch` unrolls, in the order they came; nullptr once stopped, or if
  // fewer came within `wait`.
  std::unique_ptr<Unrolls> take(int64_t batch, std::chrono::milliseconds wait) {
    std::vector<std::unique_ptr<Unrolls>> got;
    {
      std::unique_lock<std::mutex> lk(mu);
      if (!not_empty.wait_for(lk, wait, [&] { return stop || static_cast<int64_t>(queue.size()) >= batch; }) || stop)
        return nullptr;
      for (int64_t i = 0; i < batch; ++i) {
        got.push_back(std::move(queue.front()));
        queue.pop_front();
      }
      not_full.notify_all();
    }
    auto b = std::make_unique<Unrolls>(batch, o.unroll + 1, obs_size, actions, byte_observations(o));
    for (int64_t i = 0; i < batch; ++i) b->copy_item(*got[static_cast<size_t>(i)], 0, i);
    return b;
  }
};

// An actor thread's end.
class HandoffActorPort : public ActorPort {
 public:
  HandoffActorPort(HandoffQueue& h, size_t envs) : h_(h), building_(envs) {
    for (auto& u : building_) u = fresh();
    filled_.assign(envs, 0);
  }
  int64_t parameters(int64_t have, int64_t want, std::vector<float>* out) override {
    std::unique_lock<std::mutex> lk(h_.mu);
    h_.params_moved.wait(lk, [&] { return h_.stop || (h_.version > 0 && h_.version >= want); });
    if (h_.stop || h_.version == have) return have;
    *out = h_.params;
    return h_.version;
  }
  void step(size_t j, const float* x, int32_t action, float reward, float discount, const float* logits, int32_t env,
            int32_t rollout, bool item) override {
    building_[j]->set_step(0, filled_[j]++, x, action, reward, discount, logits, env, rollout);
    if (!item) return;
    // The unroll goes out; its last step starts the next one.
    std::unique_ptr<Unrolls> next = fresh();
    next->copy_steps(*building_[j], 0, h_.o.unroll, 0, 0, 1);
    std::unique_lock<std::mutex> lk(h_.mu);
    h_.not_full.wait(lk, [&] { return h_.stop || static_cast<int64_t>(h_.queue.size()) < queue_size(h_.o); });
    if (h_.stop) return;
    h_.queue.push_back(std::move(building_[j]));
    ++h_.pushed;
    h_.not_empty.notify_one();
    lk.unlock();
    building_[j] = std::move(next);
    filled_[j] = 1;
  }
  void episode(int32_t, float ret, int32_t) override {
    std::lock_guard<std::mutex> lk(h_.mu);
    h_.returns.push_back(ret);
  }
  bool stopped() const override {
    std::lock_guard<std::mutex> lk(h_.mu);
    return h_.stop;
  }

 private:
  std::unique_ptr<Unrolls> fresh() const {
    return std::make_unique<Unrolls>(1, h_.o.unroll + 1, h_.obs_size, h_.actions, byte_observations(h_.o));
  }
  HandoffQueue& h_;
  std::vector<std::unique_ptr<Unrolls>> building_;
  std::vector<int64_t> filled_;
};

// The learner's end: its actors are threads of its own process.
class HandoffLearnerPort : public LearnerPort {
 public:
  HandoffLearnerPort(const Options& o, int64_t obs_size, int actions) : o_(o), h_(o, obs_size, actions) {}
  ~HandoffLearnerPort() override { (void)stop(); }
  void start() override {
    counts_.resize(static_cast<size_t>(o_.actors));
    for (int k = 0; k < o_.actors; ++k)
      threads_.emplace_back([this, k] {
        Options mine = o_;
        mine.all_actors = o_.total_actors();
        mine.actor_id = k;
        HandoffActorPort port(h_, static_cast<size_t>(o_.envs_per_actor()));
        Counts& c = counts_[static_cast<size_t>(k)];
        double wall0 = wall_s(), cpu0 = thread_cpu_s();
        act(mine, port, &c.counts);
        c.wall = wall_s() - wall0;
        c.cpu = thread_cpu_s() - cpu0;
      });
  }
  void resume(int32_t, const std::vector<std::string>&) override {
    throw std::runtime_error("--handoff 1 (actors as threads) does not resume a reproducible run; drop --handoff");
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
  HandoffQueue h_;
  std::vector<Counts> counts_;
  std::vector<std::thread> threads_;
};

}  // namespace engram::agents::impala
