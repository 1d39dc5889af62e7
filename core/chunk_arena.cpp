#include "core/chunk_arena.hpp"

#include <algorithm>
#include <string>

#include "core/futex.hpp"

namespace engram {

namespace {

// --- block state word: generation:32 | kind:2 | low:30 ----------------------
constexpr uint64_t kLowMask = (1u << 30) - 1;
constexpr uint64_t make_state(uint32_t gen, BlockKind kind, uint32_t low) {
  return (uint64_t{gen} << 32) | (uint64_t{static_cast<uint32_t>(kind)} << 30) | (low & kLowMask);
}
constexpr uint32_t state_gen(uint64_t s) { return static_cast<uint32_t>(s >> 32); }
constexpr BlockKind state_kind(uint64_t s) { return static_cast<BlockKind>((s >> 30) & 3); }
constexpr uint32_t state_low(uint64_t s) { return static_cast<uint32_t>(s & kLowMask); }

// --- free-list head word: tag:32 | payload:32 --------------------------------
// payload: a block index (< 2^30), kNil, or a marker (bit 31) with the
// operation in bit 30 and the client id in bits 0..29.
constexpr uint32_t kNil = 0x7fffffffu;
constexpr uint32_t kMarker = 0x80000000u;
constexpr uint32_t kMarkerPush = 0x40000000u;
constexpr uint32_t kOpPop = 0, kOpPush = 1;
constexpr uint64_t make_head(uint32_t tag, uint32_t payload) { return (uint64_t{tag} << 32) | payload; }
constexpr uint32_t head_tag(uint64_t h) { return static_cast<uint32_t>(h >> 32); }
constexpr uint32_t head_payload(uint64_t h) { return static_cast<uint32_t>(h); }
constexpr bool is_marker(uint32_t payload) { return (payload & kMarker) != 0; }
constexpr uint32_t marker_client(uint32_t payload) { return payload & static_cast<uint32_t>(kLowMask); }

}  // namespace

namespace {
// The meta region's parts, as offsets from its start.
struct MetaPlan {
  size_t blocks, intents, holdings, total;
};
MetaPlan plan_meta(uint32_t total_blocks) {
  MetaPlan p;
  p.blocks = sizeof(ArenaMeta);
  p.intents = align_up(p.blocks + sizeof(BlockHeader) * total_blocks, kCacheLine);
  p.holdings = p.intents + sizeof(ArenaIntent) * kArenaMaxClients;
  p.total = p.holdings + sizeof(ArenaHolding) * kArenaMaxClients;
  return p;
}
}  // namespace

size_t ChunkArena::meta_bytes_needed(const ArenaConfig& c) {
  if (!validate(c).ok()) return 0;
  uint64_t total = 0;
  for (const auto& sc : c.classes) total += sc.count;
  return plan_meta(static_cast<uint32_t>(total)).total;
}

Result<ChunkArena> ChunkArena::format(void* meta, size_t meta_size, void* data, size_t data_size, const ArenaConfig& c,
                                      const std::vector<uint32_t>& committed) {
  auto blocks = ArenaBlocks::attach(data, data_size, c);
  if (!blocks.ok()) return Status{Errc::invalid_argument, blocks.status().message()};
  if (reinterpret_cast<uintptr_t>(meta) % kCacheLine != 0)
    return Status{Errc::invalid_argument, "arena meta memory must be 64-byte aligned"};
  size_t need = plan_meta(blocks->total_blocks()).total;
  if (meta_size < need)
    return Status{Errc::invalid_argument, "arena meta needs " + std::to_string(need) + " bytes, got " + std::to_string(meta_size)};
  if (!committed.empty() && committed.size() != c.classes.size())
    return Status{Errc::invalid_argument, "arena: " + std::to_string(committed.size()) + " committed counts for " +
                                              std::to_string(c.classes.size()) + " size classes"};
  for (size_t k = 0; k < committed.size(); ++k)
    if (committed[k] > c.classes[k].count)
      return Status{Errc::invalid_argument, "arena: size class " + std::to_string(k) + " commits " +
                                                std::to_string(committed[k]) + " of its " +
                                                std::to_string(c.classes[k].count) + " blocks"};
  ChunkArena a(*blocks, meta);
  a.meta_->growth = nullptr;
  for (uint32_t i = 0; i < kArenaMaxClients; ++i) {
    a.intents_[i].op.store(0, std::memory_order_relaxed);
    a.intents_[i].block.store(kNil, std::memory_order_relaxed);
    a.intents_[i].from.store(0, std::memory_order_relaxed);
    a.intents_[i].to.store(0, std::memory_order_relaxed);
    for (auto& n : a.holdings_[i].reserved) n.store(0, std::memory_order_relaxed);
  }
  // Each class's list holds its blocks in index order: first block on top.
  for (uint32_t k = 0; k < a.num_classes(); ++k) {
    const SizeClass& sc = a.size_class(k);
    const uint32_t n = committed.empty() ? sc.count : committed[k];
    for (uint32_t j = 0; j < n; ++j) {
      uint32_t b = sc.first_block + j;
      a.blocks_[b].state.store(make_state(1, BlockKind::free, 0), std::memory_order_relaxed);
      a.blocks_[b].next.store(j + 1 < n ? b + 1 : kNil, std::memory_order_relaxed);
    }
    a.meta_->lists[k].word.store(make_head(0, n > 0 ? sc.first_block : kNil), std::memory_order_relaxed);
    a.meta_->client_limit[k].store(sc.count, std::memory_order_relaxed);
    a.meta_->committed[k].store(n, std::memory_order_relaxed);
  }
  std::atomic_thread_fence(std::memory_order_release);
  return a;
}

ChunkArena::ChunkArena(const ArenaBlocks& blocks, void* meta)
    : ArenaBlocks(blocks),
      meta_(new (meta) ArenaMeta),
      blocks_(reinterpret_cast<BlockHeader*>(static_cast<char*>(meta) + plan_meta(blocks.total_blocks()).blocks)),
      intents_(reinterpret_cast<ArenaIntent*>(static_cast<char*>(meta) + plan_meta(blocks.total_blocks()).intents)),
      holdings_(reinterpret_cast<ArenaHolding*>(static_cast<char*>(meta) + plan_meta(blocks.total_blocks()).holdings)) {}

void ChunkArena::set_growth(ArenaGrowth* g) noexcept {
  if (g) {
    uint64_t bytes = 0;
    for (uint32_t k = 0; k < num_classes(); ++k) bytes += uint64_t{committed(k)} * size_class(k).block_size;
    std::lock_guard lock(g->lock);
    g->committed_bytes = bytes;
  }
  meta_->growth = g;
}

uint32_t ChunkArena::most_blocks(uint32_t k) const {
  ArenaGrowth* g = meta_->growth;
  const uint32_t have = committed(k);
  if (!g) return have;
  std::lock_guard lock(g->lock);
  const uint64_t room = g->max_bytes > g->committed_bytes ? g->max_bytes - g->committed_bytes : 0;
  return static_cast<uint32_t>(std::min<uint64_t>(size_class(k).count, have + room / size_class(k).block_size));
}

Status ChunkArena::trim_holes() const {
  ArenaGrowth* g = meta_->growth;
  if (!g || !g->release) return Status::Ok();
  std::lock_guard lock(g->lock);
  for (uint32_t k = 0; k < num_classes(); ++k) {
    const SizeClass& sc = size_class(k);
    const uint64_t from = uint64_t{committed(k)} * sc.block_size, end = uint64_t{sc.count} * sc.block_size;
    if (from < end)
      if (Status s = g->release(sc.data_offset + from, end - from); !s.ok()) return s;
  }
  return Status::Ok();
}

std::string ChunkArena::growth_refusal() const {
  ArenaGrowth* g = meta_->growth;
  if (!g) return "the arena does not grow";
  std::lock_guard lock(g->lock);
  return g->last_refusal.message();
}

// A class grows by a quarter of what it has, and by at least 8 MiB: a few
// growths take a class from its start to any size (each a fallocate and a
// populate, some milliseconds), and none is so small that a writer's
// batch of grants meets the next at once.
constexpr uint64_t kGrowAtLeastBytes = 8u << 20;

bool ChunkArena::grow(uint32_t k) noexcept {
  ArenaGrowth* g = meta_->growth;
  if (!g) return false;
  std::lock_guard lock(g->lock);
  std::atomic<uint64_t>& head = meta_->lists[k].word;
  if (head_payload(head.load(std::memory_order_acquire)) != kNil) return true;  // freed or grown meanwhile
  const SizeClass& sc = size_class(k);
  const uint32_t have = committed(k);
  uint64_t n = std::max<uint64_t>(have / 4, (kGrowAtLeastBytes + sc.block_size - 1) / sc.block_size);
  n = std::min<uint64_t>(n, sc.count - have);
  const uint64_t room = g->max_bytes > g->committed_bytes ? g->max_bytes - g->committed_bytes : 0;
  n = std::min<uint64_t>(n, room / sc.block_size);
  if (n == 0) {
    g->last_refusal = Status{Errc::out_of_memory,
                             (have == sc.count ? "the class has grown to the most blocks laid out for it (" +
                                                     std::to_string(sc.count) + ") within its bound"
                                               : std::string("the arena has grown to its bound")) +
                                 ", [arena] grow_to = " + std::to_string(g->max_bytes) + " bytes"};
    return false;
  }
  if (Status s = g->commit(sc.data_offset + uint64_t{have} * sc.block_size, n * sc.block_size); !s.ok()) {
    g->last_refusal = s;
    return false;
  }
  // Formatted before they are reachable: the CAS below publishes them.
  const uint32_t first = sc.first_block + have, count = static_cast<uint32_t>(n);
  for (uint32_t j = 0; j < count; ++j) {
    blocks_[first + j].state.store(make_state(1, BlockKind::free, 0), std::memory_order_relaxed);
    blocks_[first + j].next.store(first + j + 1, std::memory_order_relaxed);
  }
  // Committed before listed: a walk that sees them listed (and taken)
  // also sees them committed.
  meta_->committed[k].store(have + count, std::memory_order_release);
  for (;;) {
    uint64_t h = head.load(std::memory_order_acquire);
    if (is_marker(head_payload(h))) {
      (void)complete(k, h);
      continue;
    }
    blocks_[first + count - 1].next.store(head_payload(h), std::memory_order_relaxed);
    if (head.compare_exchange_weak(h, make_head(head_tag(h) + 1, first), std::memory_order_acq_rel)) break;
  }
  g->committed_bytes += n * sc.block_size;
  g->last_refusal = Status::Ok();
  if (g->grown) g->grown(k, have + count);
  return true;
}

void ChunkArena::count_reserved(uint32_t id, uint32_t index, int delta) noexcept {
  holdings_[id].reserved[class_of(index)].fetch_add(static_cast<uint32_t>(delta), std::memory_order_relaxed);
}

void ChunkArena::set_client_limit(uint32_t k, uint32_t n) noexcept {
  if (k < num_classes()) meta_->client_limit[k].store(n, std::memory_order_relaxed);
}

uint32_t ChunkArena::client_limit(uint32_t k) const noexcept {
  return k < num_classes() ? meta_->client_limit[k].load(std::memory_order_relaxed) : 0;
}

uint32_t ChunkArena::reserved_by(uint32_t id, uint32_t k) const noexcept {
  if (id >= kArenaMaxClients || k >= num_classes()) return 0;
  return holdings_[id].reserved[k].load(std::memory_order_relaxed);
}

BlockKind ChunkArena::kind(uint32_t i) const noexcept { return state_kind(blocks_[i].state.load(std::memory_order_acquire)); }
uint32_t ChunkArena::generation(uint32_t i) const noexcept { return state_gen(blocks_[i].state.load(std::memory_order_acquire)); }
uint32_t ChunkArena::refcount_or_owner(uint32_t i) const noexcept {
  return state_low(blocks_[i].state.load(std::memory_order_acquire));
}

Status ChunkArena::check_ref(BlockRef b, const char* op) const noexcept {
  if (b.index >= total_blocks())
    return {Errc::invalid_argument, std::string(op) + ": block " + std::to_string(b.index) + " is outside the arena (" +
                                        std::to_string(total_blocks()) + " blocks)"};
  return Status::Ok();
}

Status ChunkArena::complete(uint32_t k, uint64_t h) noexcept {
  std::atomic<uint64_t>& head = meta_->lists[k].word;
  uint32_t client = marker_client(head_payload(h));
  if (client >= kArenaMaxClients)
    return {Errc::corrupt, "free list " + std::to_string(k) + " carries a marker of client " + std::to_string(client) +
                               ", beyond the " + std::to_string(kArenaMaxClients) + " client slots"};
  ArenaIntent& in = intents_[client];
  uint32_t op = in.op.load(std::memory_order_acquire);
  uint32_t b = in.block.load(std::memory_order_acquire);
  uint64_t from = in.from.load(std::memory_order_acquire);
  uint64_t to = in.to.load(std::memory_order_acquire);
  // The intent is the one behind this marker only if the marker is still
  // there after reading it (the client rewrites it only once it is gone).
  std::atomic_thread_fence(std::memory_order_acquire);
  if (head.load(std::memory_order_acquire) != h) return Status::Ok();
  uint32_t expect_op = (head_payload(h) & kMarkerPush) ? kOpPush : kOpPop;
  if (op != expect_op || b >= total_blocks() || class_of(b) != k)
    return {Errc::corrupt, "client " + std::to_string(client) + "'s intent does not match its marker on free list " +
                               std::to_string(k)};
  uint32_t next_top;
  if (op == kOpPop) {
    next_top = blocks_[b].next.load(std::memory_order_acquire);
    if (next_top != kNil && (next_top >= total_blocks() || class_of(next_top) != k))
      return {Errc::corrupt, "free list " + std::to_string(k) + " links block " + std::to_string(b) + " to invalid block " +
                                 std::to_string(next_top)};
  } else {
    next_top = b;
  }
  blocks_[b].state.compare_exchange_strong(from, to, std::memory_order_acq_rel);  // fails if a helper already did it
  uint64_t expected = h;
  head.compare_exchange_strong(expected, make_head(head_tag(h) + 1, next_top), std::memory_order_acq_rel);
  return Status::Ok();
}

Result<BlockRef> ChunkArena::alloc(uint32_t client, uint32_t k) noexcept {
  if (client >= kArenaMaxClients) return Status{Errc::invalid_argument, "client id " + std::to_string(client) + " is out of range"};
  if (k >= num_classes()) return Status{Errc::invalid_argument, "size class " + std::to_string(k) + " does not exist"};
  std::atomic<uint64_t>& head = meta_->lists[k].word;
  ArenaIntent& in = intents_[client];
  for (uint64_t spins = 0;; ++spins) {
    uint64_t h = head.load(std::memory_order_acquire);
    uint32_t p = head_payload(h);
    if (is_marker(p)) {
      if (Status s = complete(k, h); !s.ok()) return s;
      continue;
    }
    if (p == kNil) {
      if (grow(k)) continue;
      return Status{Errc::out_of_memory, "no free block of " + std::to_string(size_class(k).block_size) +
                                             " bytes is left in the arena; enlarge the arena or release chunks"};
    }
    if (p >= total_blocks() || class_of(p) != k)
      return Status{Errc::corrupt, "free list " + std::to_string(k) + " points at invalid block " + std::to_string(p)};
    uint64_t s = blocks_[p].state.load(std::memory_order_acquire);
    if (state_kind(s) != BlockKind::free) {  // popped under us: head has moved
      if (spins > 1000000) return Status{Errc::corrupt, "free list " + std::to_string(k) + " holds a block that is not free"};
      continue;
    }
    // Release stores: a helper that reads one of these also sees that our
    // previous marker has left the head (see complete()).
    in.op.store(kOpPop, std::memory_order_release);
    in.block.store(p, std::memory_order_release);
    in.from.store(s, std::memory_order_release);
    in.to.store(make_state(state_gen(s), BlockKind::reserved, client), std::memory_order_release);
    uint64_t marker = make_head(head_tag(h) + 1, kMarker | client);
    if (head.compare_exchange_weak(h, marker, std::memory_order_acq_rel)) {
      if (Status st = complete(k, marker); !st.ok()) return st;
      // The next alloc of this class likely takes the new top (grants
      // come in batches): start fetching its state now. Its bytes are left
      // alone: the client that writes them is on another core.
      uint32_t next = blocks_[p].next.load(std::memory_order_relaxed);
      if (next < total_blocks()) prefetch_state(next);
      count_reserved(client, p, +1);
      return BlockRef{p, state_gen(s)};
    }
  }
}

Status ChunkArena::push(uint32_t client, uint32_t k, uint32_t index, uint64_t from) noexcept {
  std::atomic<uint64_t>& head = meta_->lists[k].word;
  ArenaIntent& in = intents_[client];
  for (;;) {
    uint64_t h = head.load(std::memory_order_acquire);
    uint32_t p = head_payload(h);
    if (is_marker(p)) {
      if (Status s = complete(k, h); !s.ok()) return s;
      continue;
    }
    blocks_[index].next.store(p, std::memory_order_relaxed);  // ours: not listed yet
    in.op.store(kOpPush, std::memory_order_release);
    in.block.store(index, std::memory_order_release);
    in.from.store(from, std::memory_order_release);
    in.to.store(make_state(state_gen(from) + 1, BlockKind::free, 0), std::memory_order_release);
    uint64_t marker = make_head(head_tag(h) + 1, kMarker | kMarkerPush | client);
    if (head.compare_exchange_weak(h, marker, std::memory_order_acq_rel)) return complete(k, marker);
  }
}

Status ChunkArena::free_reserved(uint32_t client, BlockRef b) noexcept {
  if (Status s = check_ref(b, "free"); !s.ok()) return s;
  if (client >= kArenaMaxClients) return {Errc::invalid_argument, "client id " + std::to_string(client) + " is out of range"};
  uint64_t s = blocks_[b.index].state.load(std::memory_order_acquire);
  if (state_gen(s) != b.generation || state_kind(s) == BlockKind::free)
    return {Errc::double_free, "block " + std::to_string(b.index) + " generation " + std::to_string(b.generation) +
                                   " was already freed"};
  if (state_kind(s) != BlockKind::reserved || state_low(s) != client)
    return {Errc::double_free, "block " + std::to_string(b.index) + " is not reserved by client " + std::to_string(client)};
  if (Status st = push(client, class_of(b.index), b.index, s); !st.ok()) return st;
  count_reserved(client, b.index, -1);
  return Status::Ok();
}

Status ChunkArena::seal(uint32_t owner, BlockRef b, uint32_t refs) noexcept {
  if (Status s = check_ref(b, "seal"); !s.ok()) return s;
  if (refs == 0 || refs > kArenaMaxRefs) return {Errc::invalid_argument, "a sealed block needs 1 to 2^30-1 references"};
  return leave_reserved(owner, b, make_state(b.generation, BlockKind::sealed, refs));
}

Status ChunkArena::leave_reserved(uint32_t owner, BlockRef b, uint64_t to) noexcept {
  uint64_t expect = make_state(b.generation, BlockKind::reserved, owner);
  if (!blocks_[b.index].state.compare_exchange_strong(expect, to, std::memory_order_acq_rel))
    return {Errc::stale_reference, "block " + std::to_string(b.index) + " generation " + std::to_string(b.generation) +
                                       " is not reserved by client " + std::to_string(owner)};
  count_reserved(owner, b.index, -1);
  return Status::Ok();
}

Status ChunkArena::acquire(BlockRef b) noexcept {
  if (Status s = check_ref(b, "acquire"); !s.ok()) return s;
  std::atomic<uint64_t>& st = blocks_[b.index].state;
  uint64_t s = st.load(std::memory_order_acquire);
  for (;;) {
    if (state_gen(s) != b.generation || state_kind(s) != BlockKind::sealed || state_low(s) == 0)
      return {Errc::stale_reference, "block " + std::to_string(b.index) + " generation " + std::to_string(b.generation) +
                                         " is no longer a live sealed chunk"};
    if (state_low(s) == kArenaMaxRefs) return {Errc::full, "block " + std::to_string(b.index) + " has too many references"};
    if (st.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel)) return Status::Ok();
  }
}

