// What the agents' programs share: a command line of "--flag value" pairs
// (with --help, numbers checked, and the env's defaults applied before the
// other flags), and main's dispatch with its exit codes: 0, 1 on an error,
// 2 on a bad command line, 3 when the engram server went away.
#pragma once

#include <engram/engram.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "agents/common/host/children.hpp"
#include "agents/common/host/learner_state.hpp"
#include "agents/common/host/run_options.hpp"
#include "agents/common/nets/blas_setup.hpp"

namespace engram::agents {

inline int shared_flag(const char* program, const std::string& f, const char* v, RunOptions* o);
inline bool check_run_options(const char* program, const RunOptions& o);

// Walks argv[1..]: first the last `--env NAME`, into run->env and to
// on_env(NAME) (an env's defaults, which the other flags then override),
// then every pair: RunOptions' flags into *run, the others to
// on_flag(flag, value), which returns false after saying why. --help
// prints `help` and the flags every agent takes; a flag without a value
// is refused. False: do not run.
template <typename OnEnv, typename OnFlag>
bool walk_flags(int argc, char** argv, const char* program, const char* help, RunOptions* run, OnEnv on_env,
                OnFlag on_flag) {
  // The last --env wins, as other flags do (scripts/train.sh puts its
  // --env cartpole before the user's): each env's defaults are applied
  // once, so breakout's never stay under a later --env cartpole.
  const char* env = nullptr;
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], "--env")) {
      if (std::strcmp(argv[i + 1], "cartpole") && std::strcmp(argv[i + 1], "breakout")) {
        std::fprintf(stderr, "%s: --env is cartpole or breakout, not \"%s\"\n", program, argv[i + 1]);
        return false;
      }
      env = argv[++i];
    }
  if (env) {
    run->env = env;
    if (!std::strcmp(env, "breakout")) run->solved = 1e9;  // no stopping rule: runs its frames
    on_env(env);
  }
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    if (f == "--help" || f == "-h") {
      std::fputs(help, stdout);
      std::printf("Writes DIR/curve.csv, DIR/curve.png, DIR/model.pt and DIR/summary.json. Without\n"
                  "--socket it runs its own engram server (on DIR/engram.sock); with it, it uses that\n"
                  "one (engramd). To play a saved model greedily instead of training:\n"
                  "       %s --eval MODEL [--env ...] [--episodes N] [--seed S]\n"
                  "Across machines (README, \"Across machines\"): the learner's machine adds\n"
                  "--listen ADDR:PORT (--actors 0 for none of its own); each actor machine runs\n"
                  "       %s --role actors --upstream HOST:PORT --actors K [--actor-id FIRST]\n"
                  "           [--all-actors N] [the learner's --env and agent flags]\n"
                  "whose server delivers to the learner's and mirrors its parameters; actors in\n"
                  "any language may join it on DIR/engram.sock. Beyond loopback both sides need\n"
                  "--tls-cert FILE --tls-key FILE --tls-ca FILE (PEM), or --insecure 1.\n"
                  "Checkpoints (agents/README.md): --checkpoint-every SECONDS saves the learner's\n"
                  "state (and the tables) into DIR/checkpoints/, and on SIGTERM; --resume DIR goes\n"
                  "on from the newest good one of the run in DIR (or from one state file).\n",
                  program, program);
      return false;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s: %s has no value after it (flags are \"--flag value\" pairs; --help)\n", program,
                   f.c_str());
      return false;
    }
    const char* v = argv[++i];
    if (f == "--env") continue;
    if (int taken = shared_flag(program, f, v, run)) {
      if (taken < 0) return false;
      continue;
    }
    if (!on_flag(f, v)) return false;
  }
  if (!run->resume.empty() && !run->out_given) run->out = LearnerStates::run_dir(run->resume);
  return check_run_options(program, *run);
}

// The values flags take. A number that does not fit its field (1e20 into an
// int), a fraction where a count is meant, a negative seed or a NaN rate are
// refused here, naming the flag and what it takes: cast, each would be
// undefined behaviour or a run that fails minutes later (--target-every 0
// divided by zero in the learner).

