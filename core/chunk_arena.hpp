// The chunk arena: fixed-size blocks in size classes, in one shared segment.
// Clients (each with its own client id) take blocks, write chunk bytes into
// them and hand them to the daemon; the daemon seals them and counts
// references. Everything here is lock-free, and a client killed at any
// instruction leaves nothing that reclaim() cannot recover.
//
// Layout (offsets from the segment start):
//   ArenaHeader | BlockHeader[total_blocks] | Intent[kArenaMaxClients]
//   | class 0 blocks | class 1 blocks | ...       (each block 64-aligned)
//
// Block state word (one atomic u64, so every transition is one CAS):
//   generation:32 | kind:2 (free, reserved, sealed) | low:30
//   low = owner client id while reserved, reference count while sealed.
//   The generation grows by one on every free, so a reference taken with an
//   old generation fails instead of pinning a recycled block.
//
// Free lists: one Treiber stack of 32-bit block indices per class, linked
// through BlockHeader::next, with a 32-bit ABA tag in the head word that grows
// on every change. To make pop and push survive the death of the process
// doing them, each is a two-phase operation that anyone can finish:
//   1. the client writes its Intent (block, state before, state after) in its
//      own slot, then CASes a marker "client c is popping/pushing" into the
//      head (tag + 1);
//   2. whoever next sees the marker (the client itself, another client, or
//      the daemon's reclaim) completes it: CAS the block's state from
//      before to after, then CAS the head from the marker to its new top.
// The state CAS carries the generation, so a late helper can never apply an
// old intent to a recycled block; the head CAS carries the tag, so it can
// never complete a marker twice. A client's intent slot is rewritten only
// after its own marker has left the head.
//
// Each client id must be used by one thread at a time (its intent slot is
// single-writer). Id 0 is the daemon's.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "core/segment_header.hpp"
#include "core/status.hpp"

namespace engram {

inline constexpr uint32_t kArenaMaxClasses = 16;
inline constexpr uint32_t kArenaMaxClients = 1024;
inline constexpr uint32_t kArenaDaemonClient = 0;
inline constexpr uint32_t kArenaMaxBlocks = 1u << 30;
inline constexpr uint32_t kArenaMaxRefs = (1u << 30) - 1;

enum class BlockKind : uint32_t { free = 0, reserved = 1, sealed = 2 };

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

struct alignas(kCacheLine) FreeListHead {
  std::atomic<uint64_t> word;  // tag:32 | payload:32 (a block index, kNil, or a marker)
};

struct BlockHeader {
  std::atomic<uint64_t> state;
  std::atomic<uint32_t> next;  // free-list link; meaningful while the block is listed
  uint32_t pad_;
};

// A client's announcement of its one pending free-list operation.
struct alignas(kCacheLine) ArenaIntent {
  std::atomic<uint32_t> op;  // 0 pop, 1 push
  std::atomic<uint32_t> block;
  std::atomic<uint64_t> from;  // block state before
  std::atomic<uint64_t> to;    // block state after
};

struct alignas(kCacheLine) ArenaHeader {
  SegmentHeader segment;  // kind arena; version written last
  uint32_t num_classes;
  uint32_t total_blocks;
  uint64_t blocks_offset;
  uint64_t intents_offset;
  uint64_t region_size;
  SizeClass classes[kArenaMaxClasses];
  FreeListHead lists[kArenaMaxClasses];
};
static_assert(sizeof(BlockHeader) == 16);
static_assert(sizeof(ArenaIntent) == kCacheLine);
inline constexpr uint64_t kArenaLayoutHash =
    layout_hash(static_cast<uint64_t>(SegmentKind::arena),
                {layout_of<ArenaHeader>(), layout_of<SizeClass>(), layout_of<FreeListHead>(), layout_of<BlockHeader>(),
                 layout_of<ArenaIntent>(), layout_of<BlockRef>()});

// Counts from a quiescent walk of the arena (see ChunkArena::audit).
struct ArenaAudit {
  uint64_t free = 0, reserved = 0, sealed = 0;
  uint64_t listed = 0;  // blocks reachable from the free lists
};

// Orders a batch of blocks for freeing one by one (free_reserved, release):
// each free list is a stack, so blocks freed highest index first are handed
// out lowest first, in the order of memory, the order in which a writer's
// copies run fastest (bench/NOTES.md, "Block order"). A table's reset
// frees all of its blocks at once, and the next table's writers then take
// them in this order for a whole lap.
void order_for_freeing(std::vector<BlockRef>* blocks);

// Blocks up to this size are prefetched whole; see ChunkArena::prefetch_block.
inline constexpr uint64_t kPrefetchWholeBlock = 4096;

class ChunkArena {
 public:
  ChunkArena() = default;