Status ChunkArena::pin(uint32_t owner, BlockRef b, uint32_t refs) noexcept {
  if (Status s = check_ref(b, "pin"); !s.ok()) return s;
  if (owner >= kArenaMaxClients) return {Errc::invalid_argument, "client id " + std::to_string(owner) + " is out of range"};
  if (refs == 0 || refs > kArenaMaxRefs) return {Errc::invalid_argument, "a pin takes 1 to 2^30-1 references"};
  std::atomic<uint64_t>& st = blocks_[b.index].state;
  uint64_t reserved = make_state(b.generation, BlockKind::reserved, owner);
  if (st.compare_exchange_strong(reserved, make_state(b.generation, BlockKind::sealed, refs), std::memory_order_acq_rel)) {
    count_reserved(owner, b.index, -1);
    return Status::Ok();
  }
  uint64_t s = st.load(std::memory_order_acquire);
  for (;;) {
    if (state_gen(s) != b.generation || state_kind(s) != BlockKind::sealed || state_low(s) == 0)
      return {Errc::stale_reference, "block " + std::to_string(b.index) + " generation " + std::to_string(b.generation) +
                                         " is neither reserved by client " + std::to_string(owner) +
                                         " nor a live sealed chunk"};
    if (state_low(s) > kArenaMaxRefs - refs)
      return {Errc::full, "block " + std::to_string(b.index) + " has too many references"};
    if (st.compare_exchange_weak(s, s + refs, std::memory_order_acq_rel)) return Status::Ok();
  }
}

