#include "remote/deliver.hpp"

#include <deque>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "capi/relay.h"
#include "remote/local_table.hpp"
#include "core/table.hpp"
#include "server/log.hpp"

namespace engram::remote {
namespace {

using engram::peer::v1::DeliverReply;
using engram::peer::v1::DeliverRequest;

// How long one wait for the table's answers lasts before the stream looks
// whether its peer is still there.
constexpr int32_t kAnswerSliceMs = 100;

// One stream's state: its client of this server, the relay, the chunks it
// holds (the peer's ids to the relay's), and its items in the order they
// went in, until answered.
class DeliverSession {
 public:
  DeliverSession(const PeerCall& peer, DeliverStream* stream) : peer_(peer), stream_(stream) {}

  grpc::Status open(const DeliverRequest& rq, const std::string& socket) {
    if (rq.table().empty() || rq.table().size() > ENGRAM_MAX_NAME)
      return bad_field("DeliverRequest.table must name a table (1.." + std::to_string(ENGRAM_MAX_NAME) +
                 " bytes) in the stream's first request");
    if (rq.producer() == 0) return bad_field("DeliverRequest.producer must be nonzero in the stream's first request");
    producer_ = rq.producer();
    if (int e = local_.open(socket, rq.table()); e != ENGRAM_OK) return status_of(e, "table " + rq.table());
    if (rq.signature() != local_.signature) return other_columns(rq.table(), "sender");
    if (int e = local_.open_relay(); e != ENGRAM_OK) return status_of(e, "opening a relay into table " + rq.table());
    name_ = rq.table();
    return grpc::Status::OK;
  }

  grpc::Status apply(const DeliverRequest& rq, bool first) {
    if (!first && (!rq.table().empty() || rq.producer() != 0 || rq.signature() != 0))
      return bad_field("DeliverRequest.table, producer and signature belong to the stream's first request only");
    // Forgets of chunks held before this request that none of its items
    // name go first, so that the chunks held are those a sender bounds by
    // kMaxHeldChunks (what it has on the stream, less what it forgets);
    // the rest (chunks this request sends or names) after its items.
    named_.clear();
    for (const auto& it : rq.items())
      for (const auto& sl : it.slices()) named_.insert(sl.chunk());
    early_.assign(static_cast<size_t>(rq.forget_size()), false);
    for (int i = 0; i < rq.forget_size(); ++i)
      if (held_.count(rq.forget(i)) && !named_.count(rq.forget(i))) {
        if (grpc::Status s = forget(i, rq.forget(i)); !s.ok()) return s;
        early_[static_cast<size_t>(i)] = true;
      }
    // The request's chunks go into blocks as the first item over each
    // needs it, not all before the first item: one client may reserve only
    // a share of each size class, and a chunk's block leaves that share
    // once an item over it is applied.
    arriving_.clear();
    for (int i = 0; i < rq.chunks_size(); ++i) {
      uint64_t id = rq.chunks(i).id();
      if (held_.count(id) || !arriving_.emplace(id, i).second)
        return bad_field(chunk_at(rq, i) + " is already held by this stream; send a chunk once");
    }
    if (held_.size() + arriving_.size() > kMaxHeldChunks)
      return {grpc::StatusCode::RESOURCE_EXHAUSTED,
              "DeliverRequest.chunks: the stream would hold " + std::to_string(held_.size() + arriving_.size()) +
                  " chunks, more than the " + std::to_string(kMaxHeldChunks) + " it may; forget some first"};
    for (int i = 0; i < rq.items_size(); ++i) {
      const auto& it = rq.items(i);
      std::string at = "DeliverRequest.items[" + std::to_string(i) + "] (sequence " + std::to_string(it.sequence()) + ")";
      if (it.sequence() <= last_sequence_)
        return bad_field(at + ": sequences must grow within a stream; the last was " + std::to_string(last_sequence_));
      if (it.slices_size() == 0 || it.slices_size() > static_cast<int>(kMaxItemChunks))
        return bad_field(at + " must have 1.." + std::to_string(kMaxItemChunks) + " slices");
      uint64_t ids[kMaxItemChunks];
      uint32_t offsets[kMaxItemChunks], lengths[kMaxItemChunks];
      for (int k = 0; k < it.slices_size(); ++k) {
        const auto& sl = it.slices(k);
        if (auto a = arriving_.find(sl.chunk()); a != arriving_.end())
          if (grpc::Status s = take_in(rq, a->second); !s.ok()) return s;
        auto h = held_.find(sl.chunk());
        if (h == held_.end())
          return bad_field(at + ".slices[" + std::to_string(k) + "] names chunk " + std::to_string(sl.chunk()) +
                     ", which this stream does not hold");
        ids[k] = h->second;
        offsets[k] = sl.offset();
        lengths[k] = sl.length();
      }
      last_sequence_ = it.sequence();
      int e = engram_private_relay_item(local_.relay, ids, offsets, lengths, static_cast<uint32_t>(it.slices_size()),
                                        it.priority(), producer_, it.sequence());
      if (e == ENGRAM_OK) {
        order_.push_back({it.sequence(), true});
      } else if (e == ENGRAM_E_DISCONNECTED || e == ENGRAM_E_INTERRUPTED || e == ENGRAM_E_CLOSED) {
        return status_of(e, at);
      } else {  // refused here, before the table: final, and answered in its turn
        order_.push_back({it.sequence(), false});
        if (++refused_here_ == 1 && first_refusal_.empty()) first_refusal_ = at + ": " + engram_last_error();
      }
    }
    for (int i = 0; i < rq.chunks_size(); ++i)  // for later requests' items
      if (arriving_.count(rq.chunks(i).id()))
        if (grpc::Status s = take_in(rq, i); !s.ok()) return s;
    for (int i = 0; i < rq.forget_size(); ++i)
      if (!early_[static_cast<size_t>(i)])
        if (grpc::Status s = forget(i, rq.forget(i)); !s.ok()) return s;
    // Every item of the request answered before the next is read: while
    // the rate limiter holds them, the peer's stream waits (backpressure).
    while (!order_.empty()) {
      if (grpc::Status s = answer(kAnswerSliceMs); !s.ok()) return s;
      if (peer_.gone()) return {grpc::StatusCode::CANCELLED, "the peer went away"};
    }
    return reply();
  }