  static Status validate(const ArenaConfig& c);
  static size_t bytes_needed(const ArenaConfig& c);  // 0 when invalid
  // Formats mem (64-aligned): every block free and listed, generation 1.
  static Result<ChunkArena> format(void* mem, size_t size, const ArenaConfig& c);
  // A view of an arena formatted with config `c`, whose geometry is
  // computed from c here, never read from the segment: the segment is
  // client-writable, and a client that scribbled on its header would
  // otherwise steer every later attach. The server passes c with the
  // arena's descriptor (HelloReply).
  static Result<ChunkArena> attach(void* mem, size_t size, const ArenaConfig& c);
  // The size classes this view was made with.
  ArenaConfig config() const;

  uint32_t num_classes() const noexcept { return num_classes_; }
  const SizeClass& size_class(uint32_t k) const noexcept { return classes_[k]; }
  uint32_t total_blocks() const noexcept { return total_blocks_; }
  // Smallest class whose blocks hold `bytes`, or Errc::invalid_argument.
  Result<uint32_t> class_for(uint64_t bytes) const;

  // Takes a free block of class k for `client`: it becomes reserved by client.
  // Errc::out_of_memory when the class has none left.
  Result<BlockRef> alloc(uint32_t client, uint32_t k) noexcept;
  // Returns a block reserved by `client` to its free list.
  Status free_reserved(uint32_t client, BlockRef b) noexcept;
  // Reserved by `owner` -> sealed with `refs` (>= 1) references.
  Status seal(uint32_t owner, BlockRef b, uint32_t refs) noexcept;
  // One more reference to a sealed block; Errc::stale_reference if the
  // generation moved on or no reference is left.
  Status acquire(BlockRef b) noexcept;
  // One reference to a block that `owner` may still hold reserved: seals it
  // with one reference if it is reserved by `owner`, else acquires it. This
  // is how the daemon takes a writer's finished chunk: whichever table
  // owner sees it first seals it, the others add references.
  // `refs` (>= 1) references at once: one CAS for a hold and an item.
  Status pin(uint32_t owner, BlockRef b, uint32_t refs = 1) noexcept;
  // Drops a reference; the last one frees the block, using `client`'s intent slot.
  Status release(uint32_t client, BlockRef b) noexcept;
  // Drops a reference like release(), but the last one leaves the block
  // reserved by `client` (*last = true) for the caller to list later with
  // free_reserved: a batch of frees then takes the free list's cache line
  // once instead of once per block.
  Status unref(uint32_t client, BlockRef b, bool* last) noexcept;
  // Reserved by `from` -> reserved by `to`, one CAS: a block freed by the
  // daemon goes straight to the client that will write it next, without a
  // trip through the free list. If `to` dies, reclaim(to) frees it.
  Status hand_over(uint32_t from, uint32_t to, BlockRef b) noexcept;
  // After `dead` died: finishes its pending free-list operation, if any, and
  // frees every block it still had reserved (using the daemon's intent
  // slot). Returns the number of blocks freed. Must not run while `dead` lives.
  Result<uint64_t> reclaim(uint32_t dead) noexcept;

  // Walks everything; call only when no operation is in flight. Errc::corrupt
  // if a free block is not listed exactly once or a listed one is not free.
  Result<ArenaAudit> audit() const;

  // The block's bytes; `b.index` must be < total_blocks().
  void* data(BlockRef b) const noexcept;
  uint64_t block_size(uint32_t index) const noexcept { return classes_[class_of(index)].block_size; }
  // Hints that block `index`'s state word (< total_blocks()) is needed soon:
  // a batch of acquires then overlaps its cache misses.
  void prefetch_state(uint32_t index) const noexcept { __builtin_prefetch(&blocks_[index], 1); }
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
  BlockKind kind(uint32_t index) const noexcept;
  uint32_t generation(uint32_t index) const noexcept;
  uint32_t refcount_or_owner(uint32_t index) const noexcept;

 private:
  ChunkArena(ArenaHeader* h, const ArenaHeader& geometry);
  Status check_ref(BlockRef b, const char* op) const noexcept;
  // Reserved by `owner` (this generation) -> state `to`, in one CAS;
  // Errc::stale_reference if b is not reserved by owner.
  Status leave_reserved(uint32_t owner, BlockRef b, uint64_t to) noexcept;
  // Completes the marker in head word `h` of list k, if it is still there.
  Status complete(uint32_t k, uint64_t h) noexcept;
  Status push(uint32_t client, uint32_t k, uint32_t index, uint64_t from) noexcept;

  // The class of block `index` (< total_blocks_), from the private copy.
  uint32_t class_of(uint32_t index) const noexcept;
  // Block `index`'s bytes, given its class sc.
  char* block_bytes(const SizeClass& sc, uint32_t index) const noexcept {
    return base_ + sc.data_offset + uint64_t{index - sc.first_block} * sc.block_size;
  }

  // The whole segment is client-writable, so the geometry lives in the
  // view, planned from the config, and is never read from shared memory: a
  // client scribbling on the header cannot steer anyone out of bounds.
  ArenaHeader* h_ = nullptr;
  uint32_t num_classes_ = 0;
  uint32_t total_blocks_ = 0;
  SizeClass classes_[kArenaMaxClasses] = {};
  BlockHeader* blocks_ = nullptr;
  ArenaIntent* intents_ = nullptr;
  char* base_ = nullptr;
};

}  // namespace engram
