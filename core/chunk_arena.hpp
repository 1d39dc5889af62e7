// The chunk arena's allocator: which block is free, reserved (and by whom)
// or sealed (with how many references), and the free lists. It is the
// daemon's alone: its memory (the meta region) is private to engramd, and
// clients get blocks only through the daemon (granted over the control
// socket, or handed over with insert acks) and give them back the same way.
// A client that scribbles on shared memory can spoil chunk bytes, never the
// allocation that every client depends on. The blocks themselves are the
// shared ArenaBlocks that this class extends.
//
// Meta layout (offsets from the meta region's start):
//   ArenaMeta (free-list heads, per-class limits) | BlockHeader[total_blocks] |
//   ArenaIntent[kArenaMaxClients] | ArenaHolding[kArenaMaxClients]
//
// Block state word (one atomic u64, so every transition is one CAS):
//   generation:32 | kind:2 (free, reserved, sealed) | low:30
//   low = owner id while reserved, reference count while sealed.
//   The generation grows by one on every free, so a reference taken with an
//   old generation fails instead of pinning a recycled block.
//
// Free lists: one Treiber stack of 32-bit block indices per class, linked
// through BlockHeader::next, with a 32-bit ABA tag in the head word that grows
// on every change. Each pop and push is a two-phase operation that anyone can
// finish, so no thread ever waits on another that stopped half-way (the
// daemon's table owners, control thread and checkpointer share the lists;
// the design dates from when clients shared them too, and the tests still
// hold it to surviving a process killed at any instruction):
//   1. the thread writes its Intent (block, state before, state after) in its
//      id's slot, then CASes a marker "id c is popping/pushing" into the
//      head (tag + 1);
//   2. whoever next sees the marker completes it: CAS the block's state from
//      before to after, then CAS the head from the marker to its new top.
// The state CAS carries the generation, so a late helper can never apply an
// old intent to a recycled block; the head CAS carries the tag, so it can
// never complete a marker twice. An id's intent slot is rewritten only
// after its own marker has left the head.
//
// The list operations of one id (alloc, free_reserved, release, reclaim's
// frees with id 0) must come from one thread at a time: its intent slot is
// single-writer. Id 0 is the daemon's control thread's.
//
// Holdings: how many blocks of each class each id holds reserved, counted
// by the id's own operations after their transition is done (a helper that
// completes another's free-list operation counts nothing). So a count can
// lag its blocks' states only while that id's operation is in flight, and
// audit(), which needs quiescence, finds them equal. hand_over to a client
// checks the receiver's count against its class's limit first: that is
// the one way a client gets blocks (grants and spares), and the limit is
// what keeps one client from taking a class whole.
//
// Growth: a class may be formatted with fewer blocks than its geometry
// holds (its first `committed` ones); the rest are a hole in the segment,
// their states zero (generation 0: no reference can name them) and on no
// list. When a class's list is empty, alloc() commits more of them through
// the ArenaGrowth the daemon set (its pages reserved first, then the new
// blocks formatted and pushed as one sublist in one CAS of the head), up
// to the class's geometry and the bytes all classes may take. Committed
// blocks stay committed. Walks over the blocks (reclaim, audit) go only
// over each class's committed prefix.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "core/arena_blocks.hpp"
#include "core/segment_header.hpp"
#include "core/status.hpp"

namespace engram {

inline constexpr uint32_t kArenaMaxClients = 1024;
inline constexpr uint32_t kArenaDaemonClient = 0;
inline constexpr uint32_t kArenaMaxRefs = (1u << 30) - 1;

enum class BlockKind : uint32_t { free = 0, reserved = 1, sealed = 2 };

struct alignas(kCacheLine) FreeListHead {
  std::atomic<uint64_t> word;  // tag:32 | payload:32 (a block index, kNil, or a marker)
};

struct BlockHeader {
  std::atomic<uint64_t> state;
  std::atomic<uint32_t> next;  // free-list link; meaningful while the block is listed
  uint32_t pad_;
};

// An id's announcement of its one pending free-list operation.
struct alignas(kCacheLine) ArenaIntent {
  std::atomic<uint32_t> op;  // 0 pop, 1 push
  std::atomic<uint32_t> block;
  std::atomic<uint64_t> from;  // block state before
  std::atomic<uint64_t> to;    // block state after
};

// How an arena grows on demand (see Growth above). The daemon's; one per
// arena, outliving it.
struct ArenaGrowth {
  // Reserves the pages of `bytes` of the blocks' segment from `offset`
  // (ShmSegment::commit); an error leaves the class as it was.
  std::function<Status(uint64_t offset, uint64_t bytes)> commit;
  // Gives back the pages of `bytes` from `offset` (ShmSegment::release):
  // trim_holes' way to undo a client's touch of a hole.
  std::function<Status(uint64_t offset, uint64_t bytes)> release;
  // Told after class k grew to `committed` blocks (the daemon raises its
  // client limit and logs it).
  std::function<void(uint32_t k, uint32_t committed)> grown;
  uint64_t max_bytes = 0;  // what every class's committed blocks may take in all
  std::mutex lock;         // one growth at a time
  uint64_t committed_bytes = 0;  // under lock
  Status last_refusal;           // under lock: why the last growth did not happen
};

struct alignas(kCacheLine) ArenaMeta {
  FreeListHead lists[kArenaMaxClasses];
  // Blocks of each class one client may hold reserved (hand_over's limit).
  std::atomic<uint32_t> client_limit[kArenaMaxClasses];
  // Blocks of each class formatted (the rest are not yet committed).
  std::atomic<uint32_t> committed[kArenaMaxClasses];
  ArenaGrowth* growth;  // nullptr: the classes stay as formatted
};

// An id's blocks held reserved, by class: one cache line per id, written by
// whichever threads move that id's blocks (the control thread, the owners).
struct alignas(kCacheLine) ArenaHolding {
  std::atomic<uint32_t> reserved[kArenaMaxClasses];
};
static_assert(sizeof(BlockHeader) == 16);
static_assert(sizeof(ArenaIntent) == kCacheLine);
static_assert(sizeof(ArenaHolding) == kCacheLine);

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

class ChunkArena : public ArenaBlocks {
 public:
  ChunkArena() = default;