Status ChunkArena::release(uint32_t client, BlockRef b) noexcept {
  bool last = false;
  Status s = unref(client, b, &last);
  if (!s.ok() || !last) return s;
  return free_reserved(client, b);
}

Status ChunkArena::unref(uint32_t client, BlockRef b, bool* last) noexcept {
  *last = false;
  if (Status s = check_ref(b, "release"); !s.ok()) return s;
  if (client >= kArenaMaxClients) return {Errc::invalid_argument, "client id " + std::to_string(client) + " is out of range"};
  std::atomic<uint64_t>& st = blocks_[b.index].state;
  uint64_t s = st.load(std::memory_order_acquire);
  for (;;) {
    if (state_gen(s) != b.generation || state_kind(s) != BlockKind::sealed || state_low(s) == 0)
      return {Errc::double_free, "block " + std::to_string(b.index) + " generation " + std::to_string(b.generation) +
                                     " has no reference left to release"};
    // The last reference turns the block into one reserved by `client` in
    // the same CAS: nobody can acquire it any more, and if `client` dies
    // before it is listed, reclaim(client) frees it.
    uint64_t next = state_low(s) == 1 ? make_state(b.generation, BlockKind::reserved, client) : s - 1;
    if (st.compare_exchange_weak(s, next, std::memory_order_acq_rel)) {
      *last = state_low(s) == 1;
      if (*last) count_reserved(client, b.index, +1);
      return Status::Ok();
    }
  }
}

