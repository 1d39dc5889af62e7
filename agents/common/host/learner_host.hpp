// What a learner runs on besides its algorithm, the same for every agent:
// the engram server (embedded, unless --socket names one), the tables
// every agent has (episodes, parameters) beside the agent's own, the actor
// processes (started with the learner's own command line and the actor's
// role added, watched and stopped); and the run's end (the curve plotted,
// OUT/summary.json, the closing lines: finish_run). An agent brings its
// table, its arena class and its learning.
#pragma once

#include <engram/engram.hpp>
#include <engram/server.hpp>

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "agents/common/host/children.hpp"
#include "agents/common/host/progress.hpp"
#include "agents/common/host/run_options.hpp"
#include "agents/common/host/server_config.hpp"
#include "agents/common/tables/params.hpp"

namespace engram::agents {

// How a run ended, for LearnerHost::finish.
struct RunEnd {
  bool solved = false;
  int64_t steps = 0;       // env steps
  uint64_t updates = 0;
  double wall_s = 0;
  double mean100 = 0;      // the trailing-100 mean the goal is judged on
  const char* mean_of = "";  // what it is the mean of, for the closing line, e.g. " (eps<=0.01)"
  uint64_t episodes = 0;
  ActorReport actors;
  double learner_cpu_share = 0;    // of the learner's main thread's CPU, in engram calls
  double learner_wall_share = -1;  // of its wall time, waits included (< 0: not measured)
  const char* calls = "engram";  // whose calls the shares count
};

// An agent's own fields of OUT/summary.json, in the order added.
class SummaryFields {
 public:
  SummaryFields& add(const char* key, double v) {
    os_ << ", \"" << key << "\": " << v;
    return *this;
  }
  SummaryFields& add(const char* key, bool v) {
    os_ << ", \"" << key << "\": " << (v ? "true" : "false");
    return *this;
  }
  std::string text() const { return os_.str(); }

 private:
  std::ostringstream os_;
};

class LearnerHost {
 public:
  // Starts the embedded server unless o.socket names one, with an arena of
  // the agent's chunks (`chunks`: its table's blocks), the episodes' and
  // the parameters' (`params` floats) classes, listening for actor
  // machines' servers on o.listen if given; connects to it.
  // With o.checkpoint_every, the embedded server checkpoints its tables
  // into OUT/checkpoints/engram on checkpoint_tables(); `restore_tables`
  // names one of those to start from (a resume), and the tables it
  // restores are kept by create_tables.
  LearnerHost(const char* program, const RunOptions& o, ArenaClass chunks, size_t params,
              const std::string& restore_tables = "");
  ~LearnerHost();  // stops actors still running
  LearnerHost(const LearnerHost&) = delete;
  LearnerHost& operator=(const LearnerHost&) = delete;

  // Creates `own`, the episodes table and the parameter table, each
  // replacing a table of its name that a previous run left (--socket),
  // or, when resuming, keeping it (restored, or engramd's).
  void create_tables(const api::TableOptions& own);
  // After the server went away (only with --socket: an embedded server
  // goes only with the learner, so this returns false at once): connects
  // again with bounded backoff, creates the tables the server lost (one
  // restarted without a checkpoint; a restored one keeps its items) and
  // opens them; says on stderr when the outage began, how long it lasted
  // and what was `lost`. The agent then opens its own handles again and
  // publishes its parameters. False if stopped() first.
  bool reconnect(const std::string& lost, const std::function<bool()>& stopped);
  api::Client& client() { return client_; }
  const std::string& socket() const { return socket_; }
  // A checkpoint of the server's tables (engram_checkpoint): its
  // directory, or "" if the server keeps none (an engramd without a
  // [checkpoint] dir: said once). Blocks until it is on disk.
  std::string checkpoint_tables();
  // Publishes parameters to the actors (params.hpp).
  void publish(int64_t version, const std::vector<float>& flat) { publisher_->publish(version, flat); }

  // Starts o.actors actor processes: this program with the learner's
  // command line (actor_command_line), so that they run with every flag
  // the learner was given, and `extra` flags.
  void start_actors(const std::vector<std::string>& extra = {});
  // Reads the finished episodes into *curve; reaps actors that ended,
  // saying so. Never waits.
  void poll(Curve* curve);
  // Stops the actors. First their inserts into `table` stop waiting for
  // the learner (its rate limiter loses its upper bound), so that each
  // sees SIGTERM at its next step and writes its counts; returns them,
  // summed.
  ActorReport stop_actors(const char* table);

 private:
  const char* program_;
  const RunOptions& o_;
  std::string socket_;
  std::unique_ptr<api::Server> server_;
  api::Client client_;
  size_t params_;
  api::TableOptions own_;  // the agent's table, as create_tables made it
  bool keep_tables_;       // resuming: create_tables keeps what exists
  bool said_no_checkpoints_ = false;
  std::unique_ptr<ParamPublisher> publisher_;
  api::Table episodes_;
  std::vector<pid_t> actors_;
};

// The end of a run: closes the curve, plots it (`low_title` as in
// plot_curve), writes OUT/summary.json (the fields every agent reports,
// then the agent's own) and prints the closing lines. Also for a run
// without a host (IMPALA's in-memory baseline).
void finish_run(const char* program, const RunOptions& o, Progress& progress, const char* low_title, const RunEnd& r,
                const SummaryFields& own);

}  // namespace engram::agents
