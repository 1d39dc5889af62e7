#include "agents/common/host/learner_state.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/durable_file.hpp"
#include "core/fnv.hpp"

namespace engram::agents {

namespace {

constexpr char kMagic[8] = {'E', 'N', 'G', 'R', 'A', 'M', 'L', 'S'};
constexpr char kPrefix[] = "learner-";
constexpr char kSuffix[] = ".state";

template <typename T>
void append(std::string* b, const T& v) {
  b->append(reinterpret_cast<const char*>(&v), sizeof v);
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot be read");
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// learner-<N>.state files in `dir`, newest (largest N) first.
std::vector<std::string> state_files(const std::string& dir) {
  std::vector<std::pair<uint64_t, std::string>> found;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      size_t p = sizeof kPrefix - 1, s = sizeof kSuffix - 1;
      if (n.size() <= p + s || n.compare(0, p, kPrefix) || n.compare(n.size() - s, s, kSuffix)) continue;
      std::string digits = n.substr(p, n.size() - p - s);
      if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 19) continue;
      found.emplace_back(std::stoull(digits), dir + "/" + n);
    }
    ::closedir(d);
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(f.second);
  return out;
}

volatile sig_atomic_t g_stop = 0;
void on_stop(int) { g_stop = 1; }

}  // namespace

void StateOut::put(const std::string& name, const void* p, size_t n) {
  sections_[name].assign(static_cast<const char*>(p), n);
}

std::string StateOut::bytes() const {
  std::string b(kMagic, sizeof kMagic);
  append(&b, kStateFormat);
  append(&b, static_cast<uint32_t>(sections_.size()));
  for (const auto& [name, data] : sections_) {
    append(&b, static_cast<uint32_t>(name.size()));
    b += name;
    append(&b, static_cast<uint64_t>(data.size()));
    b += data;
  }
  append(&b, fnv1a(kFnvOffset, b.data(), b.size()));
  return b;
}

StateIn StateIn::parse(const std::string& b) {
  if (b.size() < sizeof kMagic + 8 + 8 || std::memcmp(b.data(), kMagic, sizeof kMagic))
    throw std::runtime_error("not a learner state file (no ENGRAMLS header)");
  uint64_t sum = 0;
  std::memcpy(&sum, b.data() + b.size() - 8, 8);
  if (sum != fnv1a(kFnvOffset, b.data(), b.size() - 8))
    throw std::runtime_error("damaged: its checksum does not match its bytes");
  size_t at = sizeof kMagic;
  const size_t end = b.size() - 8;
  auto take = [&](void* out, size_t n, const char* what) {
    if (n > end - at) throw std::runtime_error(std::string("damaged: ") + what + " runs past the end");
    std::memcpy(out, b.data() + at, n);
    at += n;
  };
  uint32_t format = 0, count = 0;
  take(&format, 4, "the header");
  if (format != kStateFormat)
    throw std::runtime_error("format " + std::to_string(format) + "; this program reads format " +
                             std::to_string(kStateFormat));
  take(&count, 4, "the header");
  StateIn in;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t name_len = 0;
    uint64_t len = 0;
    take(&name_len, 4, "a section's name");
    if (name_len > end - at) throw std::runtime_error("damaged: a section's name runs past the end");
    std::string name = b.substr(at, name_len);
    at += name_len;
    take(&len, 8, "a section's length");
    if (len > end - at) throw std::runtime_error("damaged: section " + name + " runs past the end");
    in.sections_[name] = b.substr(at, static_cast<size_t>(len));
    at += static_cast<size_t>(len);
  }
  if (at != end) throw std::runtime_error("damaged: bytes after its last section");
  return in;
}

const std::string& StateIn::raw(const std::string& name) const {
  auto it = sections_.find(name);
  if (it == sections_.end()) throw std::runtime_error("it has no section " + name);
  return it->second;
}

void RunState::save(StateOut* s, const char* program, const RunOptions& o, size_t params) const {
  s->put_text("agent", program);
  s->put_text("env", o.env);
  s->put_value("seed", o.seed);
  s->put_value("param_count", static_cast<uint64_t>(params));
  s->put_value("updates", updates);
  s->put_value("steps", steps);
  s->put_value("wall_s", wall_s);
  s->put_value("version", version);
  s->put_value("episodes", curve.episodes);
  s->put("curve_all", std::vector<float>(curve.all.begin(), curve.all.end()));
  s->put("curve_low", std::vector<float>(curve.low.begin(), curve.low.end()));
}