Status ChunkArena::hand_over(uint32_t from, uint32_t to, BlockRef b) noexcept {
  if (Status s = check_ref(b, "hand over"); !s.ok()) return s;
  if (from >= kArenaMaxClients || to >= kArenaMaxClients)
    return {Errc::invalid_argument, "client id " + std::to_string(std::max(from, to)) + " is out of range"};
  // Counted before the move, so that two threads handing blocks to one
  // client at once cannot both pass the limit.
  uint32_t k = class_of(b.index);
  std::atomic<uint32_t>& held = holdings_[to].reserved[k];
  uint32_t before = held.fetch_add(1, std::memory_order_relaxed);
  if (to != kArenaDaemonClient && before >= client_limit(k)) {
    held.fetch_sub(1, std::memory_order_relaxed);
    return {Errc::limit, "client " + std::to_string(to) + " holds " + std::to_string(before) + " blocks of " +
                             std::to_string(size_class(k).block_size) + " bytes reserved, the most one client may (" +
                             std::to_string(client_limit(k)) + " of the class's " + std::to_string(committed(k)) + ")"};
  }
  if (Status s = leave_reserved(from, b, make_state(b.generation, BlockKind::reserved, to)); !s.ok()) {
    held.fetch_sub(1, std::memory_order_relaxed);
    return s;
  }
  return Status::Ok();
}

