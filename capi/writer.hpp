// The writer: appends steps into chunks in arena blocks it reserved, and
// creates items over its most recent steps.
//
// Chunk life, seen from the writer: a block is reserved by this client while
// steps are appended. It is finalized (header written; no more steps) when
// it holds chunk_length steps, at the end of an episode, or on flush; the
// table owner that receives the first item over it seals it and holds it for
// this channel. As in Reverb, an item over steps of the open chunk waits in
// the writer (pending) until that chunk is finalized, so chunks fill up and
// compress well; items leave in creation order. The chunk stays in the
// writer's history while it can still back a new item (the last
// max_item_steps steps of the episode). Once it leaves the history and no
// item over it awaits an ack, the writer gives it back: a drop request to
// each table that holds it, or, if none does, straight to the free list.
//
// Chunks are numbered in creation order (seq); the live ones sit in a Fifo
// from first_seq on, and the history is always the newest of them:
// [history_begin, next_seq). No hashing on the per-step path.
//
// With a compressed column the chunk is packed (chunk_format.hpp): steps
// are staged in private memory and encoded into the block when the chunk is
// finalized. Only the newest chunk is ever open, so one staging area serves.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "capi/client.hpp"
#include "core/chunk_format.hpp"
#include "core/codec.hpp"
#include "core/signature.hpp"

struct engram_writer {
  struct Chunk {
    engram::BlockRef block;
    char* data = nullptr;
    uint32_t steps = 0;
    uint32_t unacked = 0;     // items over it not yet answered
    uint64_t held_by = 0;     // bit t: table id t's channel holds it
    uint32_t capacity = 0;    // steps per column: chunk_length, or a relayed chunk's own
    bool final = false;       // header written; immutable from now on
    bool given_back = false;
    bool kept = false;        // relayed, and items may still name it (relay.cpp)
  };

  engram_client* client = nullptr;
  std::vector<engram::Column> columns;
  std::vector<size_t> step_bytes, column_offset;
  uint64_t sig_hash = 0;
  uint32_t chunk_length = 1;
  uint32_t max_item_steps = 1;
  int32_t insert_timeout_ms = -1;
  bool keep_keys = false;
  uint32_t size_class = 0;
  // Inserts sent that asked for a spare with their ack
  // (RequestRecord::payload.insert.want_spare) and are not answered yet.
  uint32_t spares_coming = 0;
  uint64_t episode = 1;
  bool packed = false;             // some column compressed
  bool streaming = false;          // some column streams (streams())
  // Streamed steps are fenced as late as may be, in the send_items that
  // publishes them, where the kernel lets one thread fence another's
  // (fence_all_threads); else right after each step.
  bool fence_late = false;
  const void* unfenced_by = nullptr;  // fence_late: the thread whose streamed steps await the fence
  std::vector<char> staging;       // packed: the open chunk's steps, plain layout
  std::unique_ptr<engram::Encoder> encoder;

  // seq first_seq + i; every chunk not yet given back. Only open_chunk
  // pushes (which moves the entries: no Chunk& is held across it).
  engram::Fifo<Chunk> chunks;
  uint64_t first_seq = 0, next_seq = 0;
  uint64_t history_begin = 0;  // chunks [history_begin, next_seq) may back new items
  uint64_t history_steps = 0;
  uint64_t unacked = 0;
  engram::Status first_error;  // of acks since the last flush
  std::deque<uint64_t> keys;

  struct PendingItem {  // created, waiting for its newest chunk to be finalized
    engram_table* table;
    double priority;
    uint32_t num_refs;
    uint64_t seq[engram::kRecordRefs];  // the chunks, oldest first
    uint32_t offset[engram::kRecordRefs], length[engram::kRecordRefs];
    engram::Delivery from{};            // a relayed item's; none for a writer's
    bool at_max = false;                // sent alone, with kInsertAtMax
    // A shard's draw into a view (relay.cpp): sent alone, with
    // kInsertDraw, its shard key and probability in from's slots.
    bool draw = false;
  };
  engram::Fifo<PendingItem> pending;

  // A relay (relay.cpp): chunks sealed elsewhere, items into one table,
  // each answer counted in order rather than reported by flush.
  bool relay = false;
  engram_table* relay_table = nullptr;
  uint64_t answered = 0, duplicates = 0, refused = 0;
  std::string first_refusal;
  engram::Status put_sealed(const void* bytes, size_t n, int32_t timeout_ms, uint64_t* id);
  engram::Status relay_item(const uint64_t* ids, const uint32_t* offsets, const uint32_t* lengths, uint32_t n,
                            double priority, engram::Delivery from, bool draw = false);
  engram::Status forget(uint64_t id);
  // A shard link's report and poll on the relay's channel (relay.h).
  engram::Status shard_poll(uint32_t shard, bool present, double mass, uint64_t size, uint32_t wait_below,
                            int32_t timeout_ms, uint32_t* waiting, uint32_t* short_of,
                            std::vector<engram::KeyPriority>* updates, uint32_t max);

  engram::Status append(const void* const* cols, uint32_t n, size_t stride_steps);
  // at_max: the item's priority is the table's largest when the owner
  // applies it (engram_writer_create_item_at_max); `priority` is ignored.
  engram::Status create_item(engram_table* t, uint32_t num_steps, double priority, bool at_max = false);
  engram::Status end_episode();
  // Sends pending items, in order, while their chunks are final; with
  // `force`, finalizes the open chunk for the ones that need it (flush,
  // closing a table), so that none is left waiting.
  engram::Status send_pending(bool force);
  // Sends n items whose chunks are all final in one record (n > 1: items
  // of one slice each, for one table; insert_items), fencing streamed
  // steps first (unfenced_by). A refused send is acked as failed and not
  // returned; a lost server, an interrupt, or a broken response ring met
  // while taking the acks that are ready, is (and the items acked as
  // failed, if not sent yet).
  engram::Status send_items(const PendingItem* ps, uint32_t n);
  engram::Status flush(int64_t deadline_ns);
  // An insert's answer: ok with its key, or why it failed.
  void on_ack(engram_table* t, const engram::Status& s, uint64_t key, const engram::Owed& o);
  void close();
  // Why t's signature (codecs included) differs from the writer's.
  engram::Status signature_difference(const engram_table* t) const;
  // Are this column's steps copied with non-temporal stores (stream_copy)?
  bool streams(size_t column) const;

 private:
  Chunk& at(uint64_t seq) { return chunks[seq - first_seq]; }
  engram::Status open_chunk();
  // A block of class k for a chunk, waiting (handling acks) while the
  // arena has none free for this client, up to timeout_ms (-1: for ever).
  engram::Status take_chunk_block(uint32_t k, int32_t timeout_ms, engram::BlockRef* b);
  // Waits a moment for the spares that unanswered inserts asked for.
  engram::Status await_spare();
  void finalize(Chunk& c);
  // After a step was streamed by this thread: fences it now, or notes the
  // thread for send_items (fencing first any other thread's steps).
  void note_streamed();
  // Encodes the staged steps of c into its block (directory, then columns),
  // then moves them to a smaller block when they fit one.
  void pack(Chunk& c);
  void trim_history();
  // Gives chunk seq back if it left the history and nothing awaits an ack.
  void retire(uint64_t seq);
};
