// engram_bench_throughput, the multi-process throughput harness (driven
// by bench/throughput.sh): engram against what users would pick instead (Redis, pipelined) and
// against the machine's copy bandwidth (memcpy into a shared mapping larger
// than the caches), same payloads, same processes, same run.
//
// The parent stays single-threaded and forks every worker, so that fork()
// is safe; workers connect, get ready, wait for "go", warm up, measure, and
// report one Result through a pipe. Each repetition runs every scenario of
// a payload once, and the median of each is kept. Output: one JSON document
// (written by write_json below; bench/summarize_throughput.py reads it).
#include <sys/utsname.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../stats.hpp"
#include "engram_workers.hpp"
#include "harness.hpp"
#include "machine.hpp"
#include "memcpy_worker.hpp"
#include "queue_latency.hpp"
#include "redis_worker.hpp"

namespace throughput {

namespace {

struct Record {
  std::string system, op, table;
  uint64_t payload;
  int processes;
  double items_per_s, mb_per_s;
  Latency latency;  // medians over the repetitions; the queue's only
  std::vector<double> reps;
  std::vector<Conditions> conditions;  // just before each repetition
};
std::vector<Record> g_records;
int g_failures = 0;

// Sum of items/s over workers; errors are reported and count as failures.
double rate(const std::vector<Result>& rs, size_t first, size_t n) {
  double total = 0;
  for (size_t i = first; i < first + n; ++i) {
    const Result& r = rs[i];
    if (r.error) {
      std::fprintf(stderr, "  worker error: %s\n", r.message);
      ++g_failures;
      continue;
    }
    if (r.seconds > 0) total += r.items / r.seconds;
  }
  return total;
}

using engram::bench::median;

void record(const std::string& system, const std::string& op, const std::string& table, uint64_t payload, int procs,
            const std::vector<double>& reps, const std::vector<Conditions>& conditions, const Latency& l = {}) {
  double ips = median(reps);
  g_records.push_back({system, op, table, payload, procs, ips, ips * double(payload) / 1e6, l, reps, conditions});
  std::fprintf(stderr, "  %-7s %-16s %-12s %7llu B  x%d  %12.0f items/s  %9.1f MB/s%s\n", system.c_str(), op.c_str(),
               table.c_str(), static_cast<unsigned long long>(payload), procs, ips, ips * double(payload) / 1e6,
               l.p99 >= 0 ? (" p50 " + std::to_string(int(l.p50)) + " us p99 " + std::to_string(int(l.p99)) + " us p99.9 " +
                             std::to_string(int(l.p999)) + " us max " + std::to_string(int(l.max)) + " us")
                                .c_str()
                          : "");
}

// Is system/op selected by --only?
bool wanted(const std::string& system, const std::string& op) {
  if (g_opt.only.empty()) return true;
  std::string name = system + "/" + op;
  for (const std::string& o : g_opt.only)
    if (name.rfind(o, 0) == 0) return true;
  return false;
}

// One payload's scenarios, collected over its repetitions. A repetition runs
// every scenario once, so the repetitions of engram and of its baselines
// alternate: a slow minute of this VM (cross-core latency here swings by
// 2x from one minute to the next) lands on all of them, not on one system.
struct Collected {
  std::string system, op, table;
  int processes;
  std::vector<double> reps;
  std::vector<Conditions> conditions;
  std::vector<Latency> latencies;
};
std::vector<Collected> g_collected;  // in order of first run

void collect(const std::string& system, const std::string& op, const std::string& table, int procs, double items_per_s,
             const Conditions& before, const Latency& l = {}) {
  auto it = std::find_if(g_collected.begin(), g_collected.end(), [&](const Collected& c) {
    return c.system == system && c.op == op && c.table == table && c.processes == procs;
  });
  if (it == g_collected.end()) it = g_collected.insert(g_collected.end(), Collected{system, op, table, procs, {}, {}, {}});
  it->reps.push_back(items_per_s);
  Conditions c = before;
  if (int64_t now = kdamond_run_ns(); now >= 0 && c.kdamond_ns >= 0) c.kdamond_ms = double(now - c.kdamond_ns) / 1e6;
  it->conditions.push_back(c);
  if (l.p99 >= 0) it->latencies.push_back(l);
}

// Medians of what was collected for `payload`, as records.
void record_collected(uint64_t payload) {
  for (const Collected& c : g_collected) {
    Latency l;
    if (!c.latencies.empty()) {
      auto med = [&](double Latency::*f) {
        std::vector<double> v;
        for (const Latency& x : c.latencies) v.push_back(x.*f);
        return median(v);
      };
      l = {med(&Latency::p50),  med(&Latency::p99),      med(&Latency::p999),
           med(&Latency::max),  med(&Latency::pace),     med(&Latency::wake_p50),
           med(&Latency::wake_p99)};
    }
    record(c.system, c.op, c.table, payload, c.processes, c.reps, c.conditions, l);
  }
  g_collected.clear();
}

// Runs a scenario once (one repetition), if --only selects it.
void scenario(const std::string& system, const std::string& op, const std::string& table, int procs,
              const std::function<double()> run) {
  if (!wanted(system, op)) return;
  Conditions before = conditions(system + "/" + op);
  collect(system, op, table, procs, run(), before);
}

// Drops a table, if there is one of that name (left over from an interrupted run).
void drop_table(api::Client& c, const char* name) {
  try {
    c.drop_table(name);
  } catch (const api::Error& e) {
    if (e.code() != ENGRAM_E_NOT_FOUND) throw;
  }
}

void create_table(api::Client& c, const char* name, uint64_t payload, uint64_t capacity, engram_selector sampler,
                  bool queue) {
  api::TableOptions o;
  o.name = name;
  o.max_size = capacity;
  o.sampler = sampler;
  o.priority_exponent = 0.6;
  o.columns = payload_columns(payload);
  if (queue) {
    o.max_times_sampled = 1;
    o.rate_limiter = api::RateLimiter::queue(int64_t(capacity));
  }
  drop_table(c, name);
  c.create_table(o);
}

// Sizing, shared with the server's config (--print-config): per payload an
// arena class of blocks that hold one step, with room for a full table plus
// what writers and samplers hold in flight, within a byte budget.
constexpr uint32_t kRing = 256;  // client.ring_records: also the sample batch
uint64_t budget() { return g_opt.quick ? (uint64_t{64} << 20) : (uint64_t{1} << 30); }
uint64_t block_bytes(uint64_t payload) { return 64 + (payload + 63) / 64 * 64; }
// Items a table holds: 1e5, fewer where that would take over half the budget.
uint64_t table_items(uint64_t payload) {
  return std::max<uint64_t>(64, std::min<uint64_t>(100000, budget() / 2 / payload));
}
uint64_t class_blocks(uint64_t payload) {
  return std::min<uint64_t>(table_items(payload) + 4 * kRing + 64, budget() / block_bytes(payload));
}

void print_config() {
  std::printf("# written by engram_bench_throughput --print-config%s\n[client]\nring_records = %u\n[arena]\nclasses = [\n",
              g_opt.quick ? " --quick" : "", kRing);
  for (uint64_t p : g_opt.payloads)
    std::printf("  { block_size = %llu, count = %llu },\n", static_cast<unsigned long long>(block_bytes(p)),
                static_cast<unsigned long long>(class_blocks(p)));
  std::printf("]\n");
}

// One repetition of every scenario of a payload.
void run_payload_once(uint64_t payload) {
  uint64_t items = table_items(payload);

  // memcpy: copy in (insert) with 1 and 2 processes, random gather (sample).
  for (int p : {1, 2})
    scenario("memcpy", "insert", "none", p, [&] {
      return rate(run_workers(p, [&](int, auto& ready) { return memcpy_worker(false, payload, ready); }), 0, size_t(p));
    });
  scenario("memcpy", "sample", "none", 1, [&] {
    return rate(run_workers(1, [&](int, auto& ready) { return memcpy_worker(true, payload, ready); }), 0, 1);
  });

  // Redis: SET with 1 and 2 clients, then GET of random keys of a filled set.
  if (!g_opt.redis_socket.empty()) {
    for (int p : {1, 2})
      scenario("redis", "insert", "none", p, [&] {
        return rate(run_workers(p, [&](int i, auto& ready) { return redis_worker(false, payload, uint64_t(i) << 40, items, ready); }),
                    0, size_t(p));
      });
    if (wanted("redis", "sample"))
      run_workers(1, [&](int, auto& ready) { return redis_worker(false, payload, 0, items, ready, true); });
    for (int p : {1, 2})
      scenario("redis", "sample", "none", p, [&] {
        return rate(run_workers(p, [&](int i, auto& ready) { return redis_worker(true, payload, uint64_t(i), items, ready); }), 0,
                    size_t(p));
      });
  }

  std::optional<api::Client> client;
  try {
    client.emplace(connect_engram());
    // Inserts into a uniform table that evicts FIFO once full.
    create_table(*client, "ins", payload, items, ENGRAM_UNIFORM, false);
  } catch (const api::Error& e) {
    std::fprintf(stderr, "engram at %s: %s\n", g_opt.engram_socket.c_str(), e.what());
    ++g_failures;
    return;
  }
  api::Client& c = *client;
  for (int p : {1, 2})
    scenario("engram", "insert", "uniform", p, [&] {
      return rate(run_workers(p, [&](int, auto& ready) { return engram_writer_worker("ins", payload, 0, 0, ready); }), 0,
                  size_t(p));
    });
  drop_table(c, "ins");

  // Samples from full prioritized and uniform tables.
  for (auto [name, sampler] : {std::pair<const char*, engram_selector>{"prioritized", ENGRAM_PRIORITIZED}, {"uniform", ENGRAM_UNIFORM}}) {
    if (!wanted("engram", "sample") && !wanted("engram", "sample_zero_copy")) continue;
    create_table(c, name, payload, items, sampler, false);
    run_workers(1, [&](int, auto& ready) { return engram_writer_worker(name, payload, int64_t(items), 0, ready); });
    for (bool zc : {false, true})
      for (int p : {1, 2})
        scenario("engram", zc ? "sample_zero_copy" : "sample", name, p, [&] {
          return rate(run_workers(p, [&](int, auto& ready) { return engram_sampler_worker(name, payload, 256, zc, false, ready); }),
                      0, size_t(p));
        });
    drop_table(c, name);
  }

  // Both at once: a writer and a sampler on one prioritized table.
  if (wanted("engram", "both")) {
    create_table(c, "both", payload, items, ENGRAM_PRIORITIZED, false);
    run_workers(1, [&](int, auto& ready) { return engram_writer_worker("both", payload, int64_t(items), 0, ready); });
    Conditions before = conditions("engram/both");
    auto rs = run_workers(2, [&](int k, auto& ready) {
      return k == 0 ? engram_writer_worker("both", payload, 0, 0, ready)
                    : engram_sampler_worker("both", payload, 256, false, false, ready);
    });
    collect("engram", "both_insert", "prioritized", 1, rate(rs, 0, 1), before);
    collect("engram", "both_sample", "prioritized", 1, rate(rs, 1, 1), before);
    drop_table(c, "both");
  }

  // A queue: items/s end to end at full speed, then the latency from
  // create_item to the (zero-copy) sample that returns it, paced at one item
  // per 20 us so that the queue does not back up (not rate-limited).
  if (!wanted("engram", "queue")) return;
  uint64_t queue_items = std::min<uint64_t>(items, 4096);
  uint32_t queue_batch = uint32_t(std::min<uint64_t>(256, queue_items));
  create_table(c, "queue", payload, queue_items, ENGRAM_FIFO, true);
  Conditions before = conditions("engram/queue");
  g_reader_done->store(0);
  auto rs = run_workers(2, [&](int k, auto& ready) {
    return k == 0 ? engram_writer_worker("queue", payload, 0, 0, ready, true)
                  : engram_sampler_worker("queue", payload, queue_batch, false, false, ready);
  });
  double thr = rate(rs, 1, 1);
  c.reset_table("queue");
  WakeUp wake = futex_wake_up_us(100, g_opt.quick ? 200 : 2000);
  g_reader_done->store(0);
  auto lat = run_workers(2, [&](int k, auto& ready) {
    return k == 0 ? engram_writer_worker("queue", payload, 0, 20000, ready, true)
                  : engram_sampler_worker("queue", payload, 1, true, true, ready);
  });
  rate(lat, 0, 2);
  Latency l = latency();
  l.wake_p50 = wake.p50;
  l.wake_p99 = wake.p99;
  collect("engram", "queue", "queue", 1, thr, before, l);
  drop_table(c, "queue");
}

void run_payload(uint64_t payload) {
  std::fprintf(stderr, "payload %llu B\n", static_cast<unsigned long long>(payload));
  for (int i = 0; i < g_opt.reps; ++i) {
    try {
      run_payload_once(payload);
    } catch (const api::Error& e) {  // a table's set-up: the repetition is lost, and counted as a failure
      std::fprintf(stderr, "payload %llu B: %s\n", static_cast<unsigned long long>(payload), e.what());
      ++g_failures;
    }
  }
  record_collected(payload);
}

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\';
    if (ch == '\n') {
      o += "\\n";
      continue;
    }
    o += ch;
  }
  return o + "\"";
}

