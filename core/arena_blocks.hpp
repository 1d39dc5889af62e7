// The arena's blocks: the shared segment that holds chunk bytes, and its
// geometry. Every client maps it read-write and writes chunks into the
// blocks the daemon reserved for it; nothing in it steers anyone: the
// geometry is planned from the size classes (which the server sends with
// the segment's descriptor), never read from the segment, and the
// allocation state (which block is free, whose, how many references) is
// the daemon's alone (ChunkArena, in memory no client maps).
//
// Layout: class 0 blocks | class 1 blocks | ...   (from offset 0, the
// segment's first page; each block a multiple of 64 bytes)
//
// A client can write any block's bytes, its own or not: readers check what
// they read (chunk headers, column extents), so a scribble costs data,
// never the daemon.
#pragma once

#include <cstdint>
#include <vector>

#include "core/segment_header.hpp"
#include "core/status.hpp"

namespace engram {

inline constexpr uint32_t kArenaMaxClasses = 16;
inline constexpr uint32_t kArenaMaxBlocks = 1u << 30;

// A block as of one generation.
struct BlockRef {
  uint32_t index;
  uint32_t generation;
};

// A BlockRef as one integer (for sets and maps), and back.
inline uint64_t pack_block(BlockRef b) noexcept { return uint64_t{b.generation} << 32 | b.index; }
inline BlockRef unpack_block(uint64_t v) noexcept { return {static_cast<uint32_t>(v), static_cast<uint32_t>(v >> 32)}; }

struct SizeClassConfig {
  uint64_t block_size;  // bytes, a multiple of 64
  uint32_t count;       // blocks
};

struct ArenaConfig {
  std::vector<SizeClassConfig> classes;  // ascending, distinct block sizes
};

struct SizeClass {
  uint64_t block_size;
  uint64_t data_offset;  // of the class's first block
  uint32_t first_block;  // global index of the class's first block
  uint32_t count;
};

// What clients and the daemon must agree on to share the blocks.
inline constexpr uint64_t kArenaLayoutHash =
    layout_hash(static_cast<uint64_t>(SegmentKind::arena), {layout_of<BlockRef>(), layout_of<SizeClassConfig>()});

// Blocks up to this size are prefetched whole; see ArenaBlocks::prefetch_block.
inline constexpr uint64_t kPrefetchWholeBlock = 4096;

class ArenaBlocks {
 public:
  ArenaBlocks() = default;

  static Status validate(const ArenaConfig& c);
  // Bytes of the shared segment; 0 when c is invalid.
  static size_t bytes_needed(const ArenaConfig& c);
  // A view of the blocks in mem (page-aligned, as mmap gives it), laid out
  // for config c. Errc::corrupt if c is invalid or mem too small.
  static Result<ArenaBlocks> attach(void* mem, size_t size, const ArenaConfig& c);
  // The size classes this view was made with.
  ArenaConfig config() const;

  uint32_t num_classes() const noexcept { return num_classes_; }
  const SizeClass& size_class(uint32_t k) const noexcept { return classes_[k]; }
  uint32_t total_blocks() const noexcept { return total_blocks_; }
  // Smallest class whose blocks hold `bytes`, or Errc::invalid_argument.
  Result<uint32_t> class_for(uint64_t bytes) const;
  // The class of block `index` (< total_blocks()).
  uint32_t class_of(uint32_t index) const noexcept;

  // The block's bytes; `b.index` must be < total_blocks().
  void* data(BlockRef b) const noexcept { return block_bytes(classes_[class_of(b.index)], b.index); }
  uint64_t block_size(uint32_t index) const noexcept { return classes_[class_of(index)].block_size; }
  // Hints that block `index` (< total_blocks()) is about to be written
  // (`for_write`) or read whole: a small block (up to kPrefetchWholeBlock
  // bytes) is fetched whole, a larger one only its first line (the chunk
  // header). A writer's copy into a block last touched long ago otherwise
  // waits on each line in turn once the store buffer fills, and a sampler's
  // copy out of scattered small chunks on each chunk in turn; a large
  // block's copy is a stream the hardware prefetcher follows, and
  // prefetching ahead of it only competes. For writing, the lines are
  // fetched exclusive (prefetch_for_write), so that the copy's stores need
  // not wait for another core to give them up.
  void prefetch_block(uint32_t index, bool for_write) const noexcept;

 protected:
  char* block_bytes(const SizeClass& sc, uint32_t index) const noexcept {
    return base_ + sc.data_offset + uint64_t{index - sc.first_block} * sc.block_size;
  }

 private:
  uint32_t num_classes_ = 0;
  uint32_t total_blocks_ = 0;
  SizeClass classes_[kArenaMaxClasses] = {};
  char* base_ = nullptr;
};

}  // namespace engram
