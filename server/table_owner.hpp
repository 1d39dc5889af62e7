// The owner of one table: the only thread that touches the table's index. It
// applies the requests that clients push into their channels for this table,
// in batches, and answers them; it sleeps on the table's doorbell when there
// is nothing to do, so an idle table costs no CPU.
//
// Chunk lifetime, as the owner sees it: a writer's finished chunk is still
// reserved by the writer when its first item arrives. The first owner to see
// it seals it (ChunkArena::pin); every channel keeps one "hold" on each chunk
// its client referenced, so the writer can still create items over that
// chunk later; the client gives the hold back with a drop request once the
// chunk left its history. Each item holds one reference per chunk slice, and
// each sampled batch pins its chunks until the client releases it. Holds and
// pins are per channel, so a client's death gives all of them back.
//
// Everything read from a channel is untrusted: a bad request gets an error
// response, a broken ring closes that channel, never the owner.
//
// Its definitions, by what they do: table_owner.cpp (the thread and the
// calls other threads make), table_owner_loop.cpp (the loop over channels,
// responses and wake-ups), and one file per kind of request:
// table_owner_insert.cpp, table_owner_sample.cpp, table_owner_keys.cpp,
// and table_owner_view.cpp for a view over shards.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/channel.hpp"
#include "core/chunk_arena.hpp"
#include "core/chunk_format.hpp"
#include "core/control_message.hpp"
#include "core/shard_view.hpp"
#include "core/table.hpp"
#include "core/u64_set.hpp"

namespace engram {

class TableOwner {
 public:
  // `arena_id` is the arena client id this owner releases blocks with (one
  // per owner: intent slots are single-writer). `bell` may be null when no
  // thread runs (tests, fuzzing).
  TableOwner(ChunkArena arena, uint32_t arena_id, Table table, Doorbell* bell, uint32_t max_batch);
  ~TableOwner();
  TableOwner(const TableOwner&) = delete;
  TableOwner& operator=(const TableOwner&) = delete;

  // Makes the table a view over `shards` shards on peers, before start():
  // its items are the draws that shard links insert (kInsertDraw, after a
  // shard request binds their channel), a sample takes them by the shards'
  // masses (core/shard_view.hpp), and updates of the keys handed out go
  // to their shards. The table's own sampler and limiter decide nothing
  // then; the server gives a view's table FIFO selectors and
  // max_times_sampled 1, so that a draw handed out leaves it.
  void make_view(uint32_t shards, size_t routes, uint64_t seed);
  bool is_view() const noexcept { return view_ != nullptr; }
  // A view's counters per shard (none for a table); thread-safe.
  std::vector<ShardCounters> shard_counters();

  // Starts the owner thread, named "own:" and the table's name (cut to 15 bytes).
  void start();
  // Answers what is already in the channels (deferred requests time out),
  // marks every channel closed with `reason`, gives back every pin and hold,
  // and joins the thread.
  void stop(ChannelClosed reason);

  // Thread-safe; each runs on the owner thread and returns when done.
  void attach(uint32_t client, Channel channel);
  // Gives back the channel's pins and holds; its unanswered requests are dropped.
  void detach(uint32_t client, ChannelClosed reason);
  void reset();
  Status set_rate_limiter(const RateLimiterConfig& c);
  // What the owner reports of its table is read from the table itself
  // (Table::options), never kept beside it.
  TableInfoWire info();
  CheckedTableOptions options();
  // A piece of a listing (Table::list, at most kMaxListScan slots): the
  // owner's time it takes is bounded so.
  uint32_t list(uint32_t from, uint32_t max_items, std::vector<ListedItem>* out, uint32_t* capacity);
  // Checkpoints. park() makes the owner thread count `parked` down and
  // then wait for `go`, without waiting itself: with every owner parked,
  // every table stands still at one moment, and snapshot() may be called
  // from the thread that parked them. Without an owner thread the table
  // stands still anyway: parked is counted down at once. restore() puts
  // saved items back (before clients attach).
  void park(std::shared_ptr<std::latch> parked, std::shared_ptr<std::latch> go);
  // Liveness: runs `answered` on the owner thread once it gets round to it
  // (at once when no thread runs). An owner that never calls it is wedged;
  // the caller decides how long to wait. Thread-safe, never blocks.
  void ping(std::function<void()> answered);
  TableState snapshot() const { return table_.snapshot(); }
  Status restore(const TableState& s);

