// The arena a server gets without [arena] (server/config.hpp): classes
// fine enough that a small one-step chunk takes a small block, and blocks
// enough for the configured tables, within a quarter of memory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "core/arena_blocks.hpp"
#include "core/chunk_format.hpp"
#include "core/table.hpp"
#include "server/config.hpp"

namespace engram {
namespace {

CheckedTableOptions table_of(const char* name, uint64_t max_size, uint32_t step_bytes) {
  TableOptions o;
  o.name = name;
  o.capacity = max_size;
  Column c{};
  std::strcpy(c.name, "x");
  c.dtype = static_cast<uint32_t>(DType::u8);
  c.rank = 1;
  c.shape[0] = step_bytes;
  o.signature.push_back(c);
  auto checked = Table::check(o);
  EXPECT_TRUE(checked.ok()) << checked.status().message();
  return *checked;
}

const SizeClassConfig& class_of(const ArenaConfig& a, uint64_t block_size) {
  for (const SizeClassConfig& k : a.classes)
    if (k.block_size == block_size) return k;
  ADD_FAILURE() << "no class of " << block_size << " bytes";
  return a.classes.front();
}

uint64_t bytes(const ArenaConfig& a) {
  uint64_t n = 0;
  for (const SizeClassConfig& k : a.classes) n += k.block_size * k.count;
  return n;
}

uint32_t one_step_block(const ArenaConfig& a, const CheckedTableOptions& t) {
  auto blocks = ArenaBlocks::bytes_needed(a);
  EXPECT_GT(blocks, 0u);
  size_t need = chunk_bytes(t->signature.data(), static_cast<uint32_t>(t->signature.size()), 1);
  for (const SizeClassConfig& k : a.classes)
    if (k.block_size >= need) return static_cast<uint32_t>(k.block_size);
  return 0;
}

// A chunk wastes less than half its block: 140 B of step in 256 B, 400 B
// in 512 B (4 KiB each before).
TEST(ArenaSizing, TheDefaultClassesFitSmallChunks) {
  ArenaConfig a = default_arena();
  EXPECT_TRUE(ArenaBlocks::validate(a).ok());
  EXPECT_EQ(one_step_block(a, table_of("t", 10, 140)), 256u);
  EXPECT_EQ(one_step_block(a, table_of("t", 10, 400)), 512u);
  EXPECT_EQ(one_step_block(a, table_of("t", 10, 3000)), 4096u);
  for (size_t i = 1; i < a.classes.size(); ++i)
    EXPECT_GE(a.classes[i].block_size, 2 * a.classes[i - 1].block_size);
  EXPECT_EQ(class_of(a, 512).count, 65536u);
}

// Tables of one class add up; a class keeps its default count when that is
// more; other classes stay as they were.
TEST(ArenaSizing, ConfiguredTablesGetBlocksForTheirMaxSize) {
  ArenaConfig base = default_arena();
  ArenaConfig a = arena_for_tables(base, {table_of("a", 200000, 400), table_of("b", 50000, 300),
                                          table_of("c", 10, 140)});
  EXPECT_EQ(class_of(a, 512).count, 250000u);
  EXPECT_EQ(class_of(a, 256).count, class_of(base, 256).count);
  EXPECT_EQ(class_of(a, 4096).count, class_of(base, 4096).count);
  EXPECT_TRUE(ArenaBlocks::validate(a).ok());
}

// A table that would need more than a quarter of memory gets what is left
// of it, and the arena stays valid.
TEST(ArenaSizing, TheSizedArenaStaysWithinAQuarterOfMemory) {
  const uint64_t quarter = static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGESIZE) / 4;
  ArenaConfig a = arena_for_tables(default_arena(), {table_of("huge", 1u << 30, 30000), table_of("more", 1u << 30, 400)});
  EXPECT_LE(bytes(a), quarter);
  EXPECT_GT(bytes(a), quarter - (8u << 20)) << "the first table takes what is left";
  EXPECT_LE(class_of(a, 512).count, 65536u + (64u << 10) / 512) << "less than a block of the first is left";
  EXPECT_TRUE(ArenaBlocks::validate(a).ok());
}

// The arena's plan (plan_arena): without [arena] the default classes grow
// to a quarter of memory, each class laid out to take all of it; with
// classes they do not grow unless grow_to says so; grow_to alone grows
// the default classes.
TEST(ArenaSizing, ThePlanLaysEachClassOutToTakeAllTheRoomToGrow) {
  ServerConfig c;
  ArenaPlan p = plan_arena(c);
  EXPECT_EQ(p.grow_to, quarter_of_memory());
  EXPECT_EQ(p.start_bytes, bytes(default_arena()));
  uint64_t blocks = 0;
  for (size_t k = 0; k < p.layout.classes.size(); ++k) {
    const SizeClassConfig& most = p.layout.classes[k];
    const SizeClassConfig& start = p.start.classes[k];
    EXPECT_EQ(most.block_size, start.block_size);
    EXPECT_EQ(most.count, start.count + (p.grow_to - p.start_bytes) / most.block_size) << most.block_size;
    blocks += most.count;
  }
  EXPECT_LT(blocks, kArenaMaxBlocks);
  EXPECT_TRUE(ArenaBlocks::validate(p.layout).ok());
  c.arena = ArenaConfig{{{4096, 100}}};
  p = plan_arena(c);
  EXPECT_EQ(p.grow_to, p.start_bytes) << "configured classes stay as they are";
  EXPECT_EQ(p.layout.classes[0].count, 100u);
  c.arena_grow_to = 4096 * 1000;
  p = plan_arena(c);
  EXPECT_EQ(p.layout.classes[0].count, 1000u);
  c.arena = {};
  c.arena_grow_to = 1ull << 30;
  p = plan_arena(c);
  EXPECT_EQ(p.start_bytes, bytes(default_arena()));
  EXPECT_EQ(p.grow_to, 1ull << 30);
}

TEST(ArenaSizing, SizeTextIsWhatParseSizeReads) {
  for (uint64_t v : {0ull, 1ull, 400ull, 1024ull, 4096ull, 1536ull, 65536ull, 8ull << 20, 3ull << 30, (1ull << 40) + 1024}) {
    auto back = parse_size(size_text(v));
    ASSERT_TRUE(back.ok()) << size_text(v) << ": " << back.status().message();
    EXPECT_EQ(*back, v) << size_text(v);
  }
  EXPECT_EQ(size_text(4096), "4KiB");
  EXPECT_EQ(size_text(1536), "1536B");
  EXPECT_EQ(size_text(8u << 20), "8MiB");
}

}  // namespace
}  // namespace engram
