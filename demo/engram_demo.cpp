// The main job until engramd exists: the core structures working together
// across processes. Actor processes write Atari-sized steps (an 84x84 uint8
// frame plus action, reward, discount) straight into chunk-arena blocks and
// send item descriptors over their own SPSC rings; the parent plays the
// daemon's part: it validates each descriptor, seals the block, inserts the
// item into a prioritized table (evicting FIFO), samples batches of 256,
// checks the sampled bytes and updates priorities. Halfway through, one actor
// is SIGKILLed and its blocks are reclaimed. At the end every block must be
// accounted for.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/chunk_arena.hpp"
#include "core/futex.hpp"
#include "core/shm.hpp"
#include "core/spsc_ring.hpp"
#include "core/table.hpp"

using namespace engram;

namespace {

constexpr uint32_t kFrame = 84 * 84;
constexpr uint32_t kActors = 3;
constexpr uint32_t kRingCapacity = 1024;
constexpr uint32_t kCapacity = 4000;      // items in the table
constexpr uint32_t kBlocks = kCapacity + kActors * (kRingCapacity + 8);
constexpr uint32_t kBatch = 256;

// One step as an actor lays it out in its block.
struct Step {
  uint64_t seq;       // actor << 48 | step number
  int32_t action;
  float reward;
  float discount;
  uint32_t checksum;  // of frame
  uint8_t frame[kFrame];
};

// An actor's request: "block b (generation g) holds a step; insert it".
struct Request {
  uint32_t block;
  uint32_t generation;
  double priority;
  uint64_t seq;
};
static_assert(sizeof(Request) % 8 == 0);

uint32_t checksum(const uint8_t* p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}

void die(const Status& s, const char* what) {
  std::fprintf(stderr, "engram_demo: %s: %s\n", what, s.to_string().c_str());
  std::exit(1);
}

[[noreturn]] void actor(ChunkArena arena, SpscRing ring, uint32_t id, const std::atomic<uint32_t>* stop) {
  std::mt19937_64 rng(id);
  uint64_t n = 0;
  uint8_t x = 0;
  while (stop->load(std::memory_order_relaxed) == 0) {
    auto b = arena.alloc(id, 0);
    if (!b.ok()) {  // arena full: the learner is behind; back off
      usleep(200);
      continue;
    }
    auto* s = static_cast<Step*>(arena.data(*b));
    s->seq = (uint64_t{id} << 48) | n;
    s->action = static_cast<int32_t>(rng() % 18);
    s->reward = static_cast<float>(rng() % 3) - 1.0f;
    s->discount = 0.99f;
    // A frame that differs from the previous one in a small moving region.
    std::memset(s->frame, 40, kFrame);
    for (uint32_t r = 0; r < 8; ++r) std::memset(s->frame + ((n + r * 84 + x) % (kFrame - 8)), 200, 8);
    x = static_cast<uint8_t>(x + 3);
    s->checksum = checksum(s->frame, kFrame);
    Request req{b->index, b->generation, 1.0 + static_cast<double>(rng() % 100), s->seq};
    if (!ring.push(&req, 100'000'000).ok()) {
      (void)arena.free_reserved(id, *b);
      continue;
    }
    ++n;
  }
  _exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 6.0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else if (a == "--help" || a == "-h") {
      std::printf("usage: engram_demo [--seconds S]\n  runs %u actor processes and a learner for S seconds (default 6)\n", kActors);
      return 0;
    } else {
      std::fprintf(stderr, "engram_demo: unknown argument '%s'; try --help\n", a.c_str());
      return 2;
    }
  }
  if (!(seconds > 0 && seconds <= 3600)) {
    std::fprintf(stderr, "engram_demo: --seconds must be in (0, 3600]\n");
    return 2;
  }

  // Shared memory: the arena, one ring per actor, one stop word.
  ArenaConfig ac{{{align_up(sizeof(Step), 64), kBlocks}}};
  size_t arena_bytes = ChunkArena::bytes_needed(ac);
  size_t ring_bytes = SpscRing::bytes_needed(kRingCapacity, sizeof(Request));
  size_t total = arena_bytes + kActors * ring_bytes + kCacheLine;
  const std::string name = "engram-demo-" + std::to_string(getpid());
  auto seg = ShmSegment::create(name, total, 0600);
  if (!seg.ok()) die(seg.status(), "shared memory");
  ShmSegment::remove(name);  // mapped until exit; nothing left behind on a crash
  char* base = static_cast<char*>(seg->data());
  auto arena = ChunkArena::format(base, arena_bytes, ac);
  if (!arena.ok()) die(arena.status(), "arena");
  std::vector<SpscRing> rings;
  for (uint32_t i = 0; i < kActors; ++i) {
    auto r = SpscRing::format(base + arena_bytes + i * ring_bytes, ring_bytes, kRingCapacity, sizeof(Request));
    if (!r.ok()) die(r.status(), "ring");
    rings.push_back(r.value());
  }
  auto* stop = new (base + arena_bytes + kActors * ring_bytes) std::atomic<uint32_t>(0);

