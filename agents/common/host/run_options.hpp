// What every agent's run is told on its command line, whatever its
// algorithm: the env, the actors, the stopping point, the server, where
// outputs go, and which process this is. Each agent's Options extends it
// with its own flags; walk_flags (command_line.hpp) parses these.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace engram::agents {

struct RunOptions {
  RunOptions(int64_t default_steps, const char* default_out) : steps(default_steps), out(default_out) {}

  std::string env = "cartpole";
  int actors = 1;           // actor processes the learner starts
  int64_t steps;            // env steps in all; training stops there
  double solved = 475;      // or once the trailing-100 mean return reaches this (breakout: never)
  uint64_t seed = 1;
  std::string socket;       // empty: an embedded server on a socket in `out`
  std::string out;          // outputs: curve, plot, model, summary
  std::string eval;         // a saved model to play greedily instead of training
  int eval_episodes = 10;
  // Set by the learner for the actor processes it starts.
  std::string role = "learner";
  int actor_id = 0;
  // The command line as given (argv[1..]): the learner starts its actors
  // with it, the role added, so that they run with every flag it runs with.
  std::vector<std::string> args;
};

}  // namespace engram::agents
