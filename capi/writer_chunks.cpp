// A writer's chunks: taking a block for each (waiting, as for a full arena,
// while the server has none to give this client), copying steps into it
// column by column (streamed past the caches when they are large),
// packing compressed columns when the chunk is finalized, and letting go
// of chunks that left the writer's history. Its items are writer.cpp's.
#include "capi/writer.hpp"

#include <algorithm>
#include <cstring>
#include <thread>

#include "core/stream_copy.hpp"

using namespace engram;

namespace {
// Steps of at least this many bytes go into the block with non-temporal
// stores (stream_copy): a chunk is read, if ever, long after it is written,
// and the copy then need not read the block's cold lines first, whatever
// order the blocks come in. Smaller steps are copied plainly: streamed,
// their fence per chunk and partial lines cost more than the reads saved
// (bench/NOTES.md, "Block order"). The fence waits until every
// streamed line reached memory, so it comes as late as it may: in
// send_items, just before the first insert that names the chunk. A writer
// may pass between threads between two calls, so the thread that streamed
// is noted, and another one's steps are fenced with fence_all_threads().
constexpr size_t kStreamStepBytes = 1024;
}  // namespace

Status engram_writer::open_chunk() {
  if (spares_coming > 0 && !client->has_spare(size_class))
    if (Status s = await_spare(); !s.ok()) return s;
  BlockRef b;
  if (Status s = take_chunk_block(size_class, insert_timeout_ms, &b); !s.ok()) return s;
  Chunk c;
  c.block = b;
  c.data = static_cast<char*>(client->arena.data(b));
  c.capacity = chunk_length;
  ChunkHeader h{};
  h.magic = kChunkMagic;
  h.capacity_steps = chunk_length;
  h.num_columns = static_cast<uint32_t>(columns.size());
  h.signature_hash = sig_hash;
  h.episode = episode;
  h.flags = packed ? kChunkPacked : 0;
  std::memcpy(c.data, &h, sizeof h);
  chunks.push_back(c);
  ++next_seq;
  return Status::Ok();
}

Status engram_writer::take_chunk_block(uint32_t k, int32_t timeout_ms, BlockRef* out) {
  // The arena may be full for a while: items get evicted and chunks come
  // back. Or this client may hold all the server lets one client hold of
  // the class (Errc::limit): its chunks in flight become the tables' as
  // their inserts are applied. Wait for either (handling acks, which also
  // give chunks back) until the timeout.
  int64_t deadline = 0;  // read at the first wait: most chunks get a block at once
  bool waiting = false;
  int64_t pause_ns = 10'000;
  for (;;) {
    Status got = client->take_block(k, out, timeout_ms > 0 ? timeout_ms : 0, spares_coming);
    if (got.ok()) return got;
    if (got.code() != Errc::out_of_memory && got.code() != Errc::limit) return got;
    // Blocks gathered to give back (inserts refused, say) may be what the
    // class lacks: give them back before waiting for others to.
    if (!client->returning.empty()) {
      if (Status s = client->flush_returns(); !s.ok()) return s;
      continue;
    }
    for (engram_table* t : client->tables) {
      ResponseRecord unused;
      if (Status s = t->pump(0, &unused, nullptr, -1); !s.ok()) return s;
    }
    if (!client->alive()) return {Errc::disconnected, "the server went away; disconnect and connect again"};
    if (!waiting) {
      deadline = deadline_after_ms(timeout_ms);
      waiting = true;
    }
    if (client->take_interrupt()) return {Errc::interrupted, "interrupted while waiting for a free block of the arena"};
    if (deadline >= 0 && monotonic_ns() >= deadline) {
      if (got.code() == Errc::limit)
        return {Errc::limit, got.message() + (timeout_ms == 0 ? "" : " (waited " + std::to_string(timeout_ms) +
                                                                         " ms for its chunks in flight to be taken)")};
      return {timeout_ms == 0 ? Errc::out_of_memory : Errc::timeout,
              "the arena has no free block of " + std::to_string(client->arena.size_class(k).block_size) +
                  " bytes; give the server a larger arena, or keep fewer items (max_size)"};
    }
    std::this_thread::sleep_for(std::chrono::nanoseconds(pause_ns));
    pause_ns = std::min<int64_t>(pause_ns * 2, 5'000'000);
  }
}

// Out of spares with some on their way: the writer is that far ahead of
// its acks, most likely because a rate limiter holds its inserts (a full
// queue), and each ack that comes brings a spare. Waiting a moment for one
// is much cheaper than a grant, a round trip through the server's control
// thread that waits for a core when every core is busy (a writer of 40 KB
// items into a full queue made 2000 grants a second that way, at a tenth of
// the items; bench/NOTES.md, "Blocks only from the daemon"). A limiter that
// holds the inserts for longer gets a grant after the wait.
constexpr int64_t kSpareWaitNs = 2'000'000;

