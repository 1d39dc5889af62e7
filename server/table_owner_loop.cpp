// The owner thread's loop: sleep on the doorbell, take the mailbox's
// commands, serve the channels in rounds (each request to its handler in
// table_owner_{insert,sample,keys}.cpp), answer, and wake the clients that
// wait. It owns the channels' request and response rings on the owner's
// side, the deferred releases and the freed blocks; the table itself it
// touches only through the handlers.
#include <algorithm>
#include <string>

#include "server/log.hpp"
#include "server/table_owner.hpp"

namespace engram {
namespace {
constexpr int kBatchPerChannel = 64;  // requests per channel per round: fairness between clients
// A client with a request held by the rate limiter is woken once
// 1/kWakeFraction of its request ring was freed, or when less than
// 1/kWakeFloor of it is still queued (wake_client). An eighth for both
// woke an Ape-X CartPole actor 34 times a second; a half and a
// thirty-second 18 times, and took its CPU in engram calls from
// 0.45-0.48 to 0.39-0.44 us a frame (bench/NOTES.md, "Ape-X: time in
// engram calls", ninth session; a half alone, with the floor at an
// eighth, was measured against an eighth before insert_items).
constexpr uint32_t kWakeFraction = 2;
constexpr uint32_t kWakeFloor = 32;
// The longest an owner sleeps without looking for work. Clients can write
// the bell it sleeps on (they ring it), so a client that rewrites its words
// can make a wake-up go astray; the daemon's own wake-ups (wake_all) and
// this bound keep the owner, and the control thread that waits on it,
// from waiting for ever. An idle table wakes this often: no measurable CPU.
constexpr int64_t kMaxSleepNs = 100'000'000;
}  // namespace

bool TableOwner::is_ack_record(const ResponseRecord& r) {
  return r.op == static_cast<uint32_t>(RequestOp::insert) && r.status == 0;
}

void TableOwner::run() {
  while (!stop_.load(std::memory_order_acquire)) {
    if (poll_once()) continue;
    int64_t deadline = next_deadline();
    int64_t timeout = deadline < 0 ? kMaxSleepNs : std::clamp<int64_t>(deadline - monotonic_ns(), 0, kMaxSleepNs);
    // A client whose request waits here for the rate limiter is blocked
    // on this owner: notice the request that frees it as soon as it comes.
    int spin = any_pending() ? kAnswerSpin : kDefaultSpin;
    bell_->wait([this] { return stop_.load(std::memory_order_relaxed) || any_ready(); }, timeout, spin);
  }
}

bool TableOwner::poll_once() {
  bool progress = run_commands();
  // Each round starts at the next channel: when a rate limiter lets a few
  // inserts through at a time, the channel served first takes them all,
  // and a fixed order would starve the writers behind it.
  const size_t n = channels_.size();
  const size_t first = n ? next_first_++ % n : 0;
  for (size_t k = 0; k < n; ++k) progress |= service(*channels_[(first + k) % n]);
  return progress;
}

bool TableOwner::run_commands() {
  if (!has_commands_.load(std::memory_order_acquire)) return false;
  // A command sees every request its sender published before sending it
  // (a writer's drops before its table's reset: else the reset finds those
  // chunks still held, and they are listed later, out of order).
  drain_channels();
  std::deque<std::function<void()>> todo;
  {
    std::lock_guard<std::mutex> lk(mu_);
    todo.swap(commands_);
    has_commands_.store(false, std::memory_order_relaxed);
  }
  for (auto& f : todo) f();
  return !todo.empty();
}

void TableOwner::drain_channels() {
  // A ring holds at most `capacity` records, so that many rounds' worth
  // drains what was there when the command came; what a client pushes
  // meanwhile waits for the next round, so that a busy writer cannot hold
  // the commands back.
  for (auto& c : channels_) {
    uint32_t rounds = (c->channel.requests.capacity() + kBatchPerChannel - 1) / kBatchPerChannel;
    for (uint32_t i = 0; i < rounds && service(*c); ++i) {
    }
  }
}

bool TableOwner::any_ready() {
  if (has_commands_.load(std::memory_order_acquire)) return true;
  for (auto& c : channels_) {
    if (c->broken || c->pending) continue;
    if (c->channel.requests.has_data()) return true;
  }
  return false;
}

bool TableOwner::any_pending() const {
  for (auto& c : channels_)
    if (c->pending) return true;
  return false;
}

int64_t TableOwner::next_deadline() const {
  int64_t d = -1;
  for (auto& c : channels_)
    if (c->pending && c->pending->deadline_ns > 0 && (d < 0 || c->pending->deadline_ns < d)) d = c->pending->deadline_ns;
  return d;
}

bool TableOwner::service(ChannelState& c) {
  if (c.broken) return false;
  FreedBatch batch(this);  // blocks freed while this batch is applied, listed at its end
  round_now_ns_ = 0;       // the clock is read again, if a request of this round has a deadline
  bool progress = false;
  if (c.pending) {
    // A held request that went in, or a held insert_items record that went
    // in part-way (it shrinks), is progress too: the insert line may have
    // moved on to another channel's turn, which this round's service of
    // that channel already passed, so the owner must look again before it
    // sleeps. (Two writers taking turns got one item each per 100 ms
    // sleep otherwise.)
    uint32_t before = c.pending->count;
    if (apply(c, *c.pending) == Outcome::done) {
      c.pending.reset();
      progress = true;
    } else {
      progress = c.pending->count != before;
    }
  }
  RequestRecord r;
  for (int i = 0; i < kBatchPerChannel && !c.pending && !c.broken; ++i) {
    if (!c.channel.requests.try_pop(&r, /*ring_bell=*/false).ok()) break;  // empty
    progress = true;
    ++c.popped_since_ring;
    prefetch_next(c);
    if (apply(c, r) == Outcome::deferred) c.pending = r;
  }
  wake_client(c);
  return progress;
}

void TableOwner::prefetch_next(const ChannelState& c) const {
  // The next insert's block state, and a packed table's chunk header, are
  // lines another core just wrote: fetching them while this request is
  // applied hides most of that miss. Only hints: nothing read here is
  // trusted.
  const auto* next = static_cast<const RequestRecord*>(c.channel.requests.peek(0));
  if (!next) return;
  auto fetch = [&](uint32_t b) {
    if (b >= arena_.total_blocks()) return;
    arena_.prefetch_state(b);
    if (packed_) __builtin_prefetch(arena_.data({b, 0}));
  };
  if (next->op == static_cast<uint32_t>(RequestOp::insert)) {
    for (uint32_t i = 0, n = std::min(next->count, kRecordRefs); i < n; ++i) fetch(next->payload.insert.refs[i].block);
  } else if (next->op == static_cast<uint32_t>(RequestOp::insert_items)) {
    // A writer's items mostly share a chunk: its first and last block.
    uint32_t n = std::min(next->count, kRecordItems);
    if (n == 0) return;
    fetch(next->payload.items.items[0].ref.block);
    if (next->payload.items.items[n - 1].ref.block != next->payload.items.items[0].ref.block)
      fetch(next->payload.items.items[n - 1].ref.block);
  }
}

TableOwner::Outcome TableOwner::apply(ChannelState& c, RequestRecord& r) {
  if (Status s = check_request(r, max_batch_); !s.ok()) {
    fail(c, r, s);
    return Outcome::done;
  }
  switch (static_cast<RequestOp>(r.op)) {
    case RequestOp::insert: return insert(c, r);
    case RequestOp::insert_items: return insert_items(c, r);
    case RequestOp::sample: return sample(c, r);
    case RequestOp::release: release(c, r.id); break;
    case RequestOp::drop: drop(c, r); break;
    case RequestOp::update: update(c, r); break;
    case RequestOp::remove: remove(c, r); break;
    case RequestOp::shard: return shard(c, r);
    case RequestOp::sample_packed: break;  // refused by check_request
  }
  return Outcome::done;
}

TableOwner::Outcome TableOwner::refuse(ChannelState& c, const RequestRecord& r, const char* what) {
  if (stopping_) {
    // A dropped table is closed to its clients; only a stopping server is
    // a disconnection (a client that hears it gives up every handle).
    if (stop_reason_ == ChannelClosed::table_dropped)
      fail(c, r, {Errc::closed, std::string(what) + " on table " + table_.name() + " could not proceed before the table was dropped"});
    else
      fail(c, r, {Errc::disconnected, std::string(what) + " could not proceed before the server stopped"});
    return Outcome::done;
  }
  if (r.deadline_ns == 0) {
    fail(c, r, {Errc::rate_limited, std::string("the rate limiter of table ") + table_.name() + " does not allow " +
                                        what + " now"});
    return Outcome::done;
  }
  if (r.deadline_ns > 0 && monotonic_ns() >= r.deadline_ns) {
    fail(c, r, {Errc::timeout, std::string(what) + " on table " + table_.name() +
                                   " waited for the rate limiter until its deadline"});
    return Outcome::done;
  }
  return Outcome::deferred;
}

bool TableOwner::expired(ChannelState& c, const RequestRecord& r, const char* what) {
  if (r.deadline_ns <= 0) return false;
  // Once per round of a channel: a round applies at most kBatchPerChannel
  // requests, microseconds, and a clock read per insert would cost the
  // owner a sixth of its time per 400 B item (bench/NOTES.md, "The owner's
  // clock"). The client hears every insert's verdict, and a sample's is
  // settled by the gate (claim_sample), so a round late here changes no
  // one's view.
  if (round_now_ns_ == 0) round_now_ns_ = monotonic_ns();
  if (round_now_ns_ < r.deadline_ns) return false;
  // A deferred request comes here too (its rate limiter let it through
  // too late), so the message names both ways of getting here.
  fail(c, r, {Errc::timeout, std::string(what) + " on table " + table_.name() +
                                 " came up for applying after its deadline (it waited for the rate limiter, or the "
                                 "server was stalled); not applied"});
  return true;
}

void TableOwner::send_responses(ChannelState& c) {
  // Clients keep at most ring-capacity responses outstanding, so a full
  // response ring means the client broke the protocol, never that it is slow.
  for (const ResponseRecord& rsp : out_) {
    if (c.broken) break;
    if (Status s = c.channel.responses.try_push(&rsp, response_bytes(rsp), /*ring_bell=*/false); !s.ok()) {
      log_warn("table " + table_.name() + ": client " + std::to_string(c.client) +
               " overran its response ring; closing its channel");
      close_channel(c, ChannelClosed::protocol_error);
      break;
    }
    c.answered_since_ring = true;
  }
  out_.clear();
}

void TableOwner::wake_client(ChannelState& c) {
  // A held client is woken in steps of half its ring. While the rate
  // limiter holds one of this channel's requests, whatever else the
  // client sends queues behind it: waking it sooner only lets it queue
  // more, and costs it a futex sleep and wake-up per limiter turn (for an
  // Ape-X actor, one per learner update, more CPU than the steps it then
  // writes: bench/NOTES.md, "Ape-X: time in engram calls"). So while a
  // request is held and the batch answered nothing but inserts, with
  // success, both bells stay silent until half the ring was freed since
  // they last rang, as long as a thirty-second of it is still queued. A
  // client that sleeps on a full ring or on response credit is then woken
  // with records still queued for this owner, so the owner does not idle
  // for want of its requests while the client wakes. One with fewer queued
  // (a writer out of spare blocks, which come with the acks) is woken at
  // every turn: left asleep, it would run dry and leave the line to the
  // other writers until it woke (bench/NOTES.md, "Held writers and their
  // spare blocks"). Any other answer (an error, a sample, a priority
  // update) and any batch that ends with nothing held ring at once; and
  // every client wait ends within a slice (0.1 s) to look again, whatever
  // this does. The queue is read from the client's ring, which it can
  // scribble on: that changes only when it is woken. (Steps of a sixth as
  // many records for a writer of insert_items records, whose response
  // credit, a slot per item, runs out with a sixth of a ring of them
  // queued, were tried: they cost its process more CPU per item, its own
  // work included; bench/NOTES.md, "Ape-X: time in engram calls".)
  const uint32_t step = c.channel.requests.capacity() / kWakeFraction;
  const uint32_t floor = std::max<uint32_t>(1, c.channel.requests.capacity() / kWakeFloor);
  bool quiet = c.pending && std::all_of(out_.begin(), out_.end(), is_ack_record) && c.popped_since_ring < step &&
               c.channel.requests.peek(floor - 1) != nullptr;
  // One wake-up for the whole batch, for a client waiting on a full ring,
  // rung before the responses land (as before a157f75). Rung after them,
  // the same traffic took twice the context switches, and a writer beside
  // a sampler made 0.55-0.70 of its inserts (bench/NOTES.md, "Before and
  // after the hardening").
  if (!quiet && c.popped_since_ring) c.channel.requests.ring_space();
  send_responses(c);
  if (quiet || c.broken) return;
  // One ring of the bell per batch: a client that spins sees the records
  // as they land, one that sleeps is woken now.
  if (c.answered_since_ring) c.channel.responses.data_bell().ring();
  c.popped_since_ring = 0;
  c.answered_since_ring = false;
}

void TableOwner::respond(ChannelState& c, const ResponseRecord& rsp) {
  // Kept until the end of the batch (send_responses): writing the ring here
  // would leave stores to lines the client's core holds in the store buffer,
  // and the next request's atomic (a pin, a reference) would wait for them
  // to drain, one cross-core round trip per request.
  if (!c.broken) out_.push_back(rsp);
}

void TableOwner::fail(ChannelState& c, const RequestRecord& r, const Status& s) { respond(c, error_response(r, s)); }

void TableOwner::close_channel(ChannelState& c, ChannelClosed reason) {
  if (!c.broken) {
    // The client's wait re-checks `closed` after announcing itself a
    // sleeper, so the ordinary ring reaches it (see Doorbell::ring).
    c.channel.header->closed.store(static_cast<uint32_t>(reason), std::memory_order_release);
    c.channel.responses.data_bell().ring();
  }
  c.broken = true;
  c.pending.reset();
  leave_insert_line(c);
  give_back(c);
}

void TableOwner::give_back(ChannelState& c) {
  for (auto& [id, blocks] : c.pins)
    for (BlockRef b : blocks) (void)arena_.release(arena_id_, b);
  c.pins.clear();
  c.holds.for_each([&](uint64_t h) { (void)arena_.release(arena_id_, unpack_block(h)); });
  c.holds.clear();
}

void TableOwner::unpin(BlockRef b, const char* what) {
  bool last = false;
  Status s = arena_.unref(arena_id_, b, &last);
  if (!s.ok()) log_error("table " + table_.name() + ": " + what + ": " + s.message());
  if (!last) return;
  freed_.push_back(b);
  if (!collecting_frees_) list_freed();
}

TableOwner::FreedBatch::FreedBatch(TableOwner* o) : o_(o), outer_(!o->collecting_frees_) {
  o_->collecting_frees_ = true;
}

TableOwner::FreedBatch::~FreedBatch() {
  if (!outer_) return;  // the outermost batch lists
  o_->collecting_frees_ = false;
  o_->list_freed();
}

void TableOwner::list_freed() {
  order_for_freeing(&freed_);
  for (BlockRef b : freed_)
    if (Status s = arena_.free_reserved(arena_id_, b); !s.ok())
      log_error("table " + table_.name() + ": listing a freed chunk: " + s.message());
  freed_.clear();
}

}  // namespace engram