double find(const std::string& system, const std::string& op, const std::string& table, uint64_t payload, int procs) {
  for (const Record& r : g_records)
    if (r.system == system && r.op == op && r.table == table && r.payload == payload && r.processes == procs)
      return r.items_per_s;
  return 0;
}

void write_json() {
  utsname u{};
  ::uname(&u);
  std::ostringstream o;
  o << "{\n  \"machine\": {\"cores\": " << std::thread::hardware_concurrency() << ", \"cpu\": " << json_str(cpu_model())
    << ", \"kernel\": " << json_str(std::string(u.sysname) + " " + u.release) << ", \"damon\": " << json_str(damon_state())
    << ", \"shm_huge_pages\": " << json_str(shm_huge_pages())
    << "},\n"
    << "  \"git\": " << json_str(g_opt.git) << ",\n  \"engram_version\": " << json_str(engram_version_string())
    << ",\n  \"config\": {\"quick\": " << (g_opt.quick ? "true" : "false") << ", \"repetitions\": " << g_opt.reps
    << ", \"seconds\": " << g_opt.seconds << ", \"warmup_seconds\": " << g_opt.warmup
    << ", \"statistic\": \"median of repetitions\", \"column\": \"float32\", \"chunk_length\": 1, \"item_steps\": 1"
    << ", \"sample_batch\": 256, \"queue_latency\": \"create_item call to the return of the zero-copy sample (batch 1) that "
       "delivers the item; the writer sleeps 20 us before each item (pace_us: the mean interval it reached); wake_up_p50_us / wake_up_p99_us: the machine's baseline, a thread asleep on a futex for 100 us or more woken from the other CPU\", \"redis_pipeline\": " << kPipeline << ", \"memcpy_mapping_bytes\": " << map_bytes()
    << ", \"busy_before\": \"share of all CPUs not idle in the " << busy_window_ms()
    << " ms before each repetition, from /proc/stat\", \"kdamond_ms\": \"CPU time of the kernel's DAMON threads during each "
       "repetition (-1: no DAMON)\"},\n"
    << "  \"results\": [\n";
  for (size_t i = 0; i < g_records.size(); ++i) {
    const Record& r = g_records[i];
    o << "    {\"system\": " << json_str(r.system) << ", \"op\": " << json_str(r.op) << ", \"table\": " << json_str(r.table)
      << ", \"payload_bytes\": " << r.payload << ", \"processes\": " << r.processes << ", \"items_per_s\": " << r.items_per_s
      << ", \"mb_per_s\": " << r.mb_per_s;
    if (r.latency.p99 >= 0)
      o << ", \"p50_us\": " << r.latency.p50 << ", \"p99_us\": " << r.latency.p99 << ", \"p999_us\": " << r.latency.p999
        << ", \"max_us\": " << r.latency.max << ", \"pace_us\": " << r.latency.pace
        << ", \"wake_up_p50_us\": " << r.latency.wake_p50 << ", \"wake_up_p99_us\": " << r.latency.wake_p99;
    o << ", \"repetitions\": [";
    for (size_t k = 0; k < r.reps.size(); ++k) o << (k ? ", " : "") << r.reps[k];
    o << "], \"round_trip_ns\": [";
    for (size_t k = 0; k < r.conditions.size(); ++k) o << (k ? ", " : "") << std::lround(r.conditions[k].round_trip_ns);
    o << "], \"busy_before\": [";
    for (size_t k = 0; k < r.conditions.size(); ++k)
      o << (k ? ", " : "") << std::round(r.conditions[k].busy * 100) / 100;
    o << "], \"kdamond_ms\": [";
    for (size_t k = 0; k < r.conditions.size(); ++k)
      o << (k ? ", " : "") << std::round(r.conditions[k].kdamond_ms * 10) / 10;
    o << "]}" << (i + 1 < g_records.size() ? "," : "") << "\n";
  }
  o << "  ],\n  \"ratios\": [\n";
  bool first = true;
  for (uint64_t p : g_opt.payloads) {
    double ei = find("engram", "insert", "uniform", p, 1), ri = find("redis", "insert", "none", p, 1),
           mi = find("memcpy", "insert", "none", p, 1), ei2 = find("engram", "insert", "uniform", p, 2),
           mi2 = find("memcpy", "insert", "none", p, 2), es = find("engram", "sample", "prioritized", p, 1),
           rs = find("redis", "sample", "none", p, 1), ms = find("memcpy", "sample", "none", p, 1),
           ez = find("engram", "sample_zero_copy", "prioritized", p, 1);
    auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
    o << (first ? "" : ",\n") << "    {\"payload_bytes\": " << p << ", \"insert_engram_over_redis\": " << ratio(ei, ri)
      << ", \"insert_engram_over_memcpy\": " << ratio(ei, mi) << ", \"insert_2_over_1_writers\": " << ratio(ei2, ei)
      << ", \"memcpy_2_over_1\": " << ratio(mi2, mi) << ", \"sample_engram_over_redis\": " << ratio(es, rs)
      << ", \"sample_engram_over_memcpy_gather\": " << ratio(es, ms) << ", \"zero_copy_items_per_s\": " << ez << "}";
    first = false;
  }
  o << "\n  ]\n}\n";
  std::ofstream(g_opt.out) << o.str();
}

}  // namespace

}  // namespace throughput

