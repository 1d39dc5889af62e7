// The replay demo: Ape-X-shaped replay through engram (engram.hpp, the C++
// wrapper over the C API). Actor processes
// write Atari-sized steps (an 84x84 uint8 frame, action, reward, discount)
// and create 2-step items with initial priorities; a learner process samples
// batches of 256, checks every sampled frame byte for byte, and updates the
// priorities. The server is engramd (--socket) or, by default, the embedded
// server in this process. Halfway through one actor is SIGKILLed: the server
// reclaims it and the others carry on. A progress line shows inserts/s,
// samples/s and the table size; a summary ends the run.
#include <csignal>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engram/engram.hpp"
#include "engram/server.hpp"

namespace {

constexpr uint32_t kSide = 84, kFrame = kSide * kSide;
constexpr uint32_t kBatch = 256, kItemSteps = 2, kEpisode = 200;
constexpr const char* kTable = "replay";

volatile sig_atomic_t g_stop = 0;
void on_term(int) { g_stop = 1; }

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A frame as an Atari screen changes: a static background and a small
// square that moves with the step. Its first 8 bytes name (actor, step), so
// the learner can regenerate and compare the whole frame.
void make_frame(uint32_t actor, uint32_t step, uint8_t* f) {
  for (uint32_t y = 0; y < kSide; ++y)
    for (uint32_t x = 0; x < kSide; ++x) f[y * kSide + x] = static_cast<uint8_t>((x * 3 + y * 5 + actor * 17) & 0x3f);
  uint32_t px = (step * 3) % (kSide - 8), py = (step * 7) % (kSide - 8);
  for (uint32_t y = py; y < py + 8; ++y)
    for (uint32_t x = px; x < px + 8; ++x) f[y * kSide + x] = static_cast<uint8_t>(200 + actor);
  uint64_t tag = uint64_t{actor} << 32 | step;
  std::memcpy(f, &tag, sizeof tag);
}

namespace api = engram::api;

api::Columns columns() {
  api::Columns c;
  c.add("frame", ENGRAM_UINT8, {kSide, kSide}).add("action", ENGRAM_INT32).add("reward", ENGRAM_FLOAT32).add("discount",
                                                                                                            ENGRAM_FLOAT32);
  return c;
}

int fail(const char* who, const char* what, const api::Error& e) {
  std::fprintf(stderr, "%s: %s: %s\n", who, what, e.what());
  return 1;
}

// Clients start before the embedded server is up: retry for a while.
api::Client connect_retry(const std::string& socket) {
  for (int i = 0;; ++i) {
    try {
      return api::Client::connect(socket);
    } catch (const api::Error& e) {
      if (i >= 200 || g_stop) throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

api::Table open_retry(api::Client& c) {
  for (int i = 0;; ++i) {
    try {
      return c.open_table(kTable);
    } catch (const api::Error& e) {
      if (i >= 200 || g_stop) throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

int g_env_us = 50;  // simulated environment time per step

int actor(const std::string& socket, uint32_t id) try {
  api::Client c = connect_retry(socket);
  api::Table t = open_retry(c);
  api::WriterOptions wo;
  wo.columns = columns();
  wo.max_item_steps = kItemSteps;
  api::Writer w = c.writer(wo);
  std::mt19937 rng(id);
  std::exponential_distribution<double> td(1.0);
  static uint8_t frame[kFrame];
  for (uint32_t step = 0; !g_stop; ++step) {
    if (g_env_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(g_env_us));
    make_frame(id, step, frame);
    int32_t action = static_cast<int32_t>(step % 18);
    float reward = (step % 37 == 0) ? 1.0f : 0.0f, discount = (step % kEpisode == kEpisode - 1) ? 0.0f : 0.99f;
    w.append({frame, &action, &reward, &discount});
    if (step % kEpisode != 0) w.create_item(t, kItemSteps, td(rng));
    if (step % kEpisode == kEpisode - 1) w.end_episode();
  }
  return 0;
} catch (const api::Error& e) {
  return e.code() == ENGRAM_E_DISCONNECTED ? 0 : fail("actor", "write", e);
}

int learner(const std::string& socket) try {
  api::Client c = connect_retry(socket);
  api::Table t = open_retry(c);
  std::vector<uint8_t> frames(size_t{kBatch} * kItemSteps * kFrame);
  std::vector<int32_t> actions(kBatch * kItemSteps);
  std::vector<float> rewards(kBatch * kItemSteps), discounts(kBatch * kItemSteps);
  std::vector<engram_sample_info> info(kBatch);
  std::vector<uint64_t> keys(kBatch);
  std::vector<double> prios(kBatch);
  std::vector<uint8_t> want(kFrame);
  std::mt19937 rng(99);
  std::exponential_distribution<double> td(1.0);
  engram_sample_options so = api::sample_options(kBatch, kItemSteps, 200);
  std::vector<void*> bufs = {frames.data(), actions.data(), rewards.data(), discounts.data()};
  uint64_t bad = 0;
  while (!g_stop) {
    uint32_t n = 0;
    try {
      n = t.sample(so, bufs, info);
    } catch (const api::Error& e) {
      if (e.code() == ENGRAM_E_TIMEOUT) continue;
      throw;
    }
    for (uint32_t i = 0; i < n; ++i) {
      for (uint32_t k = 0; k < kItemSteps; ++k) {
        const uint8_t* f = &frames[(size_t{i} * kItemSteps + k) * kFrame];
        uint64_t tag;
        std::memcpy(&tag, f, sizeof tag);
        make_frame(static_cast<uint32_t>(tag >> 32), static_cast<uint32_t>(tag), want.data());
        if (std::memcmp(f, want.data(), kFrame) != 0 || actions[i * kItemSteps + k] != int32_t(uint32_t(tag) % 18)) ++bad;
      }
      keys[i] = info[i].key;
      prios[i] = td(rng);
    }
    t.update_priorities(api::Span<const uint64_t>(keys.data(), n), api::Span<const double>(prios.data(), n));
  }
  if (bad) std::fprintf(stderr, "learner: %" PRIu64 " sampled steps differ from what the actors wrote\n", bad);
  return bad ? 3 : 0;
} catch (const api::Error& e) {
  return e.code() == ENGRAM_E_DISCONNECTED ? 0 : fail("learner", "sample", e);
}

pid_t start_child(int (*body)(const std::string&, uint32_t), const std::string& socket, uint32_t id) {
  pid_t p = ::fork();
  if (p == 0) {
    std::signal(SIGTERM, on_term);
    std::_Exit(body(socket, id));
  }
  return p;
}

int learner_entry(const std::string& s, uint32_t) { return learner(s); }

const char* kConfig = R"(
[arena]
classes = [ { block_size = "4KiB", count = 64 }, { block_size = "8KiB", count = 7000 } ]

[[table]]
name = "replay"
max_size = 5000
sampler = "prioritized"
priority_exponent = 0.6
remover = "fifo"
rate_limiter = { kind = "min_size", min_size = 1000 }
[[table.column]]
name = "frame"
dtype = "uint8"
shape = [84, 84]
[[table.column]]
name = "action"
dtype = "int32"
[[table.column]]
name = "reward"
dtype = "float32"
[[table.column]]
name = "discount"
dtype = "float32"
)";

}  // namespace

// `v` as a number in [lo, hi] (a whole one if `whole`), or false after
// saying what `flag` takes. atof and atoi took "nan" (which ran for ever)
// and "abc" (as 0) without a word.
bool flag_value(const std::string& flag, const char* v, double lo, double hi, bool whole, double* out) {
  char* end = nullptr;
  double d = std::strtod(v, &end);
  if (end == v || *end || !(d >= lo && d <= hi) || (whole && d != static_cast<double>(static_cast<int64_t>(d)))) {
    std::fprintf(stderr, "engram_demo: %s takes a %s from %g to %.0f, not \"%s\"\n", flag.c_str(),
                 whole ? "whole number" : "number", lo, hi, v);
    return false;
  }
  *out = d;
  return true;
}

int main(int argc, char** argv) {
  double seconds = 20, actor_count = 3, env_us = g_env_us;
  std::string socket;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    bool ok = true;
    if (a == "--seconds" && i + 1 < argc) ok = flag_value(a, argv[++i], 0.1, 600, false, &seconds);
    else if (a == "--actors" && i + 1 < argc) ok = flag_value(a, argv[++i], 2, 16, true, &actor_count);
    else if (a == "--socket" && i + 1 < argc) socket = argv[++i];
    else if (a == "--env-us" && i + 1 < argc) ok = flag_value(a, argv[++i], 0, 1e6, true, &env_us);
    else {
      std::fprintf(stderr,
                   "usage: engram_demo [--seconds S (20)] [--actors N (3)] [--env-us US (50)] [--socket PATH]\n"
                   "  --env-us: simulated environment time per actor step (0: write as fast as possible)\n"
                   "  without --socket the server runs embedded in this process\n");
      return 2;
    }
    if (!ok) return 2;
  }
  const uint32_t actors = static_cast<uint32_t>(actor_count);
  g_env_us = static_cast<int>(env_us);
  bool embedded = socket.empty();
  char dir[] = "/tmp/engram-demo-XXXXXX";
  if (embedded) socket = std::string(::mkdtemp(dir)) + "/engram.sock";

  // Children first: the embedded server starts threads, and fork() after
  // that would copy a process with threads.
  std::vector<pid_t> kids;
  for (uint32_t i = 0; i < actors; ++i) kids.push_back(start_child(actor, socket, i));
  pid_t learner_pid = start_child(learner_entry, socket, 0);

  int status = 0;
  std::unique_ptr<api::Server> server;
  std::unique_ptr<api::Client> c;
  try {
    if (embedded) server = std::make_unique<api::Server>(kConfig, socket);
    c = std::make_unique<api::Client>(connect_retry(socket));
    if (!embedded) {
      try {
        c->open_table(kTable);
      } catch (const api::Error&) {
        std::fprintf(stderr, "engram_demo: the server on %s needs a table \"%s\" (see dist/engramd.toml)\n",
                     socket.c_str(), kTable);
        throw;
      }
    }
  } catch (const api::Error& e) {
    for (pid_t k : kids) ::kill(k, SIGKILL);
    ::kill(learner_pid, SIGKILL);
    return fail("engram_demo", embedded ? "embedded server" : "connect", e);
  }
  std::printf("engram demo: %u actors and 1 learner, %s server on %s, %.0f s\n", actors,
              embedded ? "embedded" : "external", socket.c_str(), seconds);
  std::printf("  table %s: prioritized (alpha 0.6), FIFO eviction at 5000 items, 2-step items of 84x84 frames\n", kTable);

  bool tty = ::isatty(STDOUT_FILENO);
  int64_t t0 = now_ns(), last_t = t0;
  engram_table_info last;
  engram_table_info_init(&last);
  engram_table_info i = last;
  bool killed = false;
  while (now_ns() - t0 < int64_t(seconds * 1e9)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    try {
      i = c->info(kTable);
    } catch (const api::Error& e) {
      status = fail("engram_demo", "table info", e);
      break;
    }
    int64_t t = now_ns();
    double dt = (t - last_t) / 1e9;
    std::printf("%s  %5.1f s  inserts %9" PRIu64 " (%7.0f/s)  samples %10" PRIu64 " (%8.0f/s)  size %5" PRIu64 "/%" PRIu64
                "%s",
                tty ? "\r" : "", (t - t0) / 1e9, i.inserts, (i.inserts - last.inserts) / dt, i.samples,
                (i.samples - last.samples) / dt, i.size, i.max_size, tty ? "" : "\n");
    std::fflush(stdout);
    last = i;
    last_t = t;
    if (!killed && t - t0 > int64_t(seconds * 0.5e9)) {
      ::kill(kids[0], SIGKILL);  // the server must reclaim it; the rest carry on
      killed = true;
      std::printf("%s  (SIGKILLed actor 0; the server reclaims its blocks)\n", tty ? "\n" : "");
    }
  }
  for (size_t k = 1; k < kids.size(); ++k) ::kill(kids[k], SIGTERM);
  ::kill(learner_pid, SIGTERM);
  int learner_status = 0;
  for (pid_t k : kids) {
    int st = 0;
    ::waitpid(k, &st, 0);
    if (k != kids[0] && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
      std::fprintf(stderr, "engram_demo: an actor failed\n");
      status = 1;
    }
  }
  ::waitpid(learner_pid, &learner_status, 0);
  if (!(WIFEXITED(learner_status) && WEXITSTATUS(learner_status) == 0)) {
    std::fprintf(stderr, "engram_demo: the learner failed or found corrupt data\n");
    status = 1;
  }
  try {
    i = c->info(kTable);
  } catch (const api::Error& e) {
    status = fail("engram_demo", "table info", e);
  }
  double total = (now_ns() - t0) / 1e9;
  std::printf("%ssummary: %" PRIu64 " inserts (%.0f/s), %" PRIu64 " samples (%.0f/s), %" PRIu64 " priority updates, %" PRIu64
              " evicted; every sampled frame matched what its actor wrote: %s\n",
              tty ? "\n" : "", i.inserts, i.inserts / total, i.samples, i.samples / total, i.updates, i.evictions,
              status == 0 ? "yes" : "NO");
  if (i.inserts == 0 || i.samples == 0) {
    std::fprintf(stderr, "engram_demo: nothing was %s\n", i.inserts == 0 ? "inserted" : "sampled");
    status = 1;
  }
  c.reset();
  server.reset();
  if (embedded) ::rmdir(dir);
  return status;
}
