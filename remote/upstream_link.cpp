#include "remote/upstream_link.hpp"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <deque>
#include <unordered_set>

#include "capi/take.h"
#include "core/fnv.hpp"
#include "server/log.hpp"
#include "remote/local_table.hpp"
#include "remote/peer.grpc.pb.h"
#include "remote/deliver.hpp"
#include "remote/peer_link.hpp"
#include "remote/wire_items.hpp"

namespace engram::remote {
namespace {

namespace pb = engram::peer::v1;

constexpr int32_t kTakeSliceMs = 100;  // a take waits this long before the link looks around
// Requests in flight on a stream: the next is taken, copied and sent while
// the peer applies the last, so that the two sides' copies overlap (each
// was idle while the other worked). bench/NOTES.md, "Across machines".
constexpr size_t kWindow = 2;
constexpr int64_t kStopWaitMs = 5000;  // at a clean stop, for the peer to answer what is in flight

// Items taken together: pinned until the peer answered them all. They go
// in one request, or, where their new chunks would pass what the peer
// holds for a stream (kMaxHeldChunks), in several: `next` is the first
// not yet on this stream.
struct Batch {
  engram_taken* taken = nullptr;
  uint32_t count = 0;            // its items
  uint32_t next = 0;             // items put on this stream so far (0 again after a reconnect)
  uint64_t last_sequence = 0;    // the highest delivery sequence of those
  std::vector<uint64_t> chunks;  // the chunk names its items use
  bool sent() const noexcept { return next == count; }
};

}  // namespace

uint64_t producer_of(const std::string& server_name, const std::string& table) {
  std::string id = server_name + "/" + table;
  uint64_t h = fnv1a(kFnvOffset, id.data(), id.size());
  return h ? h : 1;
}

struct UpstreamLink::Impl final : PeerLink {
  Impl(UpstreamLinkOptions opts, std::shared_ptr<grpc::ChannelCredentials> c)
      : PeerLink("upstream " + opts.table + " to " + opts.peer + " table " + opts.peer_table, opts.peer, std::move(c)),
        o(std::move(opts)) {
    start();
  }
  // The request in flight took its items out of the local table: give the
  // peer a moment to answer it (each reply answers a whole request), then
  // cancel. Items in a request still unanswered then are lost (engram(7)).
  ~Impl() override { stop(kStopWaitMs); }

  UpstreamLinkOptions o;
  Stats stats;  // but the PeerLink's state; under mu_

  LocalTable local;
  std::deque<Batch> pending;             // taken, not answered, oldest first
  std::unordered_set<uint64_t> on_stream;  // chunk names the current stream holds
  std::vector<uint64_t> to_forget;


  // Items per take: as many as keep a request's new chunk bytes near
  // o.batch_bytes (and far below the peer's largest message), at most
  // o.batch_items; from one item, at most doubling a request, so that the
  // first request of large items is small too.
  uint32_t take_items = 1;
  void size_next_take(uint32_t items, uint64_t bytes) {
    uint64_t fit = bytes == 0 ? o.batch_items : std::max<uint64_t>(1, uint64_t{o.batch_bytes} * items / bytes);
    take_items = static_cast<uint32_t>(std::min<uint64_t>({fit, uint64_t{2} * std::max(items, take_items), o.batch_items}));
  }

  std::string after_break() const override { return "retrying (unanswered items are sent again)"; }

  bool open_local() override {
    if (local.open(o.socket, o.table) != ENGRAM_OK) {
      set_state("waiting for local table " + o.table, engram_last_error());
      return false;
    }
    return true;
  }

  void close_local() override {
    for (Batch& b : pending) engram_private_taken_free(b.taken);
    pending.clear();
    local.close();
  }

  // Puts b's items from b.next into rq while the chunks the peer would
  // hold after it (those on the stream, less this request's forgets, plus
  // its new chunks) stay within kMaxHeldChunks; at least one item when
  // nothing is in flight, where the forgets leave the peer all but empty.
  // b.last_sequence becomes the last item that went: an item left out
  // (its chunk failed its check) is never answered, and must not hold b.
  // False if not one item fits now (the caller waits for a reply).
  bool add_batch(Batch& b, pb::DeliverRequest* rq, uint64_t* bytes, bool in_flight) {
    // What this request forgets: stream() keeps every chunk of b held.
    std::unordered_set<uint64_t> forgotten(to_forget.begin(), to_forget.end());
    for (uint64_t c : b.chunks) forgotten.erase(c);
    bool added = false;
    for (; b.next < b.count; ++b.next) {
      engram_private_item it;
      if (engram_private_taken_item(b.taken, b.next, &it) != ENGRAM_OK) continue;  // a slice outside the arena: not sent
      size_t more = 0;
      for (uint32_t k = 0; k < it.num_slices; ++k) more += on_stream.count(it.slices[k].chunk) == 0;
      // on_stream already holds the chunks this request added (add_wire_item
      // puts them there). Slices of one item may repeat a chunk: an
      // over-count, safe.
      if (on_stream.size() - forgotten.size() + more > kMaxHeldChunks && (added || in_flight)) break;
      Status s = add_wire_item(it, local, &on_stream, rq->mutable_chunks(), rq->mutable_items(), bytes);
      if (s.ok()) {
        b.last_sequence = it.sequence + 1;
        added = true;
      } else {  // a local writer rewrote its sealed chunk: the item cannot go
        log_warn("remote: upstream " + o.table + ": a chunk fails its check and its items are not sent: " +
                 s.message());
      }
    }
    return added || b.sent();
  }

