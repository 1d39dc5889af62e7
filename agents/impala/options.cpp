#include "agents/impala/options.hpp"

#include "agents/common/command_line.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace engram::agents::impala {

void defaults_for(const std::string& name, Options* o) {
  o->env = name;
  if (name == "breakout") {
    o->lr = 2e-3;  // 5e-4 stalled near 5 from 2M frames on (bench/NOTES.md, "IMPALA")
    o->steps = 5000000;
    o->solved = 1e9;  // no stopping rule: runs its frames
  }
}

namespace {
const char* kHelp =
    "usage: engram-impala [--env cartpole|breakout] [--actors K] [--envs E | --envs-per-actor M]\n"
    "                     [--steps N] [--updates U] [--seed S] [--socket PATH] [--out DIR]\n"
    "                     [--reproducible 1 [--micro-batch N]] [--handoff 1]\n"
    "       engram-impala --eval MODEL [--env ...] [--episodes N] [--seed S]\n"
    "Trains IMPALA: K actor processes step E envs in all and write unrolls of 20 steps\n"
    "into an engram queue; the learner trains on batches of them with V-trace. Stops at\n"
    "N env steps, after U updates, or once the trailing-100 mean return reaches the\n"
    "env's goal (CartPole: 475). Without --socket it runs its own engram server; with\n"
    "it, it uses that one (engramd). --reproducible 1 is Cleanba's mode: the learner\n"
    "trains on all E envs' rollout k, acted with the parameters of update k-1, so that\n"
    "the parameters (their hashes in DIR/param_hashes.txt) do not depend on K; the\n"
    "actors infer --micro-batch envs at a time (it must divide E/K). --handoff 1 is the\n"
    "baseline for measurements: the actors run as threads of the learner and hand\n"
    "unrolls over in memory, without engram. Writes\n"
    "DIR/curve.csv, DIR/curve.png, DIR/model.pt and DIR/summary.json.\n";

}  // namespace

bool parse(int argc, char** argv, Options* o) {
  const char* me = "engram-impala";
  int per_actor = 0;
  bool ok = walk_flags(argc, argv, me, kHelp, [&](const char* env) { defaults_for(env, o); },
                       [&](const std::string& f, const char* v) {
    if (int taken = shared_flag(me, f, v, o)) return taken > 0;
    double d = 0;
    if (!flag_number(me, f, v, &d)) return false;
    else if (f == "--envs") o->envs = static_cast<int>(d);
    else if (f == "--envs-per-actor") per_actor = static_cast<int>(d);
    else if (f == "--updates") o->updates = static_cast<int64_t>(d);
    else if (f == "--reproducible") o->reproducible = d != 0;
    else if (f == "--micro-batch") o->micro_batch = static_cast<int>(d);
    else if (f == "--handoff") o->handoff = d != 0;
    else if (f == "--lr") o->lr = d;
    else if (f == "--batch") o->batch = static_cast<int>(d);
    else if (f == "--unroll") o->unroll = static_cast<int>(d);
    else if (f == "--entropy-cost") o->entropy_cost = d;
    else return unknown_flag(me, f);
    return true;
  });
  if (!ok) return false;
  if (per_actor > 0) o->envs = per_actor * o->actors;
  if (o->actors < 1 || o->envs < 1 || o->steps < 1 || o->batch < 1 || o->unroll < 1 || o->micro_batch < 1) {
    std::fprintf(stderr, "engram-impala: --actors, --envs, --steps, --batch, --unroll and --micro-batch must be at least 1\n");
    return false;
  }
  if (o->envs % o->actors) {
    std::fprintf(stderr, "engram-impala: --envs %d does not split evenly over %d actors; make it a multiple of --actors\n",
                 o->envs, o->actors);
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