void order_for_freeing(std::vector<BlockRef>* blocks) {
  std::sort(blocks->begin(), blocks->end(), [](BlockRef a, BlockRef b) { return a.index > b.index; });
}

Result<uint64_t> ChunkArena::reclaim(uint32_t dead) noexcept {
  if (dead >= kArenaMaxClients || dead == kArenaDaemonClient)
    return Status{Errc::invalid_argument, "cannot reclaim client id " + std::to_string(dead)};
  for (uint32_t k = 0; k < num_classes(); ++k) {
    uint64_t h = meta_->lists[k].word.load(std::memory_order_acquire);
    uint32_t p = head_payload(h);
    if (is_marker(p) && marker_client(p) == dead)
      if (Status s = complete(k, h); !s.ok()) return s;
  }
  uint64_t freed = 0;
  for (uint32_t k = num_classes(); k-- > 0;) {
    const uint32_t first = size_class(k).first_block;
    for (uint32_t i = first + committed(k); i-- > first;) {  // highest first: see order_for_freeing
      uint64_t s = blocks_[i].state.load(std::memory_order_acquire);
      if (state_kind(s) == BlockKind::reserved && state_low(s) == dead) {
        if (Status st = push(kArenaDaemonClient, k, i, s); !st.ok()) return st;
        ++freed;
      }
    }
  }
  // It holds nothing now, whatever its counts say: an id that died between
  // a transition and its count (a test's process) left them behind.
  for (auto& n : holdings_[dead].reserved) n.store(0, std::memory_order_relaxed);
  return freed;
}