 private:
  grpc::Status forget(int i, uint64_t id) {
    auto h = held_.find(id);
    if (h == held_.end())
      return bad_field("DeliverRequest.forget[" + std::to_string(i) + "] names chunk " + std::to_string(id) +
                       ", which this stream does not hold");
    if (int e = engram_private_relay_forget(local_.relay, h->second); e != ENGRAM_OK) return status_of(e, "forget");
    held_.erase(h);
    return grpc::Status::OK;
  }

  static std::string chunk_at(const DeliverRequest& rq, int i) {
    return "DeliverRequest.chunks[" + std::to_string(i) + "] (id " + std::to_string(rq.chunks(i).id()) + ")";
  }

  // Copies the request's chunk i into a block of this stream's. Blocks may
  // be short for a while (items get evicted, this stream's items in flight
  // hand theirs to the table): wait, while the peer stays. Short because
  // this stream holds its whole share in chunks that no item in flight
  // names, only the peer can help: refused.
  grpc::Status take_in(const DeliverRequest& rq, int i) {
    const auto& c = rq.chunks(i);
    uint64_t id = 0;
    for (;;) {
      int e = engram_private_relay_chunk(local_.relay, c.data().data(), c.data().size(), kAnswerSliceMs, &id);
      if (e == ENGRAM_OK) break;
      if (e != ENGRAM_E_TIMEOUT && e != ENGRAM_E_NOMEM && e != ENGRAM_E_LIMIT) return status_of(e, chunk_at(rq, i));
      if (peer_.gone()) return {grpc::StatusCode::CANCELLED, "the peer went away"};
      if (grpc::Status s = answer(0); !s.ok()) return s;
      if (e == ENGRAM_E_LIMIT && order_.empty())
        return {grpc::StatusCode::RESOURCE_EXHAUSTED,
                chunk_at(rq, i) + ": the stream holds " + std::to_string(held_.size()) +
                    " chunks that no item in flight names, all of this server's blocks one client may hold ([client] "
                    "max_reserved_share); send items over them, or forget them, before more chunks"};
    }
    held_[c.id()] = id;
    arriving_.erase(c.id());
    return grpc::Status::OK;
  }

