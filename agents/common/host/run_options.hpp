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
  bool out_given = false;   // --out was on the command line (else --resume's run's OUT)
  std::string eval;         // a saved model to play greedily instead of training
  int eval_episodes = 10;
  // learner (default; it starts o.actors actors), actor (one actor
  // process; its learner or actor host starts it), or actors (an actor
  // machine: actor_host.hpp).
  std::string role = "learner";
  int actor_id = 0;  // --role actor: this actor; --role actors: the first of this machine's
  // Actor processes on every machine together (0: actor_id + actors): the
  // envs' global indices, and with them Ape-X's epsilons, run over them all.
  int all_actors = 0;
  int total_actors() const { return all_actors > 0 ? all_actors : actor_id + actors; }

  // Learner checkpoints (agents/README.md, "Checkpoints and resuming"):
  // the learner's state every `checkpoint_every` seconds and on SIGTERM
  // into OUT/checkpoints/ (0: never); `resume`, a run's OUT (its newest
  // good state) or one state file, to go on from.
  double checkpoint_every = 0;
  std::string resume;

  // Across machines (README, "Across machines"; engramd.toml(5), [remote]):
  // the learner's embedded server serves its tables to actor machines on
  // `listen`; an actor machine's server delivers its replay (or queue) and
  // episodes to the learner's at `upstream` and mirrors its parameters.
  std::string listen, upstream;
  std::string tls_cert, tls_key, tls_ca;  // PEM files, all or none
  bool insecure = false;                  // plaintext beyond loopback
  // The command line as given (argv[1..]): the learner starts its actors
  // with it, the role added, so that they run with every flag it runs with.
  std::vector<std::string> args;
};

}  // namespace engram::agents
