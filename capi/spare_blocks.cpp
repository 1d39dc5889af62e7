// The client's blocks: the server grants them (control socket) or hands
// them over with insert acks, writers take them for their chunks, and
// what is not needed goes back in batches. The server takes back only
// blocks this client holds reserved (ChunkArena), so a client can lose
// track of a block's fate without harming anyone.
#include <algorithm>
#include <cstring>

#include "capi/client.hpp"
#include "core/prefetch.hpp"

using namespace engram;

namespace {
// Spares kept per class. They are how far a writer can run ahead of its
// acks (each ack brings a block back): a rate limiter that holds inserts,
// or an owner that fell behind, stops it after this many chunks, and a
// spare that does not fit goes back to the server in a round trip. Too
// few, and a writer into a queue of large items waits on its acks; at
// most a 16th of the class, so that one client cannot hold the blocks
// others need, and 256; at least 16 (bench/NOTES.md, "Tuned constants");
// and at most half of what the server lets this client hold of the class
// (HelloReply::client_limit), so that its writers' chunks have the rest.
size_t spare_limit(const SizeClass& k, uint32_t client_limit) {
  return std::min<size_t>(std::clamp<size_t>(k.count / 16, 16, 256), std::max<uint32_t>(1, client_limit / 2));
}

// A spare is fetched for writing when it comes within this many chunks of
// its turn, not when it arrives: acks come ten to a record, and fetching
// ten blocks at once fills the core's outstanding-miss slots, so that each
// fetch waits for earlier ones. A few chunks ahead gives each block the
// time of a few items to arrive (bench/NOTES.md, "Tuned constants").
constexpr size_t kSpareFetchAhead = 3;
}  // namespace

void engram_client::fetch_spare(uint32_t k, BlockRef b) {
  if (k < class_streamed.size() && class_streamed[k]) prefetch_for_write(arena.data(b));
  else arena.prefetch_block(b.index, /*for_write=*/true);
}

void engram_client::keep_spare(BlockRef b) {
  // Trusted: the server reserved it for us. Reading its state word here
  // would pull that line to this core only for the server to pull it back
  // when it seals the chunk.
  if (b.index >= arena.total_blocks()) return;
  uint32_t k = arena.class_of(b.index);
  if (spares.size() < arena.num_classes()) spares.resize(arena.num_classes());
  std::deque<BlockRef>& s = spares[k];
  // Past the limit, or late acks of a closed writer: nobody would use it.
  if (s.size() >= spare_limit(arena.size_class(k), hello.client_limit[k]) || writers.empty()) {
    return_block(b);
    return;
  }
  s.push_back(b);
  if (s.size() <= kSpareFetchAhead) fetch_spare(k, b);
}

bool engram_client::wants_spare(uint32_t k, uint32_t coming) const {
  size_t have = (k < spares.size() ? spares[k].size() : 0) + coming;
  return have < spare_limit(arena.size_class(k), hello.client_limit[k]);
}

Status engram_client::grant(uint32_t k, int wait_ms, uint32_t coming) {
  if (spares.size() < arena.num_classes()) spares.resize(arena.num_classes());
  // Enough for the spares to last a while: a grant is a round trip through
  // the control thread (a millisecond and more when every core is busy), a
  // spare a pop from a deque. A writer out of spares with as many on their
  // way is that far ahead of its acks (a rate limiter holds its inserts):
  // a quarter of the limit more lets it run on, and its inserts ask for no
  // spares until it is back under the limit (wants_spare), so that none
  // come back as surplus to return.
  size_t have = spares[k].size() + coming, limit = spare_limit(arena.size_class(k), hello.client_limit[k]);
  if (!spares[k].empty() && have >= limit) return Status::Ok();
  size_t n = have < limit ? limit - have : std::max<size_t>(1, limit / 4);
  GrantRequest rq{k, static_cast<uint32_t>(std::min<size_t>(n, kMaxBlockGrant))};
  std::vector<char> reply;
  if (Status s = control(ControlType::grant_blocks, &rq, sizeof rq, &reply, wait_ms); !s.ok()) {
    if (s.code() == Errc::timeout)
      return {Errc::timeout, "the server did not grant a block within " + std::to_string(wait_ms == 0 ? timeout_ms : wait_ms) +
                                 " ms; is engramd stopped or overloaded?"};
    return s;
  }
  return keep_granted(reply);
}

Status engram_client::keep_granted(const std::vector<char>& reply) {
  size_t n = reply.size() / sizeof(BlockRef);
  if (n == 0 || n > kMaxBlockGrant || reply.size() % sizeof(BlockRef) != 0)
    return {Errc::corrupt, "the server answered a grant of blocks with " + std::to_string(reply.size()) + " bytes"};
  if (spares.size() < arena.num_classes()) spares.resize(arena.num_classes());
  for (size_t i = 0; i < n; ++i) {
    BlockRef g;
    std::memcpy(&g, reply.data() + i * sizeof g, sizeof g);
    if (g.index >= arena.total_blocks())
      return {Errc::corrupt, "the server granted block " + std::to_string(g.index) + ", outside the arena"};
    uint32_t k = arena.class_of(g.index);
    spares[k].push_back(g);
    if (spares[k].size() <= kSpareFetchAhead) fetch_spare(k, g);
  }
  return Status::Ok();
}

Status engram_client::take_block(uint32_t k, BlockRef* b, int wait_ms, uint32_t coming) {
  if (spares.size() < arena.num_classes()) spares.resize(arena.num_classes());
  std::deque<BlockRef>& s = spares[k];
  if (s.empty())
    if (Status g = grant(k, wait_ms, coming); !g.ok()) return g;
  if (s.empty()) return {Errc::out_of_memory, "the server granted no block of size class " + std::to_string(k)};
  *b = s.front();
  s.pop_front();
  if (s.size() >= kSpareFetchAhead) fetch_spare(k, s[kSpareFetchAhead - 1]);
  return Status::Ok();
}

// Blocks to return are sent once this many gather, and when a writer
// flushes or closes: what a client holds beyond its spares stays small
// next to a class of large blocks, and returns stay rare (they come from
// inserts that failed, writers that closed, and evictions that freed more
// blocks than the writer asked for).
constexpr size_t kReturnBatch = 16;

void engram_client::return_block(BlockRef b) {
  returning.push_back(b);
  if (returning.size() >= kReturnBatch) (void)flush_returns();
}

Status engram_client::flush_returns() {
  Status first = Status::Ok();
  for (size_t i = 0; i < returning.size(); i += kMaxBlockGrant) {
    size_t n = std::min<size_t>(kMaxBlockGrant, returning.size() - i);
    // Blocks that are no longer ours are refused and change nothing: that
    // refusal is expected here (see return_block), not an error to report.
    Status s = control(ControlType::return_blocks, returning.data() + i, n * sizeof(BlockRef), nullptr);
    if (s.code() == Errc::disconnected) {
      first = s;
      break;
    }
  }
  returning.clear();
  return first;
}

void engram_client::free_spares() {
  for (auto& s : spares) returning.insert(returning.end(), s.begin(), s.end());
  spares.clear();
  (void)flush_returns();
}
