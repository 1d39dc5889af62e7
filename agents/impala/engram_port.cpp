#include "agents/impala/engram_port.hpp"

#include <algorithm>

#include "agents/common/host/reconnect.hpp"
#include "agents/common/tables/episodes.hpp"
#include "agents/impala/tables.hpp"

namespace engram::agents::impala {

namespace {

// The queue's chunks: two per queued item, the open ones of every env's
// writer, and their spares. CartPole's T steps fit 2 KB, Breakout's 16 KB.
ArenaClass unroll_chunks(const Options& o) {
  uint64_t chunks = 4 * static_cast<uint64_t>(queue_size(o)) + 8 * static_cast<uint64_t>(o.envs) + 1024;
  return {byte_observations(o) ? 16384u : 2048u, chunks};
}

api::TableOptions queue_table(const Options& o, const std::vector<int64_t>& shape, int actions) {
  api::TableOptions q;
  q.name = kUnrollTable;
  q.max_size = static_cast<uint64_t>(queue_size(o));
  q.sampler = ENGRAM_FIFO;
  q.remover = ENGRAM_FIFO;
  q.max_times_sampled = 1;
  q.rate_limiter = api::RateLimiter::queue(queue_size(o));
  q.columns = unroll_columns(o, shape, actions);
  return q;
}

}  // namespace

MachineTables machine_tables(const Options& o, const std::vector<int64_t>& shape, int actions, size_t params) {
  MachineTables t;
  t.own = queue_table(o, shape, actions);
  // A quarter of an unroll per env of this machine: the link has as many
  // in flight, and the actors' next rollout waits in their writers. Every
  // unroll queued anywhere makes the learner's data older, and IMPALA's
  // CartPole falls with it: with this queue one rollout deep and the
  // learner's two batches, 2 of 4 runs reached a trailing-100 mean of 120
  // after 400k steps; at half a rollout and one batch 6 of 8; at a
  // quarter, 10 of 10 (202-351), at about half the env steps per second
  // (requests of 4 items; bench/NOTES.md, "Across machines").
  t.queue = static_cast<uint64_t>(std::max(1, o.envs_per_actor() * o.actors / 4));
  t.chunks = unroll_chunks(o);
  t.params = params;
  return t;
}

EngramActorPort::Session::Session(const Options& o, size_t envs, const Env& probe)
    : client(api::Client::connect(o.socket)),
      reader(client),
      unrolls(client.open_table(kUnrollTable)),
      episodes(client.open_table(kEpisodesTable)) {
  // Chunks of T steps end on an unroll's last step, so that an item
  // (T + 1 steps over two chunks) goes out the moment it is created:
  // the first chunk holds step 0 alone (started()).
  api::WriterOptions wo;
  wo.columns = unroll_columns(o, probe.observation_shape(), probe.num_actions());
  wo.chunk_length = static_cast<uint32_t>(o.unroll);
  wo.max_item_steps = static_cast<uint32_t>(o.unroll + 1);
  for (size_t j = 0; j < envs; ++j) writers.push_back(client.writer(wo));
  api::WriterOptions eo;
  eo.columns = episode_columns();
  episode_writer = client.writer(eo);
}

EngramActorPort::EngramActorPort(const Options& o, size_t envs, const Env& probe, const volatile sig_atomic_t* stop)
    : o_(o), envs_(envs), probe_(probe), stop_(stop), bytes_(probe.observation_size()) {
  // A server killed before this actor first connects (while the actors
  // of a busy machine start) is waited out like a later outage; stopped()
  // says if it never came back. One never there is said at once.
  try {
    s_ = std::make_unique<Session>(o, envs, probe);
  } catch (const api::Error& e) {
    if (!killed_server_left(e, o.socket)) throw;
    reconnect("nothing: it had not started");
  }
}

bool EngramActorPort::reconnect(const std::string& lost) {
  s_.reset();
  const std::string who = "engram-impala actor " + std::to_string(o_.actor_id);
  return agents::reconnect(who.c_str(), lost, [&] { s_ = std::make_unique<Session>(o_, envs_, probe_); },
                           [this] { return *stop_ != 0; });
}

int64_t EngramActorPort::parameters(int64_t have, int64_t want, std::vector<float>* out) {
  return s_->reader.wait(have, std::max<int64_t>(want, 1), out, [this] { return *stop_ != 0; });
}

void EngramActorPort::step(size_t j, const float* x, int32_t action, float reward, float discount, const float* logits,
                           int32_t env, int32_t rollout, bool item) {
  const void* ob = x;
  if (byte_observations(o_)) {
    for (size_t k = 0; k < bytes_.size(); ++k) bytes_[k] = static_cast<uint8_t>(x[k]);
    ob = bytes_.data();
  }
  s_->writers[j].append({ob, &action, &reward, &discount, logits, &env, &rollout});
  if (item) s_->writers[j].create_item(s_->unrolls, static_cast<uint32_t>(o_.unroll + 1), 1.0);
}

void EngramActorPort::started() {
  for (auto& w : s_->writers) w.flush(-1);  // step 0 alone in the first chunk
}

void EngramActorPort::unrolled() {
  // The queue's rate limiter holds items, not writers: without this wait
  // an actor runs on with its items queued in its request ring, and the
  // learner learns from data many updates old (CartPole rose to 250 and
  // fell back to 9). Each flush sends nothing new (the chunk ended with
  // the item) and returns once the item is in the queue.
  for (auto& w : s_->writers) w.flush(-1);
}

void EngramActorPort::episode(int32_t env, float ret, int32_t length) {
  float eps = 0;
  s_->episode_writer.append({&env, &eps, &ret, &length});
  s_->episode_writer.create_item(s_->episodes, 1, 1.0);
}

EngramLearnerPort::EngramLearnerPort(const Options& o, const std::vector<int64_t>& shape, int actions, size_t params)
    : o_(o), actions_(actions), host_("engram-impala", o, unroll_chunks(o), params) {
  host_.create_tables(queue_table(o, shape, actions));
  queue_ = host_.client().open_table(kUnrollTable);
  for (int64_t d : shape) obs_size_ *= d;
  source_ = std::make_unique<UnrollSource>(o, queue_, obs_size_, actions);
}

std::unique_ptr<Unrolls> EngramLearnerPort::next(const std::function<bool()>& stop) {
  return in_engram_([&] { return source_->next(stop); });
}

void EngramLearnerPort::publish(int64_t version, const std::vector<float>& flat) {
  in_engram_([&] { host_.publish(version, flat); });
}

void EngramLearnerPort::poll(Curve* curve, int64_t* unrolls, uint64_t* queued) {
  engram_table_info info = in_engram_([&] {
    host_.poll(curve);
    return host_.client().info(kUnrollTable);
  });
  *unrolls = static_cast<int64_t>(info.inserts);
  *queued = info.size;
}

// The actors' inserts first stop waiting for the queue: each sees SIGTERM
// at its next step.
bool EngramLearnerPort::reconnect() {
  source_.reset();
  queue_ = api::Table();
  if (!host_.reconnect("the unrolls queued since the server's last checkpoint, and those being sampled", [] { return false; })) return false;
  queue_ = host_.client().open_table(kUnrollTable);
  source_ = std::make_unique<UnrollSource>(o_, queue_, obs_size_, actions_);
  return true;
}

ActorReport EngramLearnerPort::stop() { return host_.stop_actors(kUnrollTable); }

}  // namespace engram::agents::impala
