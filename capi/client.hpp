// libengram's internals: the handles behind engram.h. A client owns its
// control socket and its mapping of the arena; a table handle owns one
// channel (a request ring and a response ring to the table's owner thread).
//
// Responses on a channel come back in request order, so each table handle
// keeps a FIFO of what it asked and routes every response to it: insert acks
// to their writer, sample items to the sample call that waits for them (or,
// for a sample begun by engram_sample_begin, to the handle's begun sample).
// Credit rule: a table handle never has more responses owed than its
// response ring holds, so the owner never finds that ring full.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "capi/boundary.hpp"
#include "capi/fifo.hpp"
#include "core/channel.hpp"
#include "core/chunk_format.hpp"
#include "core/arena_blocks.hpp"
#include "core/codec.hpp"
#include "core/control_message.hpp"
#include "core/shm.hpp"
#include "core/status.hpp"
#include "engram/engram.h"

struct engram_writer;

namespace engram {


struct Owed {  // one request whose responses are still to come
  RequestOp op;
  uint64_t id;
  uint32_t credit;                 // response slots reserved
  engram_writer* writer = nullptr; // insert: who created it
  bool want_spare = false;         // insert: asked for a spare block with its ack
  uint32_t num_chunks = 0;         // insert: the writer's chunks it references,
  uint64_t chunks[kRecordRefs] = {};  //  by the writer's chunk sequence number
  bool unawaited = false;          // update: sent by engram_update_priorities_async
};

// The writer's side of a table handle (writer.cpp), so that a channel
// needs no more of the writer than this: the answer to an insert that w
// sent (its key, or why it failed), and, before table t closes, the items
// that c's writers hold for t until their chunk is finalized.
void writer_on_ack(engram_writer* w, engram_table* t, const Status& s, uint64_t key, const Owed& o);
void writers_send_pending(engram_client* c, engram_table* t);

const engram_table* engram_batch_table(const engram_batch* b) noexcept;
// Takes one response record of a sample: its items go to *items, and for
// each its chunk's plain_steps to *plain_steps; *complete once the sample's
// last record (or an error answer, returned) came.
// Before table t closes: ends its begun sample (engram_sample_begin), if
// any, so that nothing stays pinned for it.
void end_begun_sample(engram_table* t);
Status take_sample_record(const ResponseRecord& rsp, std::vector<SampledItemWire>* items,
                          std::vector<uint32_t>* plain_steps, bool* complete);
// sample.cpp's requests, shared with take.cpp (a peer's link taking items
// for delivery). send_sample pushes a sample request (flags:
// RequestRecord::flags; `from` for kSampleNewest) whose chunks stay
// pinned until release(id);
// collect_sample gathers its item records (spin as for pump());
// request_sample does both; give_up cancels one at its deadline unless
// the owner claimed it (ChannelHeader::sample_gate).
// A table name for the wire: read with a bound, and checked against the
// rule for names here, so that the message comes without a round trip.
Status name_request(const char* name, NameRequest* r);
Status send_sample(engram_table* t, const engram_sample_options* o, uint64_t* id, int64_t* deadline_ns,
                   uint32_t flags = 0, uint64_t from = 0);
Status collect_sample(engram_table* t, uint64_t id, int64_t deadline_ns, std::vector<SampledItemWire>* items,
                      std::vector<uint32_t>* plain_steps, int spin = -1);
Status request_sample(engram_table* t, const engram_sample_options* o, uint64_t* id, std::vector<SampledItemWire>* items,
                      std::vector<uint32_t>* plain_steps, uint32_t flags = 0, uint64_t from = 0);
bool give_up(engram_table* t, uint64_t id);
void release(engram_table* t, uint64_t id);
// Copies steps [ref.offset, +ref.length) of column c of a chunk whose
// header h passed check_chunk to dst, decoding a compressed column (the
// last chunk decoded is kept per column: items that share it decode it once).
Status copy_steps(engram_table* t, const ChunkRef& ref, const ChunkHeader& h, uint32_t c, char* dst);
// The columns of a C signature with their compression (comp may be NULL:
// none), validated.
Status columns_from_c(const engram_column* cols, uint32_t n, const engram_compression* comp, std::vector<Column>* out);
}  // namespace engram

