// An actor machine (--role actors; README, "Across machines"): this
// machine's actor processes, writing and reading through a server of its
// own whose tables link to the learner's server on another machine
// (--upstream HOST:PORT, engram(7), ACROSS MACHINES):
//   TABLE     the agent's (replay, unrolls), upstream: a FIFO queue that the
//             link empties as it delivers. While the learner's rate limiter
//             holds the link, it fills, and its queue rate limiter holds
//             this machine's actors: one learner paces every machine.
//   episodes  upstream as well, for the learner's curve.
//   params    a mirror of the learner's parameter table: each version
//             crosses the network once, however many actors here read it.
// Actors in any language join on the server's socket (OUT/engram.sock)
// as they would join a learner's. With --socket instead of --upstream,
// an engramd whose config declares those tables takes the server's place.
#pragma once

#include <engram/engram.hpp>

#include <cstdint>

#include "agents/common/host/run_options.hpp"
#include "agents/common/host/server_config.hpp"

namespace engram::agents {

struct MachineTables {
  api::TableOptions own;  // the agent's table as the learner creates it: its name and columns
  uint64_t queue;         // the items it may hold here (its max_size and queue rate limiter)
  ArenaClass chunks;      // its blocks
  size_t params;          // floats in the parameter table
};

// Runs the machine: starts o.actors actors (ids o.actor_id.. of
// o.total_actors()), says every 10 s what they wrote, and on SIGTERM or
// SIGINT (or once every actor has ended: exit status 1) stops them and
// says how many frames they stepped.
int run_actor_machine(const char* program, const RunOptions& o, const MachineTables& t);

}  // namespace engram::agents
