// engram-impala: IMPALA with V-trace (Espeholt et al. 2018) through engram. See
// engram-impala --help, and README, "Reference agents".
#include <cstdio>
#include <cstdlib>
#include <exception>

#include <engram/engram.hpp>

#include "agents/impala/roles.hpp"
#include "agents/common/children.hpp"

int main(int argc, char** argv) {
  using namespace engram::agents::impala;
  engram::agents::restart_with_one_blas_thread(argv);
  Options o;
  if (!parse(argc, argv, &o)) return 2;
  try {
    if (!o.eval.empty()) return run_eval(o);
    return o.role == "actor" ? run_actor(o) : run_learner(o);
  } catch (const engram::api::Error& e) {
    std::fprintf(stderr, "engram-impala %s: %s\n", o.role.c_str(), e.what());
    return e.code() == ENGRAM_E_DISCONNECTED ? 3 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "engram-impala %s: %s\n", o.role.c_str(), e.what());
    return 1;
  }
}
