// The processes of engram-impala: one learner (which starts the actors)
// and K actors, and the evaluation of a saved model.
#pragma once

#include "agents/impala/options.hpp"

namespace engram::agents::impala {

int run_learner(const Options& o);
int run_actor(const Options& o);
int run_actors(const Options& o);  // an actor machine (actor_host.hpp)
int run_eval(const Options& o);

}  // namespace engram::agents::impala