RunState RunState::load(const StateIn& in, const char* program, const RunOptions& o, size_t params) {
  std::string agent = in.text("agent"), env = in.text("env");
  auto seed = in.value<uint64_t>("seed");
  auto n = in.value<uint64_t>("param_count");
  if (agent != program || env != o.env || seed != o.seed)
    throw std::runtime_error("a state of " + agent + " --env " + env + " --seed " + std::to_string(seed) +
                             "; this run is " + program + " --env " + o.env + " --seed " + std::to_string(o.seed));
  if (n != params)
    throw std::runtime_error("a network of " + std::to_string(n) + " parameters; this run's has " +
                             std::to_string(params) + " (other network flags?)");
  RunState r;
  r.updates = in.value<uint64_t>("updates");
  r.steps = in.value<int64_t>("steps");
  r.wall_s = in.value<double>("wall_s");
  r.version = in.value<int64_t>("version");
  r.curve.episodes = in.value<uint64_t>("episodes");
  for (float v : in.get<float>("curve_all")) r.curve.all.push_back(v);
  for (float v : in.get<float>("curve_low")) r.curve.low.push_back(v);
  return r;
}

LearnerStates::LearnerStates(const char* program, const RunOptions& o)
    : program_(program), dir_(o.out + "/checkpoints") {}

std::string LearnerStates::save(const StateOut& s, uint64_t updates) {
  ::mkdir(dir_.c_str(), 0755);  // EEXIST is fine; a real failure shows at open
  char name[64];
  std::snprintf(name, sizeof name, "%s%012llu%s", kPrefix, static_cast<unsigned long long>(updates), kSuffix);
  const std::string path = dir_ + "/" + name;
  const std::string bytes = s.bytes();
  DurableFile f;
  Status st = f.create(path, ".tmp");
  if (st.ok()) st = f.write(bytes.data(), bytes.size());
  if (st.ok()) st = f.commit();
  if (!st.ok()) throw std::runtime_error(st.message());
  std::vector<std::string> all = state_files(dir_);
  for (size_t i = kKeptStates; i < all.size(); ++i) ::unlink(all[i].c_str());
  return path;
}

std::string LearnerStates::run_dir(const std::string& where) {
  std::string w = where;
  while (w.size() > 1 && w.back() == '/') w.pop_back();
  if (!is_dir(w)) {  // a state file: OUT/checkpoints/learner-N.state
    size_t slash = w.rfind('/');
    w = slash == std::string::npos ? "." : w.substr(0, slash);
  }
  size_t slash = w.rfind('/');
  std::string last = slash == std::string::npos ? w : w.substr(slash + 1);
  if (last == "checkpoints") w = slash == std::string::npos ? "." : w.substr(0, slash);
  return w;
}

StateIn LearnerStates::load(const std::string& where, const std::function<void(const StateIn&)>& check,
                            std::string* path) const {
  std::vector<std::string> candidates;
  bool one = !is_dir(where);
  if (one && ::access(where.c_str(), R_OK) != 0)
    throw std::runtime_error(where + ": " + std::strerror(errno) +
                             " (--resume takes a run's --out directory, or one of its checkpoints/learner-N.state)");
  if (one) candidates = {where};
  else candidates = state_files(is_dir(where + "/checkpoints") ? where + "/checkpoints" : where);
  if (candidates.empty())
    throw std::runtime_error("no learner state (checkpoints/learner-N.state) in " + where +
                             ": was the run started with --checkpoint-every?");
  for (const std::string& c : candidates) {
    try {
      StateIn in = StateIn::parse(slurp(c));
      check(in);
      *path = c;
      return in;
    } catch (const std::exception& e) {
      if (one) throw std::runtime_error("refusing " + c + ": " + e.what());
      std::fprintf(stderr, "%s: refusing %s: %s; trying the one before it\n", program_, c.c_str(), e.what());
    }
  }
  throw std::runtime_error("no good learner state in " + where + " (each refused above)");
}

void install_stop_signal() {
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
}

bool stop_asked() { return g_stop != 0; }

}  // namespace engram::agents