// `v` as a whole number in lo..hi into *out ("1e6" is one), or false after
// saying what `flag` takes.
template <typename T>
bool flag_integer(const char* program, const std::string& flag, const char* v, double lo, double hi, T* out) {
  char* end = nullptr;
  double d = std::strtod(v, &end);
  if (end == v || *end || !(d >= lo && d <= hi) || d != static_cast<double>(static_cast<int64_t>(d))) {
    std::fprintf(stderr, "%s: %s takes a whole number from %.0f to %.0f, not \"%s\"\n", program, flag.c_str(), lo, hi,
                 v);
    return false;
  }
  *out = static_cast<T>(d);
  return true;
}

// `v` as a finite number above 0 (or from 0, with zero_ok) into *out.
inline bool flag_real(const char* program, const std::string& flag, const char* v, bool zero_ok, double* out) {
  char* end = nullptr;
  double d = std::strtod(v, &end);
  if (end == v || *end || !std::isfinite(d) || d < 0 || (d == 0 && !zero_ok)) {
    std::fprintf(stderr, "%s: %s takes a finite number %s 0, not \"%s\"\n", program, flag.c_str(),
                 zero_ok ? "of at least" : "above", v);
    return false;
  }
  *out = d;
  return true;
}

// 0 or 1, for the flags that switch something on or off.
inline bool flag_switch(const char* program, const std::string& flag, const char* v, bool* out) {
  int b = 0;
  if (!flag_integer(program, flag, v, 0, 1, &b)) return false;
  *out = b != 0;
  return true;
}

// Counts of envs, actors, batches: far above what two cores can use, and
// far below what an int holds.
constexpr double kMaxCount = 1 << 20;

// The flags of RunOptions, which every agent takes. 1: taken; 0: not one
// of them; -1: a bad value, said.
inline int shared_flag(const char* program, const std::string& f, const char* v, RunOptions* o) {
  bool ok = true;
  if (f == "--socket") o->socket = v;
  else if (f == "--out") {
    o->out = v;
    o->out_given = true;
  } else if (f == "--checkpoint-every") ok = flag_real(program, f, v, true, &o->checkpoint_every);
  else if (f == "--resume") o->resume = v;
  else if (f == "--eval") o->eval = v;
  else if (f == "--role") o->role = v;
  else if (f == "--actors") ok = flag_integer(program, f, v, 0, kMaxCount, &o->actors);
  else if (f == "--steps") ok = flag_integer(program, f, v, 1, 1e15, &o->steps);
  else if (f == "--seed") ok = flag_integer(program, f, v, 0, 9007199254740992.0, &o->seed);  // 2^53: exact in a double
  else if (f == "--episodes") ok = flag_integer(program, f, v, 1, kMaxCount, &o->eval_episodes);
  else if (f == "--actor-id") ok = flag_integer(program, f, v, 0, kMaxCount, &o->actor_id);
  else if (f == "--all-actors") ok = flag_integer(program, f, v, 1, kMaxCount, &o->all_actors);
  else if (f == "--listen") o->listen = v;
  else if (f == "--upstream") o->upstream = v;
  else if (f == "--tls-cert") o->tls_cert = v;
  else if (f == "--tls-key") o->tls_key = v;
  else if (f == "--tls-ca") o->tls_ca = v;
  else if (f == "--insecure") ok = flag_switch(program, f, v, &o->insecure);
  else return 0;
  return ok ? 1 : -1;
}

