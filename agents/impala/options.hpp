// engram-impala's command line, and the settings each environment trains
// with (Espeholt et al. 2018; Huang et al. 2023 for --reproducible; the
// results in README, "Reference agents").
#pragma once

#include <cstdint>
#include <string>

#include "agents/common/host/run_options.hpp"

namespace engram::agents::impala {

struct Options : RunOptions {
  Options() : RunOptions(1500000, "impala-out") {}
  // What the user chooses (engram-impala --help), besides RunOptions
  // (whose `actors` are K actor processes).
  int envs = 32;            // E envs in all, split evenly over the actors
  int64_t updates = 0;      // stop after this many updates (0: no limit)
  bool reproducible = false;  // Cleanba's mode (README, "Reference agents")
  int micro_batch = 1;        // --reproducible: envs per forward pass in the actors
  bool handoff = false;       // the baseline: actors as threads, no engram (handoff_port.hpp)

  // Per environment (see defaults_for).
  int unroll = 20;         // T: steps per unroll, plus the bootstrap step
  int batch = 32;          // B: unrolls per update (--reproducible: E)
  double lr = 1e-3;        // Adam
  float gamma = 0.99f;
  double baseline_cost = 0.5, entropy_cost = 0.01;
  double clip_grad_norm = 40;

  // Envs per actor process: E over the actors of every machine.
  int envs_per_actor() const { return total_actors() > 0 ? envs / total_actors() : envs; }
  int micro() const { return reproducible ? micro_batch : envs_per_actor(); }
};

void defaults_for(const std::string& name, Options* o);
// Parses argv into *o; returns false after printing why (or the help).
bool parse(int argc, char** argv, Options* o);

}  // namespace engram::agents::impala