struct engram_client {
  int fd = -1;
  engram::HelloReply hello{};
  int timeout_ms = 10000;
  engram::ShmSegment arena_seg, bells_seg;
  engram::ArenaBlocks arena;
  engram::BellsHeader* bells = nullptr;
  bool disconnected = false;
  // Set by engram_client_interrupt (any thread, a signal handler), taken
  // by the wait it ends (take_interrupt). A plain lock-free word: no lock,
  // so that a signal handler may set it.
  std::atomic<uint32_t> interrupt_pending{0};
  bool take_interrupt() noexcept {
    return interrupt_pending.load(std::memory_order_relaxed) != 0 &&
           interrupt_pending.exchange(0, std::memory_order_acq_rel) != 0;
  }
  // Requests whose caller stopped waiting for the reply: the next
  // replies on the socket are theirs (take_late_replies).
  uint32_t late_replies = 0;
  uint64_t next_id = 1;
  std::vector<engram_table*> tables;
  std::vector<engram_writer*> writers;
  std::vector<engram_batch*> batches;
  // Per size class: blocks reserved by this client, granted by the server
  // (grant_blocks) or handed over in insert acks (InsertAck), for writers'
  // next chunks.
  // Taken oldest first: a FIFO table evicts in insertion order, so a writer
  // then writes its blocks in the order it wrote them last time, which
  // stays ascending in memory where it started so, and the CPU's
  // prefetchers and page walks follow ascending addresses best
  // (bench/NOTES.md, "Block order").
  std::vector<std::deque<engram::BlockRef>> spares;
  // Blocks to give back to the server, sent in groups (return_blocks).
  std::vector<engram::BlockRef> returning;
  // Per size class: a writer of it loaded the class's pages (engram_writer_open).
  std::vector<bool> class_pages_loaded;
  // Per size class: a writer of this client that streams steps into its
  // blocks (engram_writer::streaming) was opened, so a spare of it is not
  // prefetched whole: the lines fetched would only be evicted again by those
  // stores. Kept for the client's life, also after that writer closes.
  std::vector<bool> class_streamed;

  // Control request and reply; ENGRAM_E_DISCONNECTED if the server is gone.
  // wait_ms: 0 for the client's timeout_ms, -1 for no limit.
  // Descriptors that come with the reply go to *fds (else are closed).
  engram::Status control(engram::ControlType type, const void* payload, size_t size, std::vector<char>* reply,
                         int wait_ms = 0, engram::ReceivedFds* fds = nullptr);
  // Is the server still there? Reads a goodbye if one came.
  bool alive();
  engram_table* table_by_id(uint32_t id);
  // Keeps a spare that is surely reserved by this client, from a grant or
  // an insert ack (up to spare_limit of its class, see spare_blocks.cpp, and only
  // while a writer is open; the rest go back to the server).
  void keep_spare(engram::BlockRef b);
  // A block of class k for a writer's chunk: a spare, else one of a grant
  // from the server (waiting up to wait_ms, 0 for timeout_ms), which comes
  // with more for the spares; Errc::out_of_memory while the server has
  // none free.
  // `coming`: the spares the writer's unanswered inserts asked for.
  engram::Status take_block(uint32_t k, engram::BlockRef* b, int wait_ms = 0, uint32_t coming = 0);
  bool has_spare(uint32_t k) const { return k < spares.size() && !spares[k].empty(); }
  // Should an insert whose newest chunk is of class k ask for a spare with
  // its ack? While the spares and those `coming` are under the limit.
  bool wants_spare(uint32_t k, uint32_t coming) const;
  // Asks the server for blocks of class k, up to the spare limit (see spare_blocks.cpp).
  engram::Status grant(uint32_t k, int wait_ms = 0, uint32_t coming = 0);
  // Keeps the blocks of a grant's reply as spares.
  engram::Status keep_granted(const std::vector<char>& reply);
  // Reads the replies owed to requests that timed out (late_replies).
  engram::Status take_late_replies(int wait_ms);
  // Gives a block back to the server, with others in one message. The
  // server takes back only blocks that this client holds reserved, so a
  // block whose fate is not known here (the chunk of an insert that failed,
  // which the owner may have freed) is returned, never kept as a spare.
  void return_block(engram::BlockRef b);
  engram::Status flush_returns();
  // Starts fetching spare b of class k for a writer's stores: its header
  // line if the class is streamed, else the whole block (prefetch_block).
  void fetch_spare(uint32_t k, engram::BlockRef b);
  // Gives every spare back to the server (the last writer closed).
  void free_spares();
};