int main(int argc, char** argv) {
  using namespace throughput;
  bool print_only = false;
  std::vector<uint64_t> payloads;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--engram-socket") g_opt.engram_socket = next();
    else if (a == "--redis-socket") g_opt.redis_socket = next();
    else if (a == "--out") g_opt.out = next();
    else if (a == "--git") g_opt.git = next();
    else if (a == "--quick") g_opt.quick = true;
    else if (a == "--print-config") print_only = true;
    else if (a == "--reps") g_opt.reps = std::max(1, std::atoi(next().c_str()));
    else if (a == "--seconds") g_opt.seconds = std::atof(next().c_str());
    else if (a == "--warmup") g_opt.warmup = std::atof(next().c_str());
    else if (a == "--payload") payloads.push_back(std::strtoull(next().c_str(), nullptr, 10));
    else if (a == "--only") g_opt.only.push_back(next());
    else {
      std::fprintf(stderr,
                   "usage: engram_bench_throughput --engram-socket PATH [--redis-socket PATH] --out FILE\n"
                   "       engram_bench_throughput --print-config [--quick]   (the server config it needs)\n"
                   "       [--quick] [--reps N] [--seconds S] [--warmup S] [--git REV]\n"
                   "       [--payload BYTES]... [--only SYSTEM/OP]...   (a subset, for profiling)\n"
                   "(bench/throughput.sh starts the servers and runs this)\n");
      return 2;
    }
  }
  if (!payloads.empty()) g_opt.payloads = payloads;
  if (print_only) {
    print_config();
    return 0;
  }
  if (g_opt.engram_socket.empty() || g_opt.out.empty()) {
    std::fprintf(stderr, "--engram-socket and --out are required\n");
    return 2;
  }
  if (g_opt.quick) {
    g_opt.reps = 1;
    g_opt.seconds = 0.15;
    g_opt.warmup = 0.05;
  }
  init_stamps();
  for (uint64_t p : g_opt.payloads) run_payload(p);
  write_json();
  std::fprintf(stderr, "wrote %s (%zu results, %d worker failures)\n", g_opt.out.c_str(), g_records.size(), g_failures);
  return g_failures ? 1 : 0;
}
