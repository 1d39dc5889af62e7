// engram-impala: IMPALA with V-trace (Espeholt et al. 2018) through engram. See
// engram-impala --help, and README, "Reference agents".
#include "agents/common/host/command_line.hpp"
#include "agents/impala/roles.hpp"

int main(int argc, char** argv) {
  using namespace engram::agents::impala;
  return engram::agents::agent_main<Options>(argc, argv, "engram-impala", parse, run_eval, run_actor, run_actors, run_learner);
}