  // Takes the table's answers (waiting up to wait_ms for one) and moves the
  // answered items off the front of order_.
  grpc::Status answer(int32_t wait_ms) {
    uint64_t answered = 0, duplicates = 0, refused = 0;
    if (int e = engram_private_relay_answered(local_.relay, wait_ms, &answered, &duplicates, &refused); e != ENGRAM_OK)
      return status_of(e, "table " + name_);
    duplicates_ = duplicates;
    refused_ = refused;
    if (refused > 0 && first_refusal_.empty()) first_refusal_ = engram_private_relay_refusal(local_.relay);
    while (!order_.empty() && (!order_.front().relayed || taken_ < answered)) {
      if (order_.front().relayed) ++taken_;
      answered_sequence_ = order_.front().sequence;
      order_.pop_front();
    }
    return grpc::Status::OK;
  }

  grpc::Status reply() {
    DeliverReply r;
    r.set_answered(answered_sequence_);
    r.set_duplicates(duplicates_);
    r.set_refused(refused_ + refused_here_);
    r.set_refusal(first_refusal_);
    if (!stream_->Write(r)) return {grpc::StatusCode::CANCELLED, "the peer went away"};
    return grpc::Status::OK;
  }

  struct Sent {
    uint64_t sequence;
    bool relayed;  // false: refused before it reached the table
  };

  const PeerCall& peer_;
  DeliverStream* stream_;
  LocalTable local_;
  std::string name_;
  uint64_t producer_ = 0;
  std::unordered_map<uint64_t, uint64_t> held_;
  std::unordered_map<uint64_t, int> arriving_;  // this request's chunks not yet in blocks: id -> index
  std::unordered_set<uint64_t> named_;          // the chunks this request's items name
  std::vector<bool> early_;                     // this request's forgets applied before its items
  std::deque<Sent> order_;
  uint64_t taken_ = 0;  // relayed items counted off order_
  uint64_t last_sequence_ = 0, answered_sequence_ = 0;
  uint64_t duplicates_ = 0, refused_ = 0, refused_here_ = 0;
  std::string first_refusal_;
};

}  // namespace

grpc::Status serve_deliver(DeliverStream* stream, const PeerCall& peer, const std::string& socket,
                           ProducerClaims* claims) {
  DeliverRequest rq;
  if (!stream->Read(&rq)) return grpc::Status::OK;
  if (rq.sender().size() > kMaxSenderName)
    return bad_field("DeliverRequest.sender must be at most " + std::to_string(kMaxSenderName) + " bytes");
  std::optional<ProducerClaims::Held> held;  // for as long as this stream lives
  if (claims && rq.producer() != 0) {
    auto c = claims->claim(rq.table(), rq.producer(), rq.incarnation(), rq.sender(), peer.name);
    if (!c.ok()) {
      log_warn("remote: refused a stream: " + c.status().message());
      return {grpc::StatusCode::ALREADY_EXISTS, c.status().message()};
    }
    held.emplace(std::move(*c));
  }
  DeliverSession d(peer, stream);
  if (grpc::Status s = d.open(rq, socket); !s.ok()) return s;
  const std::string table = rq.table();
  log_info("remote: " + peer.name + " delivers into table " + table + " (producer " + std::to_string(rq.producer()) +
           ")");
  bool first = true;
  do {
    if (grpc::Status s = d.apply(rq, first); !s.ok()) {
      log_warn("remote: the stream from " + peer.name + " into table " + table + " ended: " + s.error_message());
      return s;
    }
    first = false;
  } while (stream->Read(&rq));
  return grpc::Status::OK;
}

}  // namespace engram::remote