Status engram_writer::await_spare() {
  int64_t until = monotonic_ns() + kSpareWaitNs;
  for (engram_table* t : client->tables) {
    bool owes = std::any_of(t->owed.begin(), t->owed.end(), [&](const Owed& o) { return o.writer == this && o.want_spare; });
    if (!owes) continue;
    ResponseRecord unused;
    Status s = t->pump(0, &unused, [&] { return client->has_spare(size_class) || spares_coming == 0; }, until);
    if (!s.ok() && s.code() != Errc::timeout) return s;
    if (client->has_spare(size_class) || monotonic_ns() >= until) break;
  }
  return Status::Ok();
}

void engram_writer::pack(Chunk& c) {
  size_t cap = client->arena.size_class(size_class).block_size;
  size_t off = packed_data_offset(static_cast<uint32_t>(columns.size()));
  for (size_t i = 0; i < columns.size(); ++i) {
    Encoding used;
    // chunk_bytes() sized the block for every column stored raw, so the
    // room left always holds at least this column's raw steps.
    size_t stored = encoder->encode_column(static_cast<Codec>(columns[i].codec), columns[i].level,
                                           staging.data() + column_offset[i], step_bytes[i], c.steps, c.data + off,
                                           cap - off, &used);
    ChunkColumn e{off, stored, static_cast<uint32_t>(used), 0};
    std::memcpy(c.data + sizeof(ChunkHeader) + i * sizeof e, &e, sizeof e);
    off = align_up(off + stored, kCacheLine);
  }
  // Compression should save arena memory too: move the packed bytes into
  // the smallest class that holds them, if it has a block free now. No item
  // references the chunk yet, so the old block is surely still ours: a
  // spare for the next chunk.
  auto k = client->arena.class_for(off);
  if (!k.ok() || *k >= size_class) return;
  BlockRef small;
  if (!client->take_block(*k, &small).ok()) return;
  char* dst = static_cast<char*>(client->arena.data(small));
  std::memcpy(dst, c.data, off);
  client->keep_spare(c.block);
  c.block = small;
  c.data = dst;
}

bool engram_writer::streams(size_t column) const { return !packed && step_bytes[column] >= kStreamStepBytes; }

void engram_writer::finalize(Chunk& c) {
  if (c.final) return;
  if (packed) pack(c);
  auto* h = reinterpret_cast<ChunkHeader*>(c.data);
  h->num_steps = c.steps;
  c.final = true;
}

void engram_writer::note_streamed() {
  if (!fence_late) return stream_fence();
  const void* me = this_thread_token();
  if (unfenced_by && unfenced_by != me) fence_all_threads();
  unfenced_by = me;
}

Status engram_writer::append(const void* const* cols, uint32_t n, size_t stride_steps) {
  // Every entry checked before any is copied: a refused step leaves nothing behind.
  for (size_t i = 0; i < columns.size(); ++i)
    if (!cols[i])
      return {Errc::invalid_argument, "columns[" + std::to_string(i) + "] (column " +
                                          std::string(columns[i].name, strnlen(columns[i].name, kMaxColumnName)) +
                                          ") is NULL; pass one pointer per column of the writer"};
  for (uint32_t s = 0; s < n; ++s) {
    if (history_begin == next_seq || at(next_seq - 1).final) {
      if (Status st = open_chunk(); !st.ok()) return st;
    }
    Chunk& c = at(next_seq - 1);
    char* base = packed ? staging.data() : c.data;
    for (size_t i = 0; i < columns.size(); ++i) {
      char* dst = base + column_offset[i] + c.steps * step_bytes[i];
      const char* src = static_cast<const char*>(cols[i]) + s * stride_steps * step_bytes[i];
      if (streams(i)) stream_copy(dst, src, step_bytes[i]);
      else std::memcpy(dst, src, step_bytes[i]);
    }
    if (streaming) note_streamed();
    ++c.steps;
    ++history_steps;
    if (c.steps == chunk_length) {
      finalize(c);
      if (Status st = send_pending(false); !st.ok()) return st;
    }
    trim_history();
  }
  return Status::Ok();
}

// Keeps the chunks that hold the last max_item_steps steps.
void engram_writer::trim_history() {
  while (next_seq - history_begin > 1) {
    Chunk& oldest = at(history_begin);
    if (history_steps - oldest.steps < max_item_steps) break;
    history_steps -= oldest.steps;
    retire(history_begin++);
  }
}

void engram_writer::retire(uint64_t seq) {
  if (seq < first_seq || seq >= history_begin) return;
  Chunk& c = at(seq);
  if (c.given_back || c.unacked > 0 || c.kept) return;
  if (c.held_by == 0) {
    // No table took it (no item, or every insert failed): still ours, or
    // already freed by an owner that undid a failed insert.
    client->return_block(c.block);
  } else {
    for (uint64_t held = c.held_by; held != 0; held &= held - 1)
      if (engram_table* t = client->table_by_id(static_cast<uint32_t>(__builtin_ctzll(held)))) {
        t->drops.push_back(c.block);
        if (t->drops.size() >= kRecordKeys) (void)t->flush_drops();
      }
  }
  c.given_back = true;
  while (!chunks.empty() && chunks.front().given_back) {
    chunks.pop_front();
    ++first_seq;
  }
}
