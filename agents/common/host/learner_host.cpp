#include "agents/common/host/learner_host.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "agents/common/host/command_line.hpp"
#include "agents/common/host/learner_state.hpp"
#include "agents/common/host/reconnect.hpp"
#include "agents/common/tables/episodes.hpp"
#include "agents/common/tables/replace_tables.hpp"

namespace engram::agents {

namespace {

// Where the server listens: --socket's, or the embedded one's in OUT,
// which is made first.
std::string socket_of(const RunOptions& o) {
  make_out_dir(o.out);
  return o.socket.empty() ? embedded_socket(o.out) : o.socket;
}

// The embedded server's [checkpoint]: OUT/checkpoints/engram, written only
// when the learner asks (with its own state), never restored by itself.
std::string checkpoint_toml(const RunOptions& o, const std::string& restore_tables) {
  if (o.checkpoint_every <= 0 && restore_tables.empty()) return "";
  std::string t = "[checkpoint]\nrestore = false\n";
  // One more than the learner's states: a table checkpoint written just
  // before a kill has no state yet, and the oldest state's must stay.
  if (o.checkpoint_every > 0)
    t += "dir = " + toml_string(o.out + "/checkpoints/engram") + "\nkeep = " + std::to_string(kKeptStates + 1) + "\n";
  if (!restore_tables.empty()) t += "restore_from = " + toml_string(restore_tables) + "\n";
  return t;
}

}  // namespace

LearnerHost::LearnerHost(const char* program, const RunOptions& o, ArenaClass chunks, size_t params,
                         const std::string& restore_tables)
    : program_(program),
      o_(o),
      socket_(socket_of(o)),
      server_(o.socket.empty() ? std::make_unique<api::Server>(arena_toml(chunks, params) + remote_toml(o, "") +
                                                                   checkpoint_toml(o, restore_tables),
                                                               socket_)
                               : nullptr),
      client_(api::Client::connect(socket_)),
      params_(params),
      keep_tables_(!restore_tables.empty() || (!o.resume.empty() && !o.socket.empty())) {}

LearnerHost::~LearnerHost() { stop_children(actors_); }

void LearnerHost::create_tables(const api::TableOptions& own) {
  own_ = own;
  if (keep_tables_) ensure_tables(client_, {own, episodes_table(), params_table(params_)});
  else replace_tables(client_, {own, episodes_table(), params_table(params_)});
  publisher_ = std::make_unique<ParamPublisher>(client_, params_);
  episodes_ = client_.open_table(kEpisodesTable);
}

bool LearnerHost::reconnect(const std::string& lost, const std::function<bool()>& stopped) {
  if (server_) return false;
  publisher_.reset();
  episodes_ = api::Table();
  return agents::reconnect(program_, lost, [&] {
    client_ = api::Client::connect(socket_);
    ensure_tables(client_, {own_, episodes_table(), params_table(params_)});
    publisher_ = std::make_unique<ParamPublisher>(client_, params_);
    episodes_ = client_.open_table(kEpisodesTable);
  }, stopped);
}

std::string LearnerHost::checkpoint_tables() {
  try {
    return client_.checkpoint();
  } catch (const api::Error& e) {
    if (e.code() != ENGRAM_E_INVALID || server_) throw;
    if (!said_no_checkpoints_)
      std::fprintf(stderr, "%s: engramd at %s keeps no checkpoints (%s): the learner's state is saved without its "
                   "tables\n", program_, socket_.c_str(), e.what());
    said_no_checkpoints_ = true;
    return "";
  }
}

void LearnerHost::start_actors(const std::vector<std::string>& extra) {
  for (int k = 0; k < o_.actors; ++k) {
    std::vector<std::string> args = actor_command_line(o_, k, socket_);
    args.insert(args.end(), extra.begin(), extra.end());
    actors_.push_back(start_child(args));
  }
}

void LearnerHost::poll(Curve* curve) {
  drain_episodes(episodes_, curve);
  reap_children(actors_, program_);
}

ActorReport LearnerHost::stop_actors(const char* table) {
  client_.set_rate_limiter(table, api::RateLimiter::min_size(1));
  stop_children(actors_);
  return actor_counts(o_.out, 0, o_.actors);
}

void finish_run(const char* program, const RunOptions& o, Progress& progress, const char* low_title, const RunEnd& r,
                const SummaryFields& own) {
  progress.close();
  plot_curve(o.out, program, low_title);
  std::ofstream(o.out + "/summary.json")
      << "{\"env\": \"" << o.env << "\", \"seed\": " << o.seed << ", \"actors\": " << o.actors
      << ", \"solved\": " << (r.solved ? "true" : "false") << ", \"env_steps\": " << r.steps
      << ", \"updates\": " << r.updates << ", \"wall_s\": " << r.wall_s << ", \"episodes\": " << r.episodes
      << ", \"actor_frames\": " << r.actors.frames
      << ", \"frames_per_s\": " << static_cast<double>(r.steps) / std::max(1e-9, r.wall_s)
      << ", \"learner_engram_cpu_share\": " << r.learner_cpu_share
      << ", \"actor_engram_cpu_share\": " << r.actors.engram_cpu_share()
      << ", \"actor_engram_wall_share\": " << r.actors.engram_wall_share() << own.text() << "}\n";
  std::printf("%s: time in %s calls: learner %.1f%% of CPU", program, r.calls, 100 * r.learner_cpu_share);
  if (r.learner_wall_share >= 0) std::printf(" (%.1f%% of wall, waits included)", 100 * r.learner_wall_share);
  std::printf(", actors %.1f%% of CPU (%.1f%% of wall)\n", 100 * r.actors.engram_cpu_share(),
              100 * r.actors.engram_wall_share());
  std::printf("%s: %s after %lld env steps, %llu updates, %.1f s; trailing-100 mean %.1f%s\n", program,
              r.solved ? "solved" : "stopped", static_cast<long long>(r.steps),
              static_cast<unsigned long long>(r.updates), r.wall_s, r.mean100, r.mean_of);
  say_outputs(program, o.out);
}

}  // namespace engram::agents