// The flags of RunOptions that only make sense together, checked once all
// are read. The addresses and TLS files themselves are checked by the
// server that uses them ([remote] in engramd.toml(5)), naming its key.
inline bool check_run_options(const char* program, const RunOptions& o) {
  auto refuse = [&](const std::string& why) {
    std::fprintf(stderr, "%s: %s\n", program, why.c_str());
    return false;
  };
  if (o.role != "learner" && o.role != "actor" && o.role != "actors")
    return refuse("--role is learner (the default), actor or actors (an actor machine)");
  if (!o.listen.empty() && o.role != "learner") return refuse("--listen is the learner's; an actor machine takes --upstream");
  if (!o.listen.empty() && !o.socket.empty())
    return refuse("--listen serves the embedded server's tables; with --socket, set [remote] listen in that engramd's config");
  if (!o.upstream.empty() && o.role != "actors") return refuse("--upstream goes with --role actors (an actor machine)");
  if (o.role == "actors" && o.upstream.empty() == o.socket.empty())
    return refuse("--role actors takes --upstream HOST:PORT (its own server, fed to the learner's) or --socket PATH "
                  "(an engramd whose tables are declared upstream in its config), not both");
  bool any_tls = !o.tls_cert.empty() || !o.tls_key.empty() || !o.tls_ca.empty();
  if (any_tls && (o.tls_cert.empty() || o.tls_key.empty() || o.tls_ca.empty()))
    return refuse("--tls-cert, --tls-key and --tls-ca go together: all three or none");
  if ((any_tls || o.insecure) && o.listen.empty() && o.upstream.empty())
    return refuse("--tls-* and --insecure are for --listen or --upstream");
  if (any_tls && o.insecure) return refuse("--insecure 1 is plaintext; it does not go with --tls-*");
  if (!o.resume.empty() && o.role == "actors")
    return refuse("--resume is the learner's (it restarts its actors); an actor machine's actors reconnect");
  if (!o.resume.empty() && o.role == "learner") {
    std::error_code e1, e2;
    namespace fs = std::filesystem;
    if (fs::weakly_canonical(LearnerStates::run_dir(o.resume), e1) != fs::weakly_canonical(o.out, e2))
      return refuse("--resume goes on in its run's directory (" + LearnerStates::run_dir(o.resume) +
                    "), which --out must be if given: its curve and checkpoints continue there");
  }
  // (An actor process's --actors is its learner's, not this machine's.)
  if (o.role != "actor" && o.all_actors > 0 && o.actor_id + o.actors > o.all_actors)
    return refuse("--actor-id plus --actors is more than --all-actors (actor ids run from 0 to --all-actors - 1)");
  return true;
}

inline bool unknown_flag(const char* program, const std::string& flag) {
  std::fprintf(stderr, "%s: unknown flag %s (--help)\n", program, flag.c_str());
  return false;
}

// The command line of actor `id`, which a learner or an actor machine
// starts on `socket`: the one it was given (o.args), so that the actor runs
// with every flag it runs with, less the flags of its role and machine,
// then the actor's own.
inline std::vector<std::string> actor_command_line(const RunOptions& o, int id, const std::string& socket) {
  static const char* const machine[] = {"--role",     "--actor-id", "--socket",  "--all-actors", "--listen",
                                        "--upstream", "--tls-cert", "--tls-key", "--tls-ca",     "--insecure",
                                        "--resume",   "--checkpoint-every"};
  std::vector<std::string> args;
  for (size_t i = 0; i + 1 < o.args.size(); i += 2) {
    bool drop = false;
    for (const char* f : machine) drop = drop || o.args[i] == f;
    if (!drop) args.insert(args.end(), {o.args[i], o.args[i + 1]});
  }
  args.insert(args.end(), {"--role", "actor", "--actor-id", std::to_string(id), "--all-actors",
                           std::to_string(o.total_actors()), "--socket", socket});
  return args;
}

// An agent's main: OpenBLAS set up (restart_with_blas_settings), the
// command line, then --eval, an actor (--role actor), an actor machine
// (--role actors) or the learner.
template <typename Options, typename Parse, typename Eval, typename Actor, typename Actors, typename Learner>
int agent_main(int argc, char** argv, const char* program, Parse parse, Eval eval, Actor actor, Actors actors,
               Learner learner) {
  restart_with_blas_settings(program, argv);
  Options o;
  if (!parse(argc, argv, &o)) return 2;
  o.args.assign(argv + 1, argv + argc);
  const char* who = o.eval.empty() ? o.role.c_str() : "--eval";
  try {
    if (!o.eval.empty()) return eval(o);
    if (o.role == "actor") return actor(o);
    return o.role == "actors" ? actors(o) : learner(o);
  } catch (const api::Error& e) {
    std::fprintf(stderr, "%s %s: %s\n", program, who, e.what());
    return e.code() == ENGRAM_E_DISCONNECTED ? 3 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s %s: %s\n", program, who, e.what());
    return 1;
  }
}

}  // namespace engram::agents