Result<ArenaAudit> ChunkArena::audit() const {
  ArenaAudit a;
  auto is_committed = [this](uint32_t i) { return i - size_class(class_of(i)).first_block < committed(class_of(i)); };
  for (uint32_t i = 0; i < total_blocks(); ++i) {
    const uint64_t s = blocks_[i].state.load(std::memory_order_acquire);
    if (!is_committed(i)) {
      if (s != 0) return Status{Errc::corrupt, "block " + std::to_string(i) + " is not committed but has a state"};
      continue;
    }
    switch (state_kind(s)) {
      case BlockKind::free: ++a.free; break;
      case BlockKind::reserved: ++a.reserved; break;
      case BlockKind::sealed: ++a.sealed; break;
      default: return Status{Errc::corrupt, "block " + std::to_string(i) + " has an invalid state"};
    }
  }
  std::vector<uint8_t> seen(total_blocks(), 0);
  for (uint32_t k = 0; k < num_classes(); ++k) {
    uint32_t p = head_payload(meta_->lists[k].word.load(std::memory_order_acquire));
    if (is_marker(p)) return Status{Errc::corrupt, "free list " + std::to_string(k) + " has an operation in flight"};
    while (p != kNil) {
      if (p >= total_blocks() || class_of(p) != k || !is_committed(p))
        return Status{Errc::corrupt, "free list " + std::to_string(k) + " reaches invalid block " + std::to_string(p)};
      if (seen[p]) return Status{Errc::corrupt, "block " + std::to_string(p) + " is listed twice (cycle or double free)"};
      if (state_kind(blocks_[p].state.load(std::memory_order_acquire)) != BlockKind::free)
        return Status{Errc::corrupt, "block " + std::to_string(p) + " is listed but not free"};
      seen[p] = 1;
      ++a.listed;
      p = blocks_[p].next.load(std::memory_order_acquire);
    }
  }
  if (a.listed != a.free)
    return Status{Errc::corrupt, std::to_string(a.free) + " blocks are free but " + std::to_string(a.listed) +
                                     " are listed: " + std::to_string(a.free - a.listed) + " leaked"};
  std::vector<uint32_t> held(size_t{kArenaMaxClients} * num_classes(), 0);
  for (uint32_t i = 0; i < total_blocks(); ++i) {
    uint64_t s = blocks_[i].state.load(std::memory_order_acquire);
    if (state_kind(s) == BlockKind::reserved && state_low(s) < kArenaMaxClients)
      ++held[size_t{state_low(s)} * num_classes() + class_of(i)];
  }
  for (uint32_t id = 0; id < kArenaMaxClients; ++id)
    for (uint32_t k = 0; k < num_classes(); ++k)
      if (reserved_by(id, k) != held[size_t{id} * num_classes() + k])
        return Status{Errc::corrupt, "client " + std::to_string(id) + " is counted as holding " +
                                         std::to_string(reserved_by(id, k)) + " blocks of class " + std::to_string(k) +
                                         " but holds " + std::to_string(held[size_t{id} * num_classes() + k])};
  return a;
}

}  // namespace engram
