// An agent's actor processes: started by fork+exec of the running program
// (never fork alone: LibTorch's threads do not survive a fork), watched,
// and stopped. An actor stopped with SIGTERM writes its counts to
// OUT/actor-K.json: {"frames": .., "wall_s": .., "cpu_s": ..,
// "engram_wall_s": .., "engram_cpu_s": ..}.
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "agents/common/host/call_clock.hpp"

namespace engram::agents {

// Where a learner's embedded server listens, so that the actors it starts
// (and actors in other languages, by hand) find it: OUT/engram.sock, as an
// absolute path.
inline std::string embedded_socket(const std::string& out) {
  char abs[4096];
  return std::string(::realpath(out.c_str(), abs) ? abs : out.c_str()) + "/engram.sock";
}

// Makes OUT and its parents (runs/apex/seed-1 as well as apex-out); one
// that cannot be made is said by what needs it next (the socket, the curve).
inline void make_out_dir(const std::string& out) {
  std::error_code ignored;
  std::filesystem::create_directories(out, ignored);
}

// Starts /proc/self/exe with `args` (argv[1..]); its pid. The child gets
// SIGTERM when this process ends, however it ends: an actor outlives its
// server's restarts (it reconnects), but not the learner that started it.
inline pid_t start_child(const std::vector<std::string>& args) {
  std::vector<std::string> a = {"/proc/self/exe"};
  a.insert(a.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : a) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || ::getppid() != parent) std::_Exit(0);  // gone before the prctl
    ::execv("/proc/self/exe", argv.data());
    std::_Exit(127);
  }
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  return pid;
}

// Reaps the children that ended (their pid becomes -1) and says so; the
// others go on.
inline void reap_children(std::vector<pid_t>& pids, const char* program) {
  for (pid_t& pid : pids) {
    int st = 0;
    if (pid > 0 && ::waitpid(pid, &st, WNOHANG) == pid) {
      std::fprintf(stderr, "%s: actor pid %d ended (%s %d); training goes on with the others\n", program, pid,
                   WIFSIGNALED(st) ? "signal" : "status", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
      pid = -1;
    }
  }
}

// SIGTERM to each child; one that has not ended after 5 s is killed.
inline void stop_children(std::vector<pid_t>& pids) {
  for (pid_t pid : pids)
    if (pid > 0) ::kill(pid, SIGTERM);
  double deadline = wall_s() + 5;
  for (pid_t& pid : pids) {
    while (pid > 0 && ::waitpid(pid, nullptr, WNOHANG) != pid) {
      if (wall_s() > deadline) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    pid = -1;
  }
}

// An actor's counts (OUT/actor-K.json), or several actors' summed.
struct ActorReport {
  double frames = 0, wall_s = 0, cpu_s = 0, engram_wall_s = 0, engram_cpu_s = 0;

  void add(const ActorReport& a) {
    frames += a.frames;
    wall_s += a.wall_s;
    cpu_s += a.cpu_s;
    engram_wall_s += a.engram_wall_s;
    engram_cpu_s += a.engram_cpu_s;
  }
  // Shares of the actors' CPU and wall time spent in engram calls.
  double engram_cpu_share() const { return engram_cpu_s / std::max(1e-9, cpu_s); }
  double engram_wall_share() const { return engram_wall_s / std::max(1e-9, wall_s); }
};

// The counts of actors first..first+n-1, summed. A missing file or key
// adds 0 (an actor killed before it wrote them).
inline ActorReport actor_counts(const std::string& out, int first, int n) {
  ActorReport sum;
  for (int k = first; k < first + n; ++k) {
    std::ifstream in(out + "/actor-" + std::to_string(k) + ".json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto number = [&](const char* key) {
      std::string quoted = std::string(1, '"').append(key).append("\": ");  // not "\"" + ...: GCC 12 warns -Wrestrict
      size_t at = text.find(quoted);
      return at == std::string::npos ? 0.0 : std::atof(text.c_str() + at + quoted.size());
    };
    sum.add({number("frames"), number("wall_s"), number("cpu_s"), number("engram_wall_s"), number("engram_cpu_s")});
  }
  return sum;
}

// Writes this actor's counts where actor_counts reads them.
inline void write_actor_counts(const std::string& out, int actor_id, int64_t frames, double wall, double cpu,
                               const CallClock& in_engram) {
  std::ofstream(out + "/actor-" + std::to_string(actor_id) + ".json")
      << "{\"frames\": " << frames << ", \"wall_s\": " << wall << ", \"cpu_s\": " << cpu
      << ", \"engram_wall_s\": " << in_engram.wall() << ", \"engram_cpu_s\": " << in_engram.cpu() << "}\n";
}

}  // namespace engram::agents