  // The single-threaded core, public for tests and fuzzing. Services every
  // channel once; returns true if anything happened.
  bool poll_once();
  uint32_t arena_id() const noexcept { return arena_id_; }

 private:
  struct ChannelState {
    uint32_t client = 0;
    Channel channel;
    // Waiting for the rate limiter. A held insert_items record keeps only
    // the items not applied yet (insert_items trims it): the owner's copy,
    // which the client cannot touch.
    std::optional<RequestRecord> pending;
    std::unordered_map<uint64_t, std::vector<BlockRef>> pins;  // sample id -> pinned chunks
    U64Set holds;                                               // packed BlockRef
    bool broken = false;
    // A view's: the shard this channel's link reported (-1: none yet),
    // with the mass its next draws were drawn at; and the counts per
    // shard of the sample held (pending), split once (ShardView::split).
    int64_t shard = -1;
    double shard_mass = 0;
    std::vector<uint32_t> split;
    // Requests popped, and whether responses were pushed, since the
    // client's bells were last rung (wake_client).
    uint32_t popped_since_ring = 0;
    bool answered_since_ring = false;
  };
  enum class Outcome { done, deferred };
  // A record of acks for successful inserts (up to kRecordAcks of them).
  static bool is_ack_record(const ResponseRecord& r);

  // Runs f on the owner thread (or here, when no thread runs) and waits.
  void call(std::function<void()> f);
  // Queues f for the owner thread and rings it.
  void post(std::function<void()> f);
  void run();
  bool run_commands();
  // Services every channel until it is empty, deferred, or as many
  // records as its ring holds were applied.
  void drain_channels();
  bool service(ChannelState& c);
  // Drops one reference to b (logging what failed); a block that this frees
  // is listed at once, or when the current FreedBatch ends.
  void unpin(BlockRef b, const char* what);
  // Lists freed_ (order_for_freeing: a reset's blocks then come back to
  // writers in the order of memory).
  void list_freed();
  // While one lives, blocks that unpin() frees wait in freed_; the
  // outermost lists them when it goes: a batch of frees takes the free
  // list's line once.
  class FreedBatch {
   public:
    explicit FreedBatch(TableOwner* o);
    ~FreedBatch();
    FreedBatch(const FreedBatch&) = delete;
    FreedBatch& operator=(const FreedBatch&) = delete;

