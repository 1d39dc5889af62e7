// A learner's state on disk (--checkpoint-every, --resume): named sections
// of bytes in one file, OUT/checkpoints/learner-<updates>.state, the last
// kKeptStates kept. Each agent decides its sections (networks, optimiser,
// counters); RunState holds those every learner has.
//
// File layout (this machine's byte order: a state file resumes a run where
// it was written, it is not an interchange format):
//   "ENGRAMLS" | u32 format (kStateFormat) | u32 sections
//   sections, each: u32 name bytes | name | u64 bytes | bytes
//   u64 FNV-1a of every byte before it
// Invariants: written as NAME.tmp, fsynced, renamed, the directory fsynced
// (core/durable_file.hpp), so a file under its final name was whole once;
// the checksum catches one damaged since. A reader checks every length against what is left before
// it reads, so a damaged or foreign file is refused with a message, never
// read past its end.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "agents/common/host/progress.hpp"
#include "agents/common/host/run_options.hpp"

namespace engram::agents {

inline constexpr uint32_t kStateFormat = 1;
inline constexpr size_t kKeptStates = 3;

// Sections being put together for one file.
class StateOut {
 public:
  void put(const std::string& name, const void* p, size_t n);
  template <typename T>
  void put(const std::string& name, const std::vector<T>& v) {
    put(name, v.data(), v.size() * sizeof(T));
  }
  template <typename T>
  void put_value(const std::string& name, const T& v) {
    put(name, &v, sizeof v);
  }
  void put_text(const std::string& name, const std::string& s) { put(name, s.data(), s.size()); }
  std::string bytes() const;

 private:
  std::map<std::string, std::string> sections_;
};

// A file's sections, checked. Every getter throws std::runtime_error that
// names the section when it is missing or of the wrong size.
class StateIn {
 public:
  // Throws with what is wrong (not a state file, another format, damaged).
  static StateIn parse(const std::string& bytes);
  bool has(const std::string& name) const { return sections_.count(name) != 0; }
  const std::string& raw(const std::string& name) const;
  template <typename T>
  std::vector<T> get(const std::string& name) const {
    const std::string& r = raw(name);
    if (r.size() % sizeof(T)) throw std::runtime_error("section " + name + " is not a whole number of values");
    std::vector<T> v(r.size() / sizeof(T));
    if (!v.empty()) std::memcpy(v.data(), r.data(), r.size());
    return v;
  }
  // A section of exactly `n` values of T.
  template <typename T>
  std::vector<T> get(const std::string& name, size_t n) const {
    std::vector<T> v = get<T>(name);
    if (v.size() != n)
      throw std::runtime_error("section " + name + " holds " + std::to_string(v.size()) + " values; this run has " +
                               std::to_string(n));
    return v;
  }
  template <typename T>
  T value(const std::string& name) const {
    return get<T>(name, 1)[0];
  }
  std::string text(const std::string& name) const { return raw(name); }

 private:
  std::map<std::string, std::string> sections_;
};

// What every learner saves: which run it is (the agent, env, seed and the
// parameters' count, checked on resume), its counters and its curve's
// trailing windows.
struct RunState {
  uint64_t updates = 0;
  int64_t steps = 0;   // env steps
  double wall_s = 0;   // of the run, across resumes
  int64_t version = 0;  // of the parameters last published
  Curve curve;

  void save(StateOut* s, const char* program, const RunOptions& o, size_t params) const;
  // Throws if `in` is another agent's, env's, seed's or network's.
  static RunState load(const StateIn& in, const char* program, const RunOptions& o, size_t params);
};

// The learner state files of a run.
class LearnerStates {
 public:
  // States go to OUT/checkpoints/.
  LearnerStates(const char* program, const RunOptions& o);
  // Writes `s` as learner-<updates>.state atomically, then removes all but
  // the newest kKeptStates; returns its path. Throws on an I/O error.
  std::string save(const StateOut& s, uint64_t updates);
  // The state to resume from: `where` a state file (that one, or an error)
  // or a run's OUT (or its checkpoints/): its newest file that parses and
  // passes `check` (which throws to refuse), each refused one named on
  // stderr with why. Throws if none. Sets *path to the file taken.
  StateIn load(const std::string& where, const std::function<void(const StateIn&)>& check, std::string* path) const;
  const std::string& dir() const { return dir_; }
  // The run's OUT that `where` (as for load) belongs to.
  static std::string run_dir(const std::string& where);

 private:
  const char* program_;
  std::string dir_;
};

// SIGTERM asks the learner to stop (and, with --checkpoint-every, to save
// its state first) instead of killing it: install_stop_signal() once, then
// stop_asked() in its loop.
void install_stop_signal();
bool stop_asked();

}  // namespace engram::agents