  // The table lives in the parent (the daemon's side).
  TableOptions to;
  to.name = "demo";
  to.capacity = kCapacity;
  to.sampler = {SelectorKind::prioritized, 0.6};
  to.remover = {SelectorKind::fifo, 1.0};
  to.rate_limiter = RateLimiterConfig::min_size(1000).value();
  to.signature = {make_column("frame", DType::u8, {84, 84}), make_column("action", DType::i32, {}),
                  make_column("reward", DType::f32, {}), make_column("discount", DType::f32, {})};
  to.max_refs_per_item = 1;
  std::vector<char> table_mem(Table::bytes_needed(to) + kCacheLine);
  void* tmem = reinterpret_cast<void*>(align_up(reinterpret_cast<uintptr_t>(table_mem.data()), kCacheLine));
  auto table = Table::format(tmem, Table::bytes_needed(to), to, 42);
  if (!table.ok()) die(table.status(), "table");
  ChunkArena& A = arena.value();
  table->set_remove_hook([&A](const ItemSlot&, const ChunkRef* r) {
    Status s = A.release(kArenaDaemonClient, BlockRef{r->block, r->generation});
    if (!s.ok()) die(s, "release");
  });

  std::vector<pid_t> pids;
  for (uint32_t i = 0; i < kActors; ++i) {
    pid_t pid = fork();
    if (pid == 0) actor(A, rings[i], i + 1, stop);
    pids.push_back(pid);
  }
  std::printf("engram demo: %u actor processes -> prioritized table (capacity %u, exponent 0.6), learner batch %u, %.0f s\n",
              kActors, kCapacity, kBatch, seconds);

  std::mt19937_64 rng(7);
  SampleBatch batch;
  uint64_t inserts = 0, samples = 0, rejected = 0, verified = 0, last_inserts = 0, last_samples = 0;
  const int64_t start = monotonic_ns(), end = start + static_cast<int64_t>(seconds * 1e9);
  int64_t next_report = start + 1'000'000'000;
  bool killed = false;
  // The daemon's side of a request. Untrusted: seal() checks that the block
  // exists and is reserved by this actor, in this generation.
  auto admit = [&](uint32_t actor_id, const Request& req) {
    BlockRef b{req.block, req.generation};
    if (!A.seal(actor_id, b, 1).ok()) {
      ++rejected;
      return;
    }
    ChunkRef ref{b.index, b.generation, 0, 1};
    auto key = table->insert(req.priority, &ref, 1);
    if (!key.ok()) die(key.status(), "insert");
    ++inserts;
  };
  while (monotonic_ns() < end) {
    bool idle = true;
    for (uint32_t i = 0; i < kActors; ++i) {
      Request req;
      for (int k = 0; k < 64 && rings[i].try_pop(&req).ok(); ++k) {
        idle = false;
        admit(i + 1, req);
      }
    }
    batch.clear();
    Status s = table->sample(kBatch, &batch);
    if (s.ok()) {
      idle = false;
      samples += batch.items.size();
      // Check one sampled step's bytes, then give every item a new priority.
      const ChunkRef& r = batch.refs[batch.items[0].first_ref];
      const auto* step = static_cast<const Step*>(A.data({r.block, r.generation}));
      if (step->checksum != checksum(step->frame, kFrame)) {
        std::fprintf(stderr, "engram_demo: sampled step %" PRIx64 " is corrupt\n", step->seq);
        return 1;
      }
      ++verified;
      for (const SampledItem& it : batch.items) {
        Status u = table->update(it.key, static_cast<double>(rng() % 1000) / 10.0);
        if (!u.ok() && u.code() != Errc::stale_key) die(u, "update");
      }
    } else if (s.code() != Errc::rate_limited) {
      die(s, "sample");
    }
    if (!killed && monotonic_ns() > start + (end - start) / 2) {
      kill(pids[0], SIGKILL);
      waitpid(pids[0], nullptr, 0);
      // Drain what it sent before dying, then reclaim what it still held.
      Request req;
      while (rings[0].try_pop(&req).ok()) admit(1, req);
      auto n = A.reclaim(1);
      if (!n.ok()) die(n.status(), "reclaim");
      std::printf("  actor 1 killed with SIGKILL: reclaimed %" PRIu64 " blocks it had reserved\n", *n);
      killed = true;
    }
    int64_t now = monotonic_ns();
    if (now >= next_report) {
      std::printf("  t=%4.1fs  inserts/s %8" PRIu64 "  samples/s %9" PRIu64 "  table size %5u\n", (now - start) / 1e9,
                  inserts - last_inserts, samples - last_samples, table->size());
      std::fflush(stdout);
      last_inserts = inserts;
      last_samples = samples;
      next_report += 1'000'000'000;
    }
    if (idle) usleep(100);
  }

  stop->store(1);
  for (uint32_t i = 1; i < kActors; ++i) waitpid(pids[i], nullptr, 0);
  Request req;
  for (uint32_t i = 1; i < kActors; ++i)  // steps sent but not inserted go back
    while (rings[i].try_pop(&req).ok()) (void)A.free_reserved(i + 1, {req.block, req.generation});
  TableInfo info = table->info();
  table->reset();  // releases every chunk reference through the hook
  auto audit = A.audit();
  if (!audit.ok()) die(audit.status(), "audit");
  double secs = (monotonic_ns() - start) / 1e9;
  std::printf(
      "summary: %" PRIu64 " steps inserted (%.0f/s), %" PRIu64 " items sampled (%.0f/s), %" PRIu64
      " evicted, %" PRIu64 " batches verified byte for byte, %" PRIu64 " bad requests rejected\n",
      inserts, inserts / secs, samples, samples / secs, info.stats.evictions, verified, rejected);
  std::printf("arena: %" PRIu64 " of %u blocks free after shutdown, %" PRIu64 " reserved, %" PRIu64 " sealed\n", audit->free,
              A.total_blocks(), audit->reserved, audit->sealed);
  if (audit->free != A.total_blocks()) {
    std::fprintf(stderr, "engram_demo: blocks leaked\n");
    return 1;
  }
  std::printf("ok\n");
  return 0;
}
