#include "core/chunk_arena.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "core/futex.hpp"
#include "core/shm.hpp"
#include "test_util.hpp"

namespace engram {
namespace {

ArenaConfig small_config() { return ArenaConfig{{{64, 40}, {256, 20}, {4096, 10}}}; }

// An arena, its meta region and its blocks, in one anonymous shared
// mapping (shared with forked children, so that processes can stand in for
// the daemon's threads and be killed at any instruction), followed by one
// page of test control words.
struct SharedArena {
  explicit SharedArena(const ArenaConfig& c, const std::vector<uint32_t>& committed = {}) {
    meta_bytes = align_up(ChunkArena::meta_bytes_needed(c), 4096);
    bytes = meta_bytes + ArenaBlocks::bytes_needed(c);
    auto s = ShmSegment::anonymous(bytes + 4096);
    EXPECT_TRUE(s.ok());
    seg = std::move(s.value());
    auto a = ChunkArena::format(seg.data(), meta_bytes, static_cast<char*>(seg.data()) + meta_bytes, bytes - meta_bytes, c,
                                committed);
    EXPECT_TRUE(a.ok()) << a.status().to_string();
    arena = a.value();
    stop = new (static_cast<char*>(seg.data()) + bytes) std::atomic<uint32_t>(0);
  }
  // The meta region's parts, as ChunkArena lays them out.
  ArenaMeta* meta() const { return static_cast<ArenaMeta*>(seg.data()); }
  BlockHeader* blocks() const { return reinterpret_cast<BlockHeader*>(static_cast<char*>(seg.data()) + sizeof(ArenaMeta)); }
  ArenaIntent* intents() const {
    return reinterpret_cast<ArenaIntent*>(static_cast<char*>(seg.data()) +
                                          align_up(sizeof(ArenaMeta) + sizeof(BlockHeader) * arena.total_blocks(), kCacheLine));
  }
  size_t meta_bytes, bytes;
  ShmSegment seg;
  ChunkArena arena;
  std::atomic<uint32_t>* stop;
};

void expect_all_free(const ChunkArena& a) {
  auto audit = a.audit();
  ASSERT_TRUE(audit.ok()) << audit.status().to_string();
  EXPECT_EQ(audit->free, a.total_blocks());
  EXPECT_EQ(audit->listed, a.total_blocks());
  EXPECT_EQ(audit->reserved, 0u);
  EXPECT_EQ(audit->sealed, 0u);
}

// Growth (ChunkArena, "Growth"): a class formatted with fewer blocks than
// its layout commits more when its list runs dry, within the bytes the
// growth allows, and the walks see exactly the committed blocks.
TEST(ChunkArena, AClassGrowsOnDemandWithinItsBound) {
  SharedArena s(small_config(), {4, 2, 1});
  std::vector<std::pair<uint64_t, uint64_t>> commits;
  bool refuse = false;
  ArenaGrowth g;
  g.commit = [&](uint64_t off, uint64_t bytes) {
    if (refuse) return Status{Errc::out_of_memory, "no memory here"};
    commits.push_back({off, bytes});
    return Status::Ok();
  };
  std::vector<std::pair<uint32_t, uint32_t>> grown;
  g.grown = [&](uint32_t k, uint32_t n) { grown.push_back({k, n}); };
  const uint64_t start = 4 * 64 + 2 * 256 + 1 * 4096;
  g.max_bytes = start + 10 * 64;  // room for ten blocks of 64 B
  s.arena.set_growth(&g);
  EXPECT_EQ(s.arena.most_blocks(0), 14u);
  EXPECT_EQ(s.arena.most_blocks(2), 1u) << "a 4 KiB block does not fit the room";
  std::vector<BlockRef> held;
  for (int i = 0; i < 14; ++i) {
    auto b = s.arena.alloc(1, 0);
    ASSERT_TRUE(b.ok()) << i << ": " << b.status().to_string();
    held.push_back(*b);
  }
  EXPECT_EQ(s.arena.committed(0), 14u);
  ASSERT_EQ(commits.size(), 1u) << "one growth of ten blocks";
  EXPECT_EQ(commits[0], (std::pair<uint64_t, uint64_t>{4 * 64, 10 * 64})) << "the hole right after the first four";
  EXPECT_EQ(grown, (std::vector<std::pair<uint32_t, uint32_t>>{{0, 14}}));
  auto more = s.arena.alloc(1, 0);
  EXPECT_EQ(more.status().code(), Errc::out_of_memory);
  EXPECT_NE(s.arena.growth_refusal().find("grow_to"), std::string::npos) << s.arena.growth_refusal();
  auto audit = s.arena.audit();
  ASSERT_TRUE(audit.ok()) << audit.status().to_string();
  EXPECT_EQ(audit->reserved, 14u);
  EXPECT_EQ(audit->free, 2u + 1u) << "the other classes' committed blocks, and none of their hole";
  // A commit that fails leaves the class as it was.
  g.max_bytes = start + 10 * 64 + 2 * 256;
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(s.arena.alloc(1, 1).ok());
  refuse = true;
  EXPECT_EQ(s.arena.alloc(1, 1).status().code(), Errc::out_of_memory);
  EXPECT_EQ(s.arena.committed(1), 2u);
  EXPECT_EQ(s.arena.growth_refusal(), "no memory here");
  refuse = false;
  auto b = s.arena.alloc(1, 1);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(s.arena.committed(1), 4u);
  // A dead client's blocks come back from the grown part too.
  auto freed = s.arena.reclaim(1);
  ASSERT_TRUE(freed.ok());
  EXPECT_EQ(*freed, 14u + 3u);
  audit = s.arena.audit();
  ASSERT_TRUE(audit.ok()) << audit.status().to_string();
  EXPECT_EQ(audit->free, 14u + 4u + 1u);
  EXPECT_EQ(audit->listed, audit->free);
}

// Threads that take and give back blocks while the class grows under them
// lose none: every committed block is free and listed once at the end.
TEST(ChunkArena, GrowthUnderConcurrentAllocsLosesNoBlock) {
  SharedArena s(ArenaConfig{{{64, 4096}}}, {16});
  ArenaGrowth g;
  g.commit = [](uint64_t, uint64_t) { return Status::Ok(); };
  g.max_bytes = 4096 * 64;
  s.arena.set_growth(&g);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (uint32_t c = 1; c <= 4; ++c)
    threads.emplace_back([&, c] {
      std::vector<BlockRef> mine;
      for (int round = 0; round < 50; ++round) {
        for (int i = 0; i < 20; ++i) {
          auto b = s.arena.alloc(c, 0);
          if (!b.ok()) {
            ++failures;
            return;
          }
          mine.push_back(*b);
        }
        for (BlockRef b : mine)
          if (!s.arena.free_reserved(c, b).ok()) ++failures;
        mine.clear();
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  auto audit = s.arena.audit();
  ASSERT_TRUE(audit.ok()) << audit.status().to_string();
  EXPECT_EQ(audit->free, s.arena.committed(0));
  EXPECT_EQ(audit->listed, s.arena.committed(0));
  EXPECT_GE(s.arena.committed(0), 16u + 1u);
}

TEST(ChunkArena, AllocFreeSealAcquireRelease) {
  SharedArena s(small_config());
  ChunkArena& a = s.arena;
  expect_all_free(a);
  EXPECT_EQ(*a.class_for(1), 0u);
  EXPECT_EQ(*a.class_for(65), 1u);
  EXPECT_EQ(*a.class_for(4096), 2u);
  EXPECT_EQ(a.class_for(4097).status().code(), Errc::invalid_argument);

  std::vector<BlockRef> got;
  for (int i = 0; i < 10; ++i) {
    auto b = a.alloc(1, 2);
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    EXPECT_EQ(a.kind(b->index), BlockKind::reserved);
    EXPECT_EQ(a.refcount_or_owner(b->index), 1u);
    std::memset(a.data(*b), i, 4096);
    got.push_back(*b);
  }
  Status oom = a.alloc(1, 2).status();
  EXPECT_EQ(oom.code(), Errc::out_of_memory);
  EXPECT_NE(oom.message().find("4096"), std::string::npos);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(static_cast<unsigned char*>(a.data(got[i]))[4095], i) << "blocks overlap";

  EXPECT_EQ(a.free_reserved(2, got[0]).code(), Errc::double_free) << "client 2 does not own it";
  ASSERT_TRUE(a.free_reserved(1, got[0]).ok());
  EXPECT_EQ(a.free_reserved(1, got[0]).code(), Errc::double_free);
  EXPECT_EQ(a.generation(got[0].index), got[0].generation + 1);

  // Sealed: reference counted; the last release frees; stale refs fail.
  BlockRef b = got[1];
  ASSERT_TRUE(a.seal(1, b, 1).ok());
  EXPECT_EQ(a.seal(1, b, 1).code(), Errc::stale_reference);
  ASSERT_TRUE(a.acquire(b).ok());
  EXPECT_EQ(a.refcount_or_owner(b.index), 2u);
  ASSERT_TRUE(a.release(3, b).ok());
  ASSERT_TRUE(a.release(3, b).ok());
  EXPECT_EQ(a.kind(b.index), BlockKind::free);
  EXPECT_EQ(a.acquire(b).code(), Errc::stale_reference) << "a stale generation must not pin a recycled block";
  EXPECT_EQ(a.release(3, b).code(), Errc::double_free);
  auto again = a.alloc(4, 2);  // takes a recycled block: a new generation
  ASSERT_TRUE(again.ok());
  EXPECT_GT(again->generation, 1u);
  ASSERT_TRUE(a.seal(4, *again, 1).ok());
  BlockRef old{again->index, again->generation - 1};
  EXPECT_EQ(a.acquire(old).code(), Errc::stale_reference);
  EXPECT_EQ(a.acquire({a.total_blocks(), 1}).code(), Errc::invalid_argument);
  ASSERT_TRUE(a.release(4, *again).ok());
  for (int i = 2; i < 10; ++i) ASSERT_TRUE(a.free_reserved(1, got[i]).ok());
  expect_all_free(a);
}

// Blocks freed in bulk (order_for_freeing, a dead client's by reclaim) go
// back so that the free list hands them out lowest first, in the order of
// memory, whatever order they were held in.
TEST(ChunkArena, BlocksFreedInBulkComeBackLowestFirst) {
  SharedArena s(small_config());
  ChunkArena& a = s.arena;
  auto take_all = [&](uint32_t client) {
    std::vector<BlockRef> got;
    for (auto b = a.alloc(client, 0); b.ok(); b = a.alloc(client, 0)) got.push_back(*b);
    return got;
  };
  auto expect_ascending = [](const std::vector<BlockRef>& got, const char* after) {
    ASSERT_EQ(got.size(), 40u) << after;
    for (size_t i = 1; i < got.size(); ++i) EXPECT_LT(got[i - 1].index, got[i].index) << after << ", allocation " << i;
  };
  std::vector<BlockRef> held = take_all(1);
  std::shuffle(held.begin(), held.end(), std::mt19937(7));
  order_for_freeing(&held);
  for (BlockRef b : held) ASSERT_TRUE(a.free_reserved(1, b).ok());
  held = take_all(2);
  expect_ascending(held, "order_for_freeing");

  ASSERT_TRUE(a.reclaim(2).ok());  // client 2 died holding all of them
  held = take_all(3);
  expect_ascending(held, "reclaim");
  for (BlockRef b : held) ASSERT_TRUE(a.free_reserved(3, b).ok());
  expect_all_free(a);
}

TEST(ChunkArena, PinSealsTheOwnersBlockOrAddsReferences) {
  SharedArena s(small_config());
  ChunkArena& a = s.arena;
  auto b = a.alloc(5, 0);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a.pin(6, *b, 2).code(), Errc::stale_reference) << "reserved by another client";
  EXPECT_EQ(a.kind(b->index), BlockKind::reserved);
  EXPECT_EQ(a.pin(5, *b, 0).code(), Errc::invalid_argument);
  ASSERT_TRUE(a.pin(5, *b, 2).ok()) << "the owner's reserved block is sealed with both references";
  EXPECT_EQ(a.kind(b->index), BlockKind::sealed);
  EXPECT_EQ(a.refcount_or_owner(b->index), 2u);
  ASSERT_TRUE(a.pin(6, *b, 3).ok()) << "a sealed block takes references from anyone";
  EXPECT_EQ(a.refcount_or_owner(b->index), 5u);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(a.release(7, *b).ok());
  EXPECT_EQ(a.kind(b->index), BlockKind::free);
  EXPECT_EQ(a.pin(5, *b, 1).code(), Errc::stale_reference) << "a freed generation cannot be pinned";
  expect_all_free(a);
}

TEST(ChunkArena, UnrefLeavesTheLastReferencesBlockReservedUntilListedOrHandedOver) {
  SharedArena s(small_config());
  ChunkArena& a = s.arena;
  auto b = a.alloc(5, 0);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(a.pin(5, *b, 2).ok());
  bool last = true;
  ASSERT_TRUE(a.unref(7, *b, &last).ok());
  EXPECT_FALSE(last);
  EXPECT_EQ(a.refcount_or_owner(b->index), 1u);
  ASSERT_TRUE(a.unref(7, *b, &last).ok());
  EXPECT_TRUE(last) << "the last reference";
  EXPECT_EQ(a.kind(b->index), BlockKind::reserved) << "not listed yet: nobody can take it, reclaim(7) would free it";
  EXPECT_EQ(a.refcount_or_owner(b->index), 7u);
  EXPECT_EQ(a.acquire(*b).code(), Errc::stale_reference);
  EXPECT_EQ(a.unref(7, *b, &last).code(), Errc::double_free);
  EXPECT_FALSE(last);
  EXPECT_EQ(a.free_reserved(6, *b).code(), Errc::double_free) << "reserved by 7, not 6";
  EXPECT_EQ(a.hand_over(6, 8, *b).code(), Errc::stale_reference) << "only the holder can hand it over";
  ASSERT_TRUE(a.hand_over(7, 8, *b).ok());
  EXPECT_EQ(a.refcount_or_owner(b->index), 8u);
  EXPECT_EQ(a.free_reserved(7, *b).code(), Errc::double_free) << "now reserved by 8";
  auto freed = a.reclaim(8);
  ASSERT_TRUE(freed.ok());
  EXPECT_EQ(*freed, 1u) << "a handed-over block of a dead client comes back";
  expect_all_free(a);
}

// Issue 41, point 4: a client gets blocks only by hand_over, which counts
// what the receiver holds of the block's class against the class's limit.
// Sealing, handing back and reclaim lower the count; the daemon's own id
// has no limit.
TEST(ChunkArena, AClientHoldsAtMostItsLimitOfAClass) {
  SharedArena s(small_config());
  ChunkArena& a = s.arena;
  EXPECT_EQ(a.client_limit(0), 40u) << "no limit until one is set: the whole class";
  a.set_client_limit(0, 3);
  std::vector<BlockRef> mine;
  for (int i = 0; i < 5; ++i) {
    auto b = a.alloc(kArenaDaemonClient, 0);
    ASSERT_TRUE(b.ok());
    Status s = a.hand_over(kArenaDaemonClient, 5, *b);
    if (i < 3) {
      ASSERT_TRUE(s.ok()) << s.to_string();
      mine.push_back(*b);
      continue;
    }
    EXPECT_EQ(s.code(), Errc::limit) << s.to_string();
    EXPECT_NE(s.message().find("holds 3 blocks of 64 bytes"), std::string::npos) << s.message();
    EXPECT_EQ(a.refcount_or_owner(b->index), kArenaDaemonClient) << "a refused hand-over moves nothing";
    ASSERT_TRUE(a.free_reserved(kArenaDaemonClient, *b).ok());
  }
  EXPECT_EQ(a.reserved_by(5, 0), 3u);
  EXPECT_EQ(a.reserved_by(kArenaDaemonClient, 0), 0u);
  auto other = a.alloc(kArenaDaemonClient, 1);
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(a.hand_over(kArenaDaemonClient, 5, *other).ok()) << "another class has its own limit";
  ASSERT_TRUE(a.pin(5, mine[0], 1).ok()) << "sealing the client's chunk";
  EXPECT_EQ(a.reserved_by(5, 0), 2u);
  auto again = a.alloc(kArenaDaemonClient, 0);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(a.hand_over(kArenaDaemonClient, 5, *again).ok()) << "room again after a seal";
  ASSERT_TRUE(a.hand_over(5, kArenaDaemonClient, mine[1]).ok()) << "the daemon takes back beyond any limit";
  EXPECT_EQ(a.reserved_by(5, 0), 2u);
  auto audit = a.audit();
  ASSERT_TRUE(audit.ok()) << audit.status().to_string();
  auto freed = a.reclaim(5);
  ASSERT_TRUE(freed.ok());
  EXPECT_EQ(*freed, 3u) << "two of class 0, one of class 1";
  EXPECT_EQ(a.reserved_by(5, 0), 0u);
  EXPECT_EQ(a.reserved_by(5, 1), 0u);
  ASSERT_TRUE(a.free_reserved(kArenaDaemonClient, mine[1]).ok());
  ASSERT_TRUE(a.release(kArenaDaemonClient, mine[0]).ok());
  expect_all_free(a);
}

TEST(ChunkArena, ConfigValidationAndAttach) {
  EXPECT_EQ(ArenaBlocks::validate({}).code(), Errc::invalid_argument);
  EXPECT_EQ(ArenaBlocks::validate({{{100, 1}}}).code(), Errc::invalid_argument);         // not a multiple of 64
  EXPECT_EQ(ArenaBlocks::validate({{{128, 1}, {64, 1}}}).code(), Errc::invalid_argument); // not ascending
  EXPECT_EQ(ArenaBlocks::validate({{{64, 0}}}).code(), Errc::invalid_argument);
  EXPECT_EQ(ArenaBlocks::bytes_needed(small_config()), 64u * 40 + 256u * 20 + 4096u * 10) << "blocks only, nothing else";
  SharedArena s(small_config());
  char* data = static_cast<char*>(s.seg.data()) + s.meta_bytes;
  size_t size = s.bytes - s.meta_bytes;
  auto a = ArenaBlocks::attach(data, size, small_config());
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(ArenaBlocks::attach(data, size / 2, small_config()).status().code(), Errc::corrupt);
  EXPECT_EQ(ArenaBlocks::attach(data, size, {}).status().code(), Errc::corrupt);
  // A client's view and the daemon's agree on where every block is.
  EXPECT_EQ(a->total_blocks(), s.arena.total_blocks());
  for (uint32_t i = 0; i < a->total_blocks(); ++i) {
    ASSERT_EQ(a->data({i, 0}), s.arena.data({i, 0}));
    ASSERT_EQ(a->block_size(i), s.arena.block_size(i));
  }
  EXPECT_EQ(a->data({40, 0}), data + 64 * 40) << "class 1 follows class 0";
  EXPECT_EQ(ChunkArena::format(s.seg.data(), 64, data, size, small_config()).status().code(), Errc::invalid_argument)
      << "a meta region too small is refused";
}

// What each hammering client does: take blocks of random classes, stamp them,
// check stamps, give them back. With `refs`, it also plays the daemon's part
// on some blocks: seal, take and drop references (the last one frees).
// Returns false on any inconsistency.
bool hammer(ChunkArena& a, uint32_t client, uint64_t seed, const std::atomic<uint32_t>& stop, int64_t until_ns,
            bool refs = true) {
  std::mt19937_64 rng(seed);
  std::vector<std::pair<BlockRef, bool>> held;  // (block, sealed)
  uint64_t stamp = uint64_t{client} << 40;
  auto check = [&](BlockRef b) { return *static_cast<uint64_t*>(a.data(b)) == (stamp | b.index); };
  while (stop.load(std::memory_order_relaxed) == 0 && (until_ns < 0 || monotonic_ns() < until_ns)) {
    if (held.size() < 6 && rng() % 2) {
      auto b = a.alloc(client, static_cast<uint32_t>(rng() % a.num_classes()));
      if (!b.ok()) {
        if (b.status().code() != Errc::out_of_memory) return false;
        continue;
      }
      *static_cast<uint64_t*>(a.data(*b)) = stamp | b->index;
      bool sealed = refs && rng() % 2;
      if (sealed && !a.seal(client, *b, 1).ok()) return false;
      if (sealed && !a.acquire(*b).ok()) return false;  // 2 references
      if (sealed && !a.release(client, *b).ok()) return false;
      held.push_back({*b, sealed});
    } else if (!held.empty()) {
      size_t i = rng() % held.size();
      auto [b, sealed] = held[i];
      if (!check(b)) return false;
      Status s = sealed ? a.release(client, b) : a.free_reserved(client, b);
      if (!s.ok()) return false;
      held.erase(held.begin() + static_cast<long>(i));
    }
  }
  for (auto [b, sealed] : held) {
    if (!check(b)) return false;
    if (!(sealed ? a.release(client, b) : a.free_reserved(client, b)).ok()) return false;
  }
  return true;
}

TEST(ChunkArena, ThreadsHammerAndEveryBlockIsAccountedFor) {
  SharedArena s(small_config());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  int64_t until = monotonic_ns() + static_cast<int64_t>(test::scaled(2'000'000'000, 4));
  for (uint32_t c = 1; c <= 4; ++c)
    threads.emplace_back([&, c] {
      if (!hammer(s.arena, c, c, *s.stop, until)) ++failures;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  expect_all_free(s.arena);
}

TEST(ChunkArena, ProcessesHammerAndEveryBlockIsAccountedFor) {
  SharedArena s(small_config());
  std::vector<pid_t> pids;
  int64_t until = monotonic_ns() + static_cast<int64_t>(test::scaled(2'000'000'000, 4));
  for (uint32_t c = 1; c <= 4; ++c) {
    pid_t pid = fork();
    if (pid == 0) _exit(hammer(s.arena, c, c * 31, *s.stop, until) ? 0 : 1);
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child failed: " << status;
  }
  expect_all_free(s.arena);
}

// Clients are SIGKILLed at random moments while others keep going; reclaim
// of the dead client's id, run while the others live, recovers everything it
// held, including a free-list operation it died in the middle of. Victims do
// what clients do (take, write, give back); references to sealed chunks are
// the daemon's to count, so the survivor does those.
TEST(ChunkArena, KilledClientsAreReclaimedWhileOthersRun) {
  SharedArena s(ArenaConfig{{{64, 16}, {128, 8}}});  // small: lists are contended
  std::mt19937_64 rng(99);
  pid_t survivor = fork();
  if (survivor == 0) _exit(hammer(s.arena, 1, 1, *s.stop, -1) ? 0 : 1);
  const int rounds = static_cast<int>(test::scaled(200, 4));
  uint64_t reclaimed = 0;
  for (int round = 0; round < rounds; ++round) {
    uint32_t victim_id = 2 + round % 8;
    pid_t victim = fork();
    if (victim == 0) _exit(hammer(s.arena, victim_id, 1000 + round, *s.stop, -1, false) ? 0 : 1);
    usleep(200 + rng() % 3000);
    kill(victim, SIGKILL);
    int status = 0;
    waitpid(victim, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "victim exited by itself: it found an inconsistency (status " << status << ")";
    auto n = s.arena.reclaim(victim_id);
    ASSERT_TRUE(n.ok()) << n.status().to_string();
    reclaimed += *n;
  }
  s.stop->store(1);
  int status = 0;
  waitpid(survivor, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the survivor saw an inconsistency";
  EXPECT_GT(reclaimed, 0u) << "victims should have died holding blocks";
  expect_all_free(s.arena);
}

// A marker left in a free-list head by a client that died between its two
// phases is completed by the next operation of anybody.
TEST(ChunkArena, DeadClientsHalfDoneOperationIsCompletedByOthers) {
  SharedArena s(small_config());
  ChunkArena& a = s.arena;
  ArenaMeta* h = s.meta();
  ArenaIntent* intents = s.intents();
  BlockHeader* blocks = s.blocks();
  // Client 7 "dies" right after announcing a pop of the top block of class 0
  // and installing its marker (phase 1), before completing it.
  uint64_t head = h->lists[0].word.load();
  uint32_t top = static_cast<uint32_t>(head);
  uint64_t st = blocks[top].state.load();
  intents[7].op.store(0);
  intents[7].block.store(top);
  intents[7].from.store(st);
  intents[7].to.store((st & ~((uint64_t{1} << 32) - 1)) | (uint64_t{1} << 30) | 7);  // reserved by 7
  h->lists[0].word.store((((head >> 32) + 1) << 32) | 0x80000000u | 7);
  auto b = a.alloc(1, 0);  // helps finish client 7's pop, then takes the next block
  ASSERT_TRUE(b.ok());
  EXPECT_NE(b->index, top);
  EXPECT_EQ(a.kind(top), BlockKind::reserved);
  EXPECT_EQ(a.refcount_or_owner(top), 7u);
  EXPECT_EQ(*a.reclaim(7), 1u);
  ASSERT_TRUE(a.free_reserved(1, *b).ok());
  expect_all_free(a);
}

// No client reaches the meta region, but a broken list is still reported
// as corrupt, never followed out of bounds: a bug costs an error, not a
// wild write. Blocks and classes out of range are refused.
TEST(ChunkArena, ABrokenFreeListIsReportedNotFollowed) {
  SharedArena s(small_config());
  ChunkArena& a = s.arena;
  ArenaMeta* h = s.meta();
  EXPECT_EQ(a.alloc(1, 3).status().code(), Errc::invalid_argument);
  // A marker naming a client id beyond the table, and a head naming a block
  // of another class: errors, and nothing else changes.
  uint64_t saved = h->lists[0].word.load();
  h->lists[0].word.store((uint64_t{9} << 32) | 0x80000000u | 0x3fffffffu);
  EXPECT_EQ(a.alloc(1, 0).status().code(), Errc::corrupt);
  h->lists[0].word.store((uint64_t{9} << 32) | a.size_class(2).first_block);
  EXPECT_EQ(a.alloc(1, 0).status().code(), Errc::corrupt);
  h->lists[0].word.store(saved);
  EXPECT_EQ(a.free_reserved(1, {a.total_blocks() + 5, 1}).code(), Errc::invalid_argument);
  auto audit = a.audit();
  ASSERT_TRUE(audit.ok()) << audit.status().to_string();
  EXPECT_EQ(audit->free, a.total_blocks());
}

// The last release turns a sealed block into one reserved by the releaser in
// the same CAS, so a releaser that dies before listing it loses nothing.
TEST(ChunkArena, ReleaserKilledAfterLastReferenceIsReclaimed) {
  SharedArena s(small_config());
  ChunkArena& a = s.arena;
  auto b = a.alloc(1, 1);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(a.seal(1, *b, 1).ok());
  pid_t pid = fork();
  if (pid == 0) {
    // Drop the last reference exactly as release() does, then die before the push.
    BlockHeader* blocks = s.blocks();
    uint64_t st = blocks[b->index].state.load();
    uint64_t reserved_by_5 = (st & ~((uint64_t{1} << 32) - 1)) | (uint64_t{1} << 30) | 5;
    if (!blocks[b->index].state.compare_exchange_strong(st, reserved_by_5)) _exit(1);
    raise(SIGKILL);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(a.kind(b->index), BlockKind::reserved);
  EXPECT_EQ(a.acquire(*b).code(), Errc::stale_reference) << "nobody may pin a block on its way out";
  EXPECT_EQ(*a.reclaim(5), 1u);
  expect_all_free(a);
}

}  // namespace
}  // namespace engram