   private:
    TableOwner* o_;
    bool outer_;  // not inside another FreedBatch
  };
  // Prefetches what applying c's next request will read first.
  void prefetch_next(const ChannelState& c) const;
  // Checks the chunk that ref names (a block of this arena, this table's
  // signature, the slice inside it) and copies its header out: at a packed
  // table's insert, where the bytes are a client's, and at restore.
  Status check_ref_chunk(const ChunkRef& ref, ChunkHeader* out) const;
  // The check at insert: a packed table's chunks by check_ref_chunk; a
  // plain table's by the layout the request states (chunk_steps) and the
  // slice, against the block's size, without reading the block (its
  // header is a line the writer's core just wrote), with the header that
  // layout implies copied out.
  Status check_insert_chunk(const ChunkRef& ref, uint32_t chunk_steps, ChunkHeader* out) const;
  // r is the owner's own copy (insert_items may trim it).
  Outcome apply(ChannelState& c, RequestRecord& r);
  // An insert, in its turn: while inserts wait for the rate limiter, the
  // channels take turns in the order they began waiting (insert_line_).
  Outcome insert(ChannelState& c, const RequestRecord& r);
  Outcome insert_in_turn(ChannelState& c, const RequestRecord& r);
  // Each item as an insert of its own (id r.id + i), in order. Deferred at
  // item k, r keeps items k.. (renumbered from 0, its id r.id + k), so that
  // the items applied are never applied again.
  Outcome insert_items(ChannelState& c, RequestRecord& r);
  void leave_insert_line(const ChannelState& c);
  Outcome sample(ChannelState& c, const RequestRecord& r);
  Outcome sample_in_turn(ChannelState& c, const RequestRecord& r);
  // batch_ to c: pins its chunks for r.id, answers its items, then lets
  // go of what expired while it was drawn (deferred_).
  void answer_sample(ChannelState& c, const RequestRecord& r);
  void release_deferred();
  // A view's (table_owner_view.cpp): a sample taken from the shards'
  // draws; a shard link's report and poll; whether an insert may go into
  // this table as what it is (a draw into a view, anything else into a
  // table), and a draw's bookkeeping once inserted; updates routed.
  Outcome sample_view(ChannelState& c, const RequestRecord& r);
  Outcome shard(ChannelState& c, const RequestRecord& r);
  Status check_draw(const ChannelState& c, const RequestRecord& r) const;
  void add_draw(ChannelState& c, const RequestRecord& r, uint64_t key);
  void update_view(ChannelState& c, const RequestRecord& r);
  // The draws of `shard` that samples held now were split into.
  uint64_t held_draws(uint32_t shard) const;
  void update(ChannelState& c, const RequestRecord& r);
  void remove(ChannelState& c, const RequestRecord& r);
  void release(ChannelState& c, uint64_t id);
  void drop(ChannelState& c, const RequestRecord& r);
  // The one rule for deadlines: a request whose deadline passed is
  // answered with a timeout, never applied, whether it waited here for the
  // rate limiter or reached the owner late (a stalled server). Checked
  // before a request is applied, against the clock as of the start of the
  // channel's round.
  bool expired(ChannelState& c, const RequestRecord& r, const char* what);
  // A sample with a deadline is applied only if the owner claims it first
  // (ChannelHeader::sample_gate); false (answered with a timeout) if its
  // caller gave up on it.
  bool claim_sample(ChannelState& c, const RequestRecord& r);
  // Has the caller of sample r given it up already (the gate says
  // cancelled through r)? Read-only: a sample waiting for the rate limiter
  // is dropped at once when its caller was interrupted, so that the
  // requests behind it on the channel go on.
  bool given_up(const ChannelState& c, const RequestRecord& r) const;
  // Deferred while the limiter refuses and the deadline is ahead; else a
  // rate_limited (no wait asked) or timeout response.
  Outcome refuse(ChannelState& c, const RequestRecord& r, const char* what);
  void respond(ChannelState& c, const ResponseRecord& rsp);
  // Pushes the batch's responses (out_) into c's ring; rings no bell.
  void send_responses(ChannelState& c);
  // Ends a batch of c's requests: sends its responses and rings the
  // client's bells, unless it may sleep on (see the definition).
  void wake_client(ChannelState& c);
  void fail(ChannelState& c, const RequestRecord& r, const Status& s);
  void close_channel(ChannelState& c, ChannelClosed reason);
  void give_back(ChannelState& c);
  bool any_ready();
  // Some channel's request waits for the rate limiter (ChannelState::pending).
  bool any_pending() const;
  int64_t next_deadline() const;

  ChunkArena arena_;
  uint32_t arena_id_;
  Table table_;
  Doorbell* bell_;
  uint32_t max_batch_;
  uint64_t sig_hash_;
  bool packed_;  // some column compressed: chunks are checked by their headers
  bool stopping_ = false;  // owner thread only: refuse instead of deferring
  ChannelClosed stop_reason_ = ChannelClosed::daemon_stopping;  // why, once stopping_
  int64_t round_now_ns_ = 0;  // the clock as of this round of a channel (expired()), 0: not read yet
  std::vector<std::unique_ptr<ChannelState>> channels_;
  size_t next_first_ = 0;  // the channel poll_once serves first, round robin
  // Channels whose insert waits for the rate limiter, in the order they
  // began waiting. Only the first may insert while any wait: when the
  // limiter lets a few inserts through at a time, whoever the owner
  // happened to serve first took them all, round after round, and a writer
  // beside another starved (2% of the items). A channel whose turn came
  // and whose next insert must wait again goes to the back.
  std::deque<const ChannelState*> insert_line_;
  SampleBatch batch_;  // reused
  std::unique_ptr<ShardView> view_;  // a view's; null for a table
  std::mt19937_64 view_rng_;
  // While a sample is built, items that expire (max_times_sampled) must not
  // free their chunks before the batch pins them: their releases wait here.
  bool defer_releases_ = false;
  std::vector<BlockRef> deferred_;
  std::vector<ResponseRecord> out_;  // the current batch's responses, in order
  bool collecting_frees_ = false;   // a FreedBatch lives: unpin leaves freed blocks in freed_
  std::vector<BlockRef> freed_;     // reserved by arena_id_, to be listed

  std::mutex mu_;  // guards commands_ only; the index has no lock
  std::deque<std::function<void()>> commands_;
  std::atomic<bool> has_commands_{false};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace engram