  Batch take(int32_t timeout_ms) {
    Batch b;
    int e = engram_private_take(local.table, take_items, timeout_ms, &b.taken);
    if (e != ENGRAM_OK) {
      b.taken = nullptr;
      if (e == ENGRAM_E_DISCONNECTED || e == ENGRAM_E_CLOSED)
        throw std::runtime_error("this server's table " + o.table + " went away");
      return b;
    }
    b.count = engram_private_taken_count(b.taken);
    if (b.count == 0) {
      engram_private_taken_free(b.taken);
      b.taken = nullptr;
      return b;
    }
    for (uint32_t i = 0, n = b.count; i < n; ++i) {
      engram_private_item it;
      if (engram_private_taken_item(b.taken, i, &it) != ENGRAM_OK) continue;
      for (uint32_t k = 0; k < it.num_slices; ++k) b.chunks.push_back(it.slices[k].chunk);
    }
    return b;
  }

  // The peer answered up to `answered`: those batches go, and the chunks
  // no batch still uses are forgotten on the stream.
  void answered(const pb::DeliverReply& r) {
    std::unordered_set<uint64_t> released;
    uint64_t items = 0;
    while (!pending.empty() && pending.front().sent() && pending.front().last_sequence <= r.answered()) {
      items += engram_private_taken_count(pending.front().taken);
      for (uint64_t c : pending.front().chunks) released.insert(c);
      engram_private_taken_free(pending.front().taken);
      pending.pop_front();
    }
    for (const Batch& b : pending)
      for (uint64_t c : b.chunks) released.erase(c);
    for (uint64_t c : released)  // forgotten with the next request, unless its items name them again
      if (on_stream.count(c)) to_forget.push_back(c);
    std::lock_guard lock(mu_);
    stats.items_answered += items;
    stats.duplicates = r.duplicates();
    stats.refused = r.refused();
    stats.backlog = 0;
    for (const Batch& b : pending) stats.backlog += engram_private_taken_count(b.taken);
    if (r.refused() > 0 && stats.last_error.empty()) stats.last_error = "the peer refused an item: " + r.refusal();
  }

  // One stream: what is pending first (a reconnect sends it again), then
  // new items, up to kWindow requests in flight, until it breaks or the
  // link stops (then what is in flight is answered first).
  grpc::Status stream(grpc::ClientContext& context) override {
    auto stub = pb::Peer::NewStub(channel());
    auto rw = stub->Deliver(&context);
    on_stream.clear();
    to_forget.clear();
    for (Batch& b : pending) b.next = 0;  // what the last stream left unanswered goes again, in order
    set_state("connecting to " + o.peer);
    bool first = true;
    struct Sent {
      int items;
      uint64_t bytes;
    };
    std::deque<Sent> in_flight;  // requests written, not answered, oldest first
    for (;;) {
      bool stop = false, broken = false;
      while (in_flight.size() < kWindow) {
        pb::DeliverRequest rq;
        uint64_t bytes = 0;
        if (first) {
          rq.set_table(o.peer_table);
          rq.set_producer(o.producer);
          rq.set_signature(local.signature);
          rq.set_incarnation(o.incarnation);
          rq.set_sender(o.sender);
        }
        auto unsent = std::find_if(pending.begin(), pending.end(), [](const Batch& b) { return !b.sent(); });
        const Batch* sent = nullptr;
        if (unsent != pending.end()) {
          if (!add_batch(*unsent, &rq, &bytes, !in_flight.empty())) break;  // the peer holds enough: a reply first
          sent = &*unsent;
        } else {
          if (stopping()) {
            stop = true;
            break;
          }
          // With a request in flight, only what is there now: its reply
          // is not kept waiting behind a take.
          Batch b = take(in_flight.empty() ? kTakeSliceMs : 0);
          if (!b.taken && !first && to_forget.empty()) {
            if (in_flight.empty()) continue;
            break;
          }
          if (b.taken) {
            pending.push_back(std::move(b));
            Batch& added = pending.back();
            if (!add_batch(added, &rq, &bytes, !in_flight.empty()) && rq.chunks_size() == 0 && !first &&
                to_forget.empty())
              break;  // taken, sent with the next request
            size_next_take(added.next, bytes);
            sent = &added;
          }
        }
        // A chunk this request's items name again stays held: forgetting it
        // here and sending it anew would name one id twice on the stream.
        // The peer forgets before it takes this request's chunks in.
        for (uint64_t c : to_forget)
          if (!sent || std::find(sent->chunks.begin(), sent->chunks.end(), c) == sent->chunks.end()) {
            rq.add_forget(c);
            on_stream.erase(c);
          }
        to_forget.clear();
        first = false;
        if (!rw->Write(rq)) {
          broken = true;
          break;
        }
        in_flight.push_back({rq.items_size(), bytes});
      }
      if (broken || in_flight.empty()) break;  // empty: stopping, nothing owed
      pb::DeliverReply reply;
      if (!rw->Read(&reply)) break;
      {
        std::lock_guard lock(mu_);
        stats.items_sent += static_cast<uint64_t>(in_flight.front().items);
        stats.bytes_sent += in_flight.front().bytes;
      }
      in_flight.pop_front();
      set_state("delivering to " + o.peer + " table " + o.peer_table);
      carried();
      answered(reply);
      if (stop && in_flight.empty()) break;
    }
    rw->WritesDone();
    return rw->Finish();
  }
};

UpstreamLink::UpstreamLink(UpstreamLinkOptions o, std::shared_ptr<grpc::ChannelCredentials> creds)
    : impl_(std::make_unique<Impl>(std::move(o), std::move(creds))) {}

UpstreamLink::~UpstreamLink() = default;

UpstreamLink::Stats UpstreamLink::stats() const { return impl_->report(impl_->stats); }

}  // namespace engram::remote
