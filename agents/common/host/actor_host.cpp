#include "agents/common/host/actor_host.hpp"

#include <engram/server.hpp>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "agents/common/host/children.hpp"
#include "agents/common/host/command_line.hpp"
#include "agents/common/tables/episodes.hpp"
#include "agents/common/tables/params.hpp"

namespace engram::agents {

namespace {

volatile sig_atomic_t g_stop = 0;
void on_stop(int) { g_stop = 1; }

// Episodes waiting to go: CartPole's first episodes end every ten steps of
// each env, a few thousand a second at most.
constexpr uint64_t kEpisodeQueue = 4096;

// This server among the learner's peers: the host and the first actor,
// the same on every start (its tables number their items from the clock,
// so a machine started again is not taken for its last run: engram(7)).
std::string peer_name(const RunOptions& o) {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return std::string(host) + "-actors" + std::to_string(o.actor_id);
}

std::string machine_toml(const RunOptions& o, const MachineTables& t) {
  std::string upstream = "upstream = " + toml_string(o.upstream) + "\n";
  std::string q = std::to_string(t.queue), eq = std::to_string(kEpisodeQueue);
  api::TableOptions own = t.own;
  own.max_size = t.queue;
  own.sampler = own.remover = ENGRAM_FIFO;  // an upstream table is a queue the link empties
  own.max_times_sampled = 1;
  api::TableOptions episodes = episodes_table();
  episodes.max_size = kEpisodeQueue;
  return arena_toml(t.chunks, t.params) + remote_toml(o, peer_name(o)) +
         table_toml(own, "{ kind = \"queue\", size = " + q + " }", upstream) +
         table_toml(episodes, "{ kind = \"queue\", size = " + eq + " }", upstream) +
         table_toml(params_table(t.params), "", "mirror = " + toml_string(o.upstream) + "\n");
}

}  // namespace

int run_actor_machine(const char* program, const RunOptions& o, const MachineTables& t) {
  ::signal(SIGTERM, on_stop);
  ::signal(SIGINT, on_stop);
  make_out_dir(o.out);
  const bool own_server = o.socket.empty();
  const std::string socket = own_server ? embedded_socket(o.out) : o.socket;
  std::unique_ptr<api::Server> server;
  if (own_server) server = std::make_unique<api::Server>(machine_toml(o, t), socket);
  api::Client c = api::Client::connect(socket);
  for (const std::string& name : {t.own.name, std::string(kEpisodesTable), std::string(kParamsTable)}) {
    try {
      c.open_table(name);
    } catch (const api::Error& e) {
      if (e.code() != ENGRAM_E_NOT_FOUND) throw;
      throw api::Error(e.code(), "the engramd on " + socket + " has no table " + name +
                                     ": declare it in its config, upstream (or, for params, a mirror) to the learner's");
    }
  }
  std::printf("%s: actors %d..%d of %d on this machine, on %s", program, o.actor_id, o.actor_id + o.actors - 1,
              o.total_actors(), socket.c_str());
  if (own_server) std::printf(", its tables linked to the learner's at %s", o.upstream.c_str());
  std::printf("\n");
  std::fflush(stdout);

  std::vector<pid_t> actors;
  for (int k = 0; k < o.actors; ++k) actors.push_back(start_child(actor_command_line(o, o.actor_id + k, socket)));
  const double t0 = wall_s();
  double next_report = t0 + 10;
  int status = 0;
  while (!g_stop) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    reap_children(actors, program);
    if (!actors.empty() && std::all_of(actors.begin(), actors.end(), [](pid_t p) { return p < 0; })) {
      std::fprintf(stderr, "%s: every actor of this machine ended\n", program);
      status = 1;
      break;
    }
    if (wall_s() >= next_report) {
      next_report += 10;
      engram_table_info info = c.info(t.own.name);
      std::printf("%s: %.0f s: this machine's actors wrote %llu items, %llu wait to go to the learner\n", program,
                  wall_s() - t0, static_cast<unsigned long long>(info.inserts),
                  static_cast<unsigned long long>(info.size));
      std::fflush(stdout);
    }
  }
  // The actors' inserts stop waiting for the learner, so that each sees
  // SIGTERM at its next step and writes its counts. Only on a server of
  // our own: an engramd's rate limiters are its config's.
  if (own_server) {
    c.set_rate_limiter(t.own.name, api::RateLimiter::min_size(1));
    c.set_rate_limiter(kEpisodesTable, api::RateLimiter::min_size(1));
  }
  stop_children(actors);
  ActorReport r = actor_counts(o.out, o.actor_id, o.actors);
  std::printf("%s: this machine's actors stepped %.0f frames in %.1f s\n", program, r.frames, wall_s() - t0);
  return status;
}

}  // namespace engram::agents
