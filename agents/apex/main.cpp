// engram-apex: Ape-X DQN (Horgan et al. 2018) through engram. See
// engram-apex --help, and README, "Reference agents".
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>

#include <engram/engram.hpp>

#include "agents/apex/roles.hpp"

int main(int argc, char** argv) {
  using namespace engram::agents::apex;
  // OpenBLAS sizes its thread pool when it loads, before main: one thread
  // per process (nets.hpp, single_threaded) needs the variable set before then,
  // so the first start sets it and starts again.
  if (!std::getenv("OPENBLAS_NUM_THREADS")) {
    ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
    ::setenv("OMP_NUM_THREADS", "1", 0);
    ::execv("/proc/self/exe", argv);
  }
  Options o;
  if (!parse(argc, argv, &o)) return 2;
  try {
    if (!o.eval.empty()) return run_eval(o);
    return o.role == "actor" ? run_actor(o) : run_learner(o);
  } catch (const engram::api::Error& e) {
    std::fprintf(stderr, "engram-apex %s: %s\n", o.role.c_str(), e.what());
    return e.code() == ENGRAM_E_DISCONNECTED ? 3 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "engram-apex %s: %s\n", o.role.c_str(), e.what());
    return 1;
  }
}
