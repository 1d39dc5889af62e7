#include "agents/apex/options.hpp"

#include "agents/common/host/command_line.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace engram::agents::apex {

void defaults_for(const std::string& name, Options* o) {
  if (name == "breakout") {
    o->lr = 2.5e-4;
    o->batch = 64;
    o->capacity = 200000;
    o->min_replay = 5000;
    // The learner (one update per 25.6 frames) sets the pace: at 4 samples
    // per insert it held the actors to 2k frames/s, at 2 the score at 1M
    // frames came out at 7.5-13.3 (16 of 21 seeds at 10 or more); 2.5
    // gave 11.7-13.3 against 2's 10.1-11.0 on the same seeds and day, at
    // 5.6k-6.3k frames/s (bench/results/apex-breakout-spi.json).
    o->samples_per_insert = 2.5;
    // An update takes about 3.5 ms: the owner's wake-up per update is a
    // small part of it (the learner's engram calls are 2.1-2.2% of its CPU
    // at 1, bench/results/apex-breakout.json).
    o->batches_per_sample = 1;
    o->target_every = 1000;
    o->steps = 1000000;
  }
}

namespace {
const char* kHelp =
    "usage: engram-apex [--env cartpole|breakout] [--actors K] [--envs-per-actor M] [--steps N]\n"
    "                   [--seed S] [--socket PATH] [--out DIR]\n"
    "Trains Ape-X DQN: K actor processes of M envs each write n-step transitions into\n"
    "engram, a learner samples them by priority. Stops at N env steps, or once the\n"
    "trailing-100 mean return of the envs with epsilon <= 0.01 reaches the env's goal\n"
    "(CartPole: 475). For measurements: --free-running 1 (no sample-to-insert ratio:\n"
    "nobody waits) and --learner 0 (actors alone, no training). --actors 0 starts no\n"
    "actor: actors in any language connect to the socket (DIR/engram.sock without\n"
    "--socket), e.g. bindings/python/examples/apex_actor.py.\n"
    "Tuning, each env's defaults in agents/apex/options.hpp and options.cpp: --batch B,\n"
    "--batches-per-sample K (the learner's batches drawn by one sample), --lr,\n"
    "--samples-per-insert, --target-every (updates between target-network copies).\n";

}  // namespace

bool parse(int argc, char** argv, Options* o) {
  const char* me = "engram-apex";
  bool ok = walk_flags(argc, argv, me, kHelp, o, [&](const char* env) { defaults_for(env, o); },
                       [&](const std::string& f, const char* v) {
    if (f == "--envs-per-actor") return flag_integer(me, f, v, 1, kMaxCount, &o->envs_per_actor);
    if (f == "--lr") return flag_real(me, f, v, false, &o->lr);
    if (f == "--batch") return flag_integer(me, f, v, 1, kMaxCount, &o->batch);
    if (f == "--batches-per-sample") return flag_integer(me, f, v, 1, kMaxCount, &o->batches_per_sample);
    if (f == "--samples-per-insert") return flag_real(me, f, v, false, &o->samples_per_insert);
    if (f == "--target-every") return flag_integer(me, f, v, 1, 1e9, &o->target_every);
    if (f == "--learner") return flag_switch(me, f, v, &o->train);
    if (f == "--free-running") return flag_switch(me, f, v, &o->free_running);
    return unknown_flag(me, f);
  });
  return ok;
}

}  // namespace engram::agents::apex
