// engram-apex: Ape-X DQN (Horgan et al. 2018) through engram. See
// engram-apex --help, and README, "Reference agents".
#include "agents/apex/roles.hpp"
#include "agents/common/host/command_line.hpp"

int main(int argc, char** argv) {
  using namespace engram::agents::apex;
  return engram::agents::agent_main<Options>(argc, argv, "engram-apex", parse, run_eval, run_actor, run_actors, run_learner);
}
