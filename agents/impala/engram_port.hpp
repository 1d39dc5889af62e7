// IMPALA's hand-off through engram (port.hpp): each actor process writes
// an unroll item per env into the queue table and reads the parameter
// table; the learner, on its LearnerHost, samples the queue (UnrollSource)
// and publishes parameters after every update.
#pragma once

#include <engram/engram.hpp>

#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include "agents/common/env/env.hpp"
#include "agents/common/host/actor_host.hpp"
#include "agents/common/host/learner_host.hpp"
#include "agents/common/tables/params.hpp"
#include "agents/impala/port.hpp"
#include "agents/impala/unroll_source.hpp"

namespace engram::agents::impala {

// An actor machine's tables (--role actors): the learner's queue, a
// quarter of an unroll deep per env of the machine, and its chunks.
MachineTables machine_tables(const Options& o, const std::vector<int64_t>& shape, int actions, size_t params);

// An actor process's end: a writer per env into the queue. Stopped once
// `*stop` is set (the actor's SIGTERM handler sets it). When the server
// goes away (engramd restarted), reconnect() connects again and opens a
// new session; the unrolls being written are lost.
class EngramActorPort : public ActorPort {
 public:
  EngramActorPort(const Options& o, size_t envs, const Env& probe, const volatile sig_atomic_t* stop);
  int64_t parameters(int64_t have, int64_t want, std::vector<float>* out) override;
  void step(size_t j, const float* x, int32_t action, float reward, float discount, const float* logits, int32_t env,
            int32_t rollout, bool item) override;
  void started() override;
  void unrolled() override;
  void episode(int32_t env, float ret, int32_t length) override;
  bool stopped() const override { return *stop_ != 0; }
  bool reconnect(const std::string& lost) override;

 private:
  // What the actor holds of engram; made anew after an outage.
  struct Session {
    api::Client client;
    ParamReader reader;
    api::Table unrolls, episodes;
    std::vector<api::Writer> writers;
    api::Writer episode_writer;
    Session(const Options& o, size_t envs, const Env& probe);
  };
  const Options& o_;
  size_t envs_;
  const Env& probe_;
  const volatile sig_atomic_t* stop_;
  std::unique_ptr<Session> s_;
  std::vector<uint8_t> bytes_;  // Breakout's planes as bytes
};

// The learner's end: the queue table on a LearnerHost (the embedded
// server, or --socket's), its actors the host's processes.
class EngramLearnerPort : public LearnerPort {
 public:
  EngramLearnerPort(const Options& o, const std::vector<int64_t>& shape, int actions, size_t params);
  void start() override { host_.start_actors(extra_); }
  bool reconnect() override;
  void resume(int32_t updates, const std::vector<std::string>& extra) override {
    source_->start_at(updates);
    extra_ = extra;
  }
  std::unique_ptr<Unrolls> next(const std::function<bool()>& stop) override;
  void publish(int64_t version, const std::vector<float>& flat) override;
  void poll(Curve* curve, int64_t* unrolls, uint64_t* queued) override;
  ActorReport stop() override;
  double learner_cpu_s() const override { return in_engram_.cpu(); }

 private:
  const Options& o_;
  int64_t obs_size_ = 1, actions_;
  LearnerHost host_;
  api::Table queue_;
  std::unique_ptr<UnrollSource> source_;
  CallClock in_engram_;
  std::vector<std::string> extra_;  // the actors' flags besides the learner's
};

}  // namespace engram::agents::impala