  // Bytes of the meta region for config c; 0 when c is invalid.
  static size_t meta_bytes_needed(const ArenaConfig& c);
  // Formats the allocator in `meta` (64-aligned, meta_bytes_needed bytes,
  // zeroed where no block is committed) over the blocks in `data`
  // (ArenaBlocks::bytes_needed bytes): every committed block free and
  // listed, generation 1. `committed` (one count per class, each at most
  // its class's) commits a prefix of each class; empty commits all.
  static Result<ChunkArena> format(void* meta, size_t meta_size, void* data, size_t data_size, const ArenaConfig& c,
                                   const std::vector<uint32_t>& committed = {});
  // Lets the classes grow on demand through `g` (nullptr: no more).
  // Set before any operation; g->committed_bytes is set here.
  void set_growth(ArenaGrowth* g) noexcept;
  // Blocks of class k (< num_classes()) committed now: the first ones of
  // size_class(k).count.
  uint32_t committed(uint32_t k) const noexcept { return meta_->committed[k].load(std::memory_order_acquire); }
  // The most blocks class k (< num_classes()) can have: committed(k),
  // and as many more as its layout and the growth's bytes still allow.
  uint32_t most_blocks(uint32_t k) const;
  // Gives back whatever pages the classes' holes hold: every client maps
  // them, and a read or write there (a scan of every block, a scribble)
  // allocates a page that would otherwise stay with the segment until the
  // server stops, past grow_to. Under the growth's lock, so that no
  // growth commits a range while it is trimmed. The daemon calls it each
  // second; a no-op without growth.
  Status trim_holes() const;
  // Why the arena's last growth did not happen ("" if it did): for the
  // messages of a writer that waits.
  std::string growth_refusal() const;

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
  // Errc::limit, and nothing changes, when `to` (any id but the daemon's)
  // already holds client_limit(k) blocks of the block's class k.
  Status hand_over(uint32_t from, uint32_t to, BlockRef b) noexcept;
  // The most blocks of class k (< num_classes()) that one client may hold
  // reserved; every block of the class until set.
  void set_client_limit(uint32_t k, uint32_t n) noexcept;
  uint32_t client_limit(uint32_t k) const noexcept;
  // Class k's free-list head word: it changes whenever a block of the
  // class is listed or taken (its tag grows), so a word that stayed the
  // same says that none was, in between. k < num_classes().
  uint64_t free_list_word(uint32_t k) const noexcept { return meta_->lists[k].word.load(std::memory_order_acquire); }
  // Blocks of class k that `id` holds reserved now.
  uint32_t reserved_by(uint32_t id, uint32_t k) const noexcept;
  // After `dead` is gone: finishes its pending free-list operation, if any,
  // frees every block it still had reserved (using the daemon's intent
  // slot) and zeroes its holdings. Returns the number of blocks freed. Must
  // not run while `dead` may still use its id.
  Result<uint64_t> reclaim(uint32_t dead) noexcept;

  // Walks everything; call only when no operation is in flight. Errc::corrupt
  // if a free block is not listed exactly once, a listed one is not free, or
  // an id's holding differs from the blocks reserved by it.
  Result<ArenaAudit> audit() const;

  // Hints that block `index`'s state word (< total_blocks()) is needed soon:
  // a batch of acquires then overlaps its cache misses.
  void prefetch_state(uint32_t index) const noexcept { __builtin_prefetch(&blocks_[index], 1); }
  BlockKind kind(uint32_t index) const noexcept;
  uint32_t generation(uint32_t index) const noexcept;
  uint32_t refcount_or_owner(uint32_t index) const noexcept;

 private:
  ChunkArena(const ArenaBlocks& blocks, void* meta);
  Status check_ref(BlockRef b, const char* op) const noexcept;
  // Reserved by `owner` (this generation) -> state `to`, in one CAS;
  // Errc::stale_reference if b is not reserved by owner.
  Status leave_reserved(uint32_t owner, BlockRef b, uint64_t to) noexcept;
  // Commits more blocks of class k, whose list was found empty; false if
  // none could be (no growth, the class or the bytes at their bound, or
  // commit failed: growth_refusal says which).
  bool grow(uint32_t k) noexcept;
  // Completes the marker in head word `h` of list k, if it is still there.
  Status complete(uint32_t k, uint64_t h) noexcept;
  Status push(uint32_t client, uint32_t k, uint32_t index, uint64_t from) noexcept;
  // Counts one block of block `index`'s class more (+1) or less (-1) for `id`.
  void count_reserved(uint32_t id, uint32_t index, int delta) noexcept;

  ArenaMeta* meta_ = nullptr;
  BlockHeader* blocks_ = nullptr;
  ArenaIntent* intents_ = nullptr;
  ArenaHolding* holdings_ = nullptr;
};

}  // namespace engram
