// The processes of engram-apex: one learner (which starts the actors), K
// actors, an actor machine's host (actor_host.hpp), and the evaluation
// of a saved model.
#pragma once

#include "agents/apex/options.hpp"

namespace engram::agents::apex {

int run_learner(const Options& o);
int run_actor(const Options& o);
int run_actors(const Options& o);
int run_eval(const Options& o);

// The tables' names and columns, shared by both sides.
inline constexpr const char* kReplayTable = "replay";

}  // namespace engram::agents::apex
