#include "agents/impala/options.hpp"

#include "agents/common/host/command_line.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>

namespace engram::agents::impala {

namespace {
const char* kHelp =
    "usage: engram-impala [--env cartpole|breakout] [--actors K] [--envs E | --envs-per-actor M]\n"
    "                     [--steps N] [--updates U] [--seed S] [--socket PATH] [--out DIR]\n"
    "                     [--reproducible 1 [--micro-batch N]] [--handoff 1]\n"
    "Trains IMPALA: K actor processes step E envs in all and write unrolls of 20 steps\n"
    "into an engram queue; the learner trains on batches of them with V-trace. Stops at\n"
    "N env steps, after U updates, or once the trailing-100 mean return reaches the\n"
    "env's goal (CartPole: 475). --reproducible 1 is Cleanba's mode: the learner\n"
    "trains on all E envs' rollout k, acted with the parameters of update k-1, so that\n"
    "the parameters (their hashes in DIR/param_hashes.txt) do not depend on K; the\n"
    "actors infer --micro-batch envs at a time (it must divide E/K). --handoff 1 is the\n"
    "baseline for measurements: the actors run as threads of the learner and hand\n"
    "unrolls over in memory, without engram.\n"
    "Tuning, each env's defaults in agents/impala/options.hpp and options.cpp: --batch B\n"
    "(unrolls per update), --unroll T (steps per unroll), --lr, --entropy-cost.\n";

}  // namespace

void defaults_for(const std::string& name, Options* o) {
  if (name == "breakout") {
    o->lr = 2e-3;  // 5e-4 stalled near 5 from 2M frames on (bench/NOTES.md, "IMPALA")
    o->steps = 5000000;
  }
}

bool parse(int argc, char** argv, Options* o) {
  const char* me = "engram-impala";
  int per_actor = 0;
  bool ok = walk_flags(argc, argv, me, kHelp, o, [&](const char* env) { defaults_for(env, o); },
                       [&](const std::string& f, const char* v) {
    if (f == "--envs") return flag_integer(me, f, v, 1, kMaxCount, &o->envs);
    if (f == "--envs-per-actor") return flag_integer(me, f, v, 1, kMaxCount, &per_actor);
    if (f == "--updates") return flag_integer(me, f, v, 0, 1e15, &o->updates);
    if (f == "--reproducible") return flag_switch(me, f, v, &o->reproducible);
    if (f == "--micro-batch") return flag_integer(me, f, v, 1, kMaxCount, &o->micro_batch);
    if (f == "--handoff") return flag_switch(me, f, v, &o->handoff);
    if (f == "--lr") return flag_real(me, f, v, false, &o->lr);
    if (f == "--batch") return flag_integer(me, f, v, 1, kMaxCount, &o->batch);
    if (f == "--unroll") return flag_integer(me, f, v, 1, kMaxCount, &o->unroll);
    if (f == "--entropy-cost") return flag_real(me, f, v, true, &o->entropy_cost);
    return unknown_flag(me, f);
  });
  if (!ok) return false;
  // A learner that listens may leave its actors to other machines.
  if (o->actors < 1 && (o->role != "learner" || o->listen.empty())) {
    std::fprintf(stderr, "engram-impala: --actors must be at least 1 (0 only for a learner with --listen)\n");
    return false;
  }
  if (o->reproducible && (!o->listen.empty() || !o->upstream.empty())) {
    std::fprintf(stderr, "engram-impala: --reproducible acts rollout k with exactly the parameters of update k-1, "
                         "and a mirror keeps only the newest: run it on one machine, without --listen or --upstream\n");
    return false;
  }
  const int all = o->total_actors();
  if (per_actor > 0) {
    if (static_cast<double>(per_actor) * all > kMaxCount) {
      std::fprintf(stderr, "engram-impala: --envs-per-actor %d times %d actors is more than %.0f envs\n", per_actor,
                   all, kMaxCount);
      return false;
    }
    o->envs = per_actor * std::max(all, 1);
  }
  if (all > 0 && o->envs % all) {
    std::fprintf(stderr, "engram-impala: --envs %d does not split evenly over %d actors; make it a multiple of the "
                         "actors (--actors, or --all-actors across machines)\n", o->envs, all);
    return false;
  }
  if (o->reproducible && o->envs_per_actor() % o->micro_batch) {
    std::fprintf(stderr, "engram-impala: --micro-batch %d must divide the envs per actor (%d)\n", o->micro_batch,
                 o->envs_per_actor());
    return false;
  }
  if (o->handoff && (o->reproducible || !o->socket.empty())) {
    std::fprintf(stderr, "engram-impala: --handoff 1 (actors as threads, no engram) goes with neither --reproducible nor --socket\n");
    return false;
  }
  if (o->reproducible) o->batch = o->envs;  // one update learns from one whole rollout
  return true;
}

}  // namespace engram::agents::impala
