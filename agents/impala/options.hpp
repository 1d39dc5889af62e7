// engram-impala's command line, and the settings each environment trains
// with (Espeholt et al. 2018; Huang et al. 2023 for --reproducible; the
// results in README, "Reference agents").
#pragma once

#include <cstdint>
#include <string>

namespace engram::agents::impala {

struct Options {
  // What the user chooses (engram-impala --help).
  std::string env = "cartpole";
  int actors = 1;           // K actor processes
  int envs = 32;            // E envs in all, split evenly over the actors
  int64_t steps = 1500000;  // env steps in all; training stops there or when solved
  int64_t updates = 0;      // stop after this many updates (0: no limit)
  uint64_t seed = 1;
  std::string socket;       // empty: an embedded server on a socket in `out`
  std::string out = "impala-out";
  std::string eval;         // a saved model to play greedily instead of training
  int eval_episodes = 10;
  bool reproducible = false;  // Cleanba's mode (README, "Reference agents")
  int micro_batch = 1;        // --reproducible: envs per forward pass in the actors
  bool handoff = false;       // the baseline: actors as threads, no engram (handoff.hpp)
  // Set by the learner for the actor processes it starts.
  std::string role = "learner";
  int actor_id = 0;

  // Per environment (see defaults_for).
  int unroll = 20;         // T: steps per unroll, plus the bootstrap step
  int batch = 32;          // B: unrolls per update (--reproducible: E)
  double lr = 1e-3;        // Adam
  float gamma = 0.99f;
  double baseline_cost = 0.5, entropy_cost = 0.01;
  double clip_grad_norm = 40;
  double solved = 475;     // trailing-100 mean return that stops training

  int envs_per_actor() const { return actors > 0 ? envs / actors : envs; }
  int micro() const { return reproducible ? micro_batch : envs_per_actor(); }
};

void defaults_for(const std::string& name, Options* o);
// Parses argv into *o; returns false after printing why (or the help).
bool parse(int argc, char** argv, Options* o);

}  // namespace engram::agents::impala
