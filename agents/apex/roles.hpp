// The processes of engram-apex: one learner (which starts the actors) and
// K actors, and the evaluation of a saved model.
#pragma once

#include "agents/apex/options.hpp"

namespace engram::agents::apex {

int run_learner(const Options& o);
int run_actor(const Options& o);
int run_eval(const Options& o);

// The tables' names and columns, shared by both sides.
inline constexpr const char* kReplayTable = "replay";

}  // namespace engram::agents::apex
