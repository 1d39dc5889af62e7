// engram-apex's command line, and the settings each environment trains
// with (Horgan et al. 2018; the results in README, "Reference agents").
#pragma once

#include <cstdint>
#include <string>

#include "agents/common/host/run_options.hpp"

namespace engram::agents::apex {

struct Options : RunOptions {
  Options() : RunOptions(300000, "apex-out") {}
  // What the user chooses (engram-apex --help), besides RunOptions.
  int envs_per_actor = 16;
  bool train = true;          // false: actors alone, the learner only watches (--learner 0)
  bool free_running = false;  // no sample-to-insert ratio: a MinSize limiter (--free-running 1)

  // Per environment (see defaults_for).
  double lr = 1e-3;
  int batch = 128;
  // The learner's batches drawn by one sample (learner.cpp, Batches):
  // CartPole's learner spends 4.0-4.4% of its CPU in engram calls at 4,
  // 4.6-4.8% at 2 and 5.7-6.2% at 1, solving 4, 5 and 4 of five seeds
  // within 300k steps (bench/results/apex-batches-per-sample.json).
  int batches_per_sample = 4;
  float gamma = 0.99f;
  int n_step = 3;
  uint64_t capacity = 100000;
  int64_t min_replay = 1000;
  double samples_per_insert = 8;
  // Updates between copies to the target network. CartPole's: at 250, runs
  // solved within 300k steps in about half the seeds, ending many at
  // 463-472; at 100, ten of ten (bench/NOTES.md, "Ape-X CartPole's
  // target network").
  int target_every = 100;
  int publish_every = 20;   // updates between parameter publishes
  int pull_every = 400;     // an actor's frames between parameter pulls
  double alpha = 0.6, beta = 0.4;
};

// The settings of env `name` (cartpole, breakout) over *o's defaults.
void defaults_for(const std::string& name, Options* o);
// Parses argv into *o; returns false after printing why (or the help).
bool parse(int argc, char** argv, Options* o);

}  // namespace engram::agents::apex
