// What the agents' programs share: a command line of "--flag value" pairs
// (with --help, numbers checked, and the env's defaults applied before the
// other flags), and main's dispatch with its exit codes: 0, 1 on an error,
// 2 on a bad command line, 3 when the engram server went away.
#pragma once

#include <engram/engram.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "agents/common/blas_setup.hpp"
#include "agents/common/children.hpp"

namespace engram::agents {

// Walks argv[1..]: first every `--env NAME`, to on_env(NAME) (an env's
// defaults, which the other flags then override), then every pair, to
// on_flag(flag, value), which returns false after saying why. --help
// prints `help`; a flag without a value is refused. False: do not run.
template <typename OnEnv, typename OnFlag>
bool walk_flags(int argc, char** argv, const char* program, const char* help, OnEnv on_env, OnFlag on_flag) {
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], "--env")) {
      if (std::strcmp(argv[i + 1], "cartpole") && std::strcmp(argv[i + 1], "breakout")) {
        std::fprintf(stderr, "%s: --env is cartpole or breakout, not \"%s\"\n", program, argv[i + 1]);
        return false;
      }
      on_env(argv[i + 1]);
    }
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    if (f == "--help" || f == "-h") {
      std::fputs(help, stdout);
      return false;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s: %s needs a value (--help)\n", program, f.c_str());
      return false;
    }
    const char* v = argv[++i];
    if (f != "--env" && !on_flag(f, v)) return false;
  }
  return true;
}

// `v` as a number, or false after saying that `flag` wants one.
inline bool flag_number(const char* program, const std::string& flag, const char* v, double* out) {
  char* end = nullptr;
  *out = std::strtod(v, &end);
  if (end == v || *end) {
    std::fprintf(stderr, "%s: %s wants a number, not \"%s\"\n", program, flag.c_str(), v);
    return false;
  }
  return true;
}

// The flags both agents take, into the Options fields of the same names
// (each agent's Options has them). 1: taken; 0: not one of them; -1: a
// value that is not a number, said.
template <typename Options>
int shared_flag(const char* program, const std::string& f, const char* v, Options* o) {
  if (f == "--socket") o->socket = v;
  else if (f == "--out") o->out = v;
  else if (f == "--eval") o->eval = v;
  else if (f == "--role") o->role = v;
  else if (f != "--actors" && f != "--steps" && f != "--seed" && f != "--episodes" && f != "--actor-id") return 0;
  else {
    double d = 0;
    if (!flag_number(program, f, v, &d)) return -1;
    if (f == "--actors") o->actors = static_cast<int>(d);
    else if (f == "--steps") o->steps = static_cast<int64_t>(d);
    else if (f == "--seed") o->seed = static_cast<uint64_t>(d);
    else if (f == "--episodes") o->eval_episodes = static_cast<int>(d);
    else o->actor_id = static_cast<int>(d);
  }
  return 1;
}

inline bool unknown_flag(const char* program, const std::string& flag) {
  std::fprintf(stderr, "%s: unknown flag %s (--help)\n", program, flag.c_str());
  return false;
}

// An agent's main: OpenBLAS set up (restart_with_blas_settings), the
// command line, then --eval, an actor (--role actor) or the learner.
template <typename Options, typename Parse, typename Eval, typename Actor, typename Learner>
int agent_main(int argc, char** argv, const char* program, Parse parse, Eval eval, Actor actor, Learner learner) {
  restart_with_blas_settings(program, argv);
  Options o;
  if (!parse(argc, argv, &o)) return 2;
  try {
    if (!o.eval.empty()) return eval(o);
    return o.role == "actor" ? actor(o) : learner(o);
  } catch (const api::Error& e) {
    std::fprintf(stderr, "%s %s: %s\n", program, o.role.c_str(), e.what());
    return e.code() == ENGRAM_E_DISCONNECTED ? 3 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s %s: %s\n", program, o.role.c_str(), e.what());
    return 1;
  }
}

}  // namespace engram::agents