struct engram_table {
  engram_client* client = nullptr;
  uint32_t id = 0;
  std::string name;
  engram::TableSpec spec{};
  std::vector<std::string> column_names;  // for engram_table_columns
  uint64_t sig_hash = 0;
  engram::ShmSegment segment;
  engram::Channel channel;
  engram::Doorbell* bell = nullptr;
  // A push may move the entries (Fifo): pump() and take_acks() hold a
  // reference to the front while they route its answer, and nothing that
  // routing calls (a writer's on_ack, the release of an orphaned sample)
  // sends a request that is answered.
  engram::Fifo<engram::Owed> owed;
  uint32_t credit_used = 0;
  std::vector<engram::BlockRef> drops;  // chunks to give back, sent in groups
  // Updates sent by engram_update_priorities_async and not yet answered,
  // and the first refusal among those answered, kept until a priority
  // call reports it.
  uint32_t unawaited = 0;
  engram::Status unawaited_error;
  // The sample sent by engram_sample_begin and not yet collected by
  // engram_sample_end (one at a time; id 0: none). pump() keeps its
  // records as they come while the caller makes other calls on the handle;
  // complete once the last came (or an error answer, kept in status). Kept
  // from one sample to the next, so that its vectors are allocated once.
  struct BegunSample {
    uint64_t id = 0;
    int64_t deadline_ns = 0;
    uint32_t num_steps = 0;
    std::vector<engram::SampledItemWire> items;
    std::vector<uint32_t> plain_steps;
    engram::Status status;
    bool complete = false;
    void clear() {
      id = 0;
      items.clear();
      plain_steps.clear();
      status = engram::Status::Ok();
      complete = false;
    }
  };
  BegunSample begun;
  struct Decoded {                      // one column of one chunk, decoded (engram_sample)
    uint64_t block = 0;                 // pack_block() of it; 0: none
    std::vector<char> bytes;
  };
  std::vector<Decoded> decoded;         // per column
  std::unique_ptr<engram::Decoder> decoder;

  // Reserves `credit` response slots (draining responses while the ring is
  // short of room), then pushes r and rings the owner's bell.
  engram::Status send(const engram::RequestRecord& r, engram::Owed owed_entry, int64_t deadline_ns);
  // As send, for a request answered as n requests (insert_items: one
  // owed entry per item, ids r.id, r.id + 1, ...), credit summed.
  engram::Status send(const engram::RequestRecord& r, const engram::Owed* owed_entries, uint32_t n,
                      int64_t deadline_ns);
  // Pushes a request that gets no response (release, drop).
  engram::Status send_quiet(const engram::RequestRecord& r);
  // Routes responses (insert acks to their writers) until one for request
  // `id` arrives (returned in *mine) or done() holds, waiting up to the
  // deadline (< 0: for ever). With neither id nor done it handles what is
  // ready and returns. Errc::timeout at the deadline. `spin`: rounds to
  // spin before sleeping (Doorbell::wait); < 0 for the default, longer when
  // waiting for an answer (id set).
  engram::Status pump(uint64_t id, engram::ResponseRecord* mine, const std::function<bool()>& done, int64_t deadline_ns,
                      int spin = -1);
  engram::Status flush_drops();
  // Hands each ack of an insert ack record to its writer (and its spare
  // block to the client), popping the requests it answers.
  engram::Status take_acks(const engram::ResponseRecord& r);
  // Why the channel cannot be used, or ok.
  engram::Status usable();
};
