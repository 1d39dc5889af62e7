#include "daemon/table_owner.hpp"

#include <pthread.h>

#include <algorithm>
#include <future>
#include <string>

#include "core/chunk_format.hpp"
#include "core/priority.hpp"
#include "daemon/log.hpp"

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
// A record of acks for successful inserts (up to kRecordAcks of them).
bool is_ack_record(const ResponseRecord& r) {
  return r.op == static_cast<uint32_t>(RequestOp::insert) && r.status == 0;
}
// The longest an owner sleeps without looking for work. Clients can write
// the bell it sleeps on (they ring it), so a client that rewrites its words
// can make a wake-up go astray; the daemon's own wake-ups (wake_all) and
// this bound keep the owner, and the control thread that waits on it,
// from waiting for ever. An idle table wakes this often: no measurable CPU.
constexpr int64_t kMaxSleepNs = 100'000'000;
}

TableOwner::TableOwner(ChunkArena arena, uint32_t arena_id, Table table, const TableSpec& spec, Doorbell* bell,
                       uint32_t max_batch)
    : arena_(arena), arena_id_(arena_id), table_(table), bell_(bell), max_batch_(max_batch), spec_(spec),
      sig_hash_(signature_hash(table.columns(), table.num_columns())),
      packed_(signature_compressed(table.columns(), table.num_columns())) {
  table_.set_remove_hook([this](const ItemSlot& it, const ChunkRef* refs) {
    for (uint32_t i = 0; i < it.num_refs; ++i)
      if (defer_releases_) deferred_.push_back({refs[i].block, refs[i].generation});
      else unpin({refs[i].block, refs[i].generation}, "releasing an item's chunk");
  });
}

TableOwner::~TableOwner() {
  if (thread_.joinable()) stop(ChannelClosed::daemon_stopping);
}

void TableOwner::start() {
  thread_ = std::thread([this] {
    // "own:<table>" in top -H, gdb and /proc: which thread serves which table.
    std::string name = ("own:" + table_.name()).substr(0, 15);
    (void)pthread_setname_np(pthread_self(), name.c_str());
    run();
  });
}

void TableOwner::stop(ChannelClosed reason) {
  call([&] {
    stopping_ = true;
    while (poll_once()) {
    }
    for (auto& c : channels_) close_channel(*c, reason);
    channels_.clear();
  });
  stop_.store(true);
  if (bell_) bell_->wake_all();
  if (thread_.joinable()) thread_.join();
}

void TableOwner::post(std::function<void()> f) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    commands_.push_back(std::move(f));
    has_commands_.store(true, std::memory_order_release);
  }
  bell_->wake_all();
}

void TableOwner::call(std::function<void()> f) {
  if (!thread_.joinable() || std::this_thread::get_id() == thread_.get_id()) {
    f();
    return;
  }
  std::promise<void> done;
  auto fut = done.get_future();
  post([&] {
    f();
    done.set_value();
  });
  fut.wait();
}

void TableOwner::park(std::shared_ptr<std::latch> parked, std::shared_ptr<std::latch> go) {
  if (!thread_.joinable()) {
    parked->count_down();
    return;
  }
  // Shared: the owner may still be returning from go->wait() when the
  // thread that parked it has moved on.
  post([parked, go] {
    parked->count_down();
    go->wait();
  });
}

void TableOwner::ping(std::function<void()> answered) {
  if (!thread_.joinable()) {
    answered();
    return;
  }
  post(std::move(answered));
}

Status TableOwner::restore(const TableState& s) {
  // Every reference is checked as an insert checks it (the chunk exists,
  // has this table's signature, and holds the slice), so that a checkpoint
  // cannot restore an item that no sample could read. A restored chunk is
  // sealed and the daemon's alone, so its header, checked once here, need
  // not be read by samplers.
  for (const ItemState& it : s.items)
    for (uint32_t k = 0; k < it.num_refs && it.first_ref + k < s.refs.size(); ++k) {
      ChunkHeader h;
      if (Status c = check_ref_chunk(s.refs[it.first_ref + k], &h); !c.ok())
        return {Errc::corrupt, "table '" + table_.name() + "': item " + std::to_string(it.key) + ", chunk reference " +
                                   std::to_string(k) + ": " + c.message()};
    }
  auto plain_steps = [this](const ChunkRef& ref) -> uint32_t {
    ChunkHeader h;
    return check_ref_chunk(ref, &h).ok() ? plain_steps_of(h) : 0;
  };
  Status r;
  call([&] { r = table_.restore(s, plain_steps); });
  return r;
}

void TableOwner::attach(uint32_t client, Channel channel) {
  call([&] {
    auto c = std::make_unique<ChannelState>();
    c->client = client;
    c->channel = channel;
    channels_.push_back(std::move(c));
  });
}

void TableOwner::detach(uint32_t client, ChannelClosed reason) {
  call([&] {
    for (size_t i = 0; i < channels_.size(); ++i) {
      if (channels_[i]->client != client) continue;
      close_channel(*channels_[i], reason);
      channels_.erase(channels_.begin() + static_cast<long>(i));
      return;
    }
  });
}

void TableOwner::reset() {
  call([&] {
    FreedBatch batch(this);  // every item's blocks, listed in order
    table_.reset();
  });
}

Status TableOwner::set_rate_limiter(const RateLimiterConfig& c) {
  Status s;
  call([&] {
    s = table_.set_rate_limiter(c);
    if (s.ok()) spec_.limiter = c;
  });
  return s;
}

TableInfoWire TableOwner::info() {
  TableInfoWire w{};
  call([&] {
    TableInfo i = table_.info();
    w.spec = spec_;
    w.size = i.size;
    w.can_sample = i.can_sample;
    w.can_insert = i.can_insert;
    w.clients = static_cast<uint32_t>(channels_.size());
    w.counters = i.counters;
    w.stats = i.stats;
  });
  return w;
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
  send_responses(c);
  if (quiet || c.broken) return;
  // One wake-up for the whole batch, for a client waiting on a full ring.
  if (c.popped_since_ring) c.channel.requests.ring_space();
  // One ring of the bell per batch: a client that spins sees the records
  // as they land, one that sleeps is woken now.
  if (c.answered_since_ring) c.channel.responses.data_bell().ring();
  c.popped_since_ring = 0;
  c.answered_since_ring = false;
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
    case RequestOp::sample_packed: break;  // refused by check_request
  }
  return Outcome::done;
}

TableOwner::Outcome TableOwner::refuse(ChannelState& c, const RequestRecord& r, const char* what) {
  if (stopping_) {
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

Status TableOwner::check_ref_chunk(const ChunkRef& ref, ChunkHeader* out) const {
  if (ref.block >= arena_.total_blocks())
    return {Errc::stale_reference, "block " + std::to_string(ref.block) + " does not exist"};
  return check_chunk(arena_.data({ref.block, ref.generation}), arena_.block_size(ref.block), table_.columns(),
                     table_.num_columns(), sig_hash_, ref.offset, ref.length, out);
}

Status TableOwner::check_insert_chunk(const ChunkRef& ref, uint32_t chunk_steps, ChunkHeader* out) const {
  // check_ref_chunk refuses a block outside the arena before reading it.
  if (packed_ || ref.block >= arena_.total_blocks()) return check_ref_chunk(ref, out);
  return plain_chunk_header(arena_.block_size(ref.block), table_.columns(), table_.num_columns(), sig_hash_,
                            chunk_steps, ref.offset, ref.length, out);
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

bool TableOwner::given_up(const ChannelState& c, const RequestRecord& r) const {
  if (r.deadline_ns <= 0) return false;
  uint64_t g = c.channel.header->sample_gate.load(std::memory_order_acquire);
  return (g & kGateCancelled) && (g & ~kGateCancelled) >= r.id;
}

bool TableOwner::claim_sample(ChannelState& c, const RequestRecord& r) {
  if (r.deadline_ns <= 0) return true;  // its caller waits for the answer, whenever it comes
  std::atomic<uint64_t>& gate = c.channel.header->sample_gate;
  uint64_t g = gate.load(std::memory_order_acquire);
  // Bounded: only a client that scribbles on its own gate makes a CAS fail
  // more than once, and then it loses this sample.
  for (int tries = 0; tries < 4; ++tries) {
    if ((g & kGateCancelled) && (g & ~kGateCancelled) >= r.id) break;
    if (gate.compare_exchange_weak(g, r.id, std::memory_order_acq_rel, std::memory_order_acquire)) return true;
  }
  fail(c, r, {Errc::timeout, "a sample on table " + table_.name() + " was given up by its caller at its deadline"});
  return false;
}

TableOwner::Outcome TableOwner::insert(ChannelState& c, const RequestRecord& r) {
  Outcome o = insert_in_turn(c, r);
  if (o == Outcome::done) leave_insert_line(c);
  else if (std::find(insert_line_.begin(), insert_line_.end(), &c) == insert_line_.end()) insert_line_.push_back(&c);
  return o;
}

TableOwner::Outcome TableOwner::insert_items(ChannelState& c, RequestRecord& r) {
  auto& in = r.payload.items;
  for (uint32_t i = 0; i < r.count; ++i) {
    if (c.broken) return Outcome::done;
    RequestRecord one{};
    one.op = static_cast<uint32_t>(RequestOp::insert);
    one.count = 1;
    one.id = r.id + i;
    one.deadline_ns = r.deadline_ns;
    one.payload.insert.priority = in.items[i].priority;
    one.payload.insert.chunk_steps = in.chunk_steps;
    one.payload.insert.want_spare = in.want_spare >> i & 1;
    one.payload.insert.refs[0] = in.items[i].ref;
    if (insert(c, one) == Outcome::done) continue;
    std::copy(in.items + i, in.items + r.count, in.items);
    in.want_spare >>= i;
    r.id += i;
    r.count -= i;
    return Outcome::deferred;
  }
  return Outcome::done;
}

void TableOwner::leave_insert_line(const ChannelState& c) {
  auto it = std::find(insert_line_.begin(), insert_line_.end(), &c);
  if (it != insert_line_.end()) insert_line_.erase(it);
}

TableOwner::Outcome TableOwner::insert_in_turn(ChannelState& c, const RequestRecord& r) {
  const auto& in = r.payload.insert;
  if (expired(c, r, "an insert")) return Outcome::done;
  if (Status s = validate_priority(in.priority); !s.ok()) return fail(c, r, s), Outcome::done;
  if (r.count > table_.refs_per_item())
    return fail(c, r, {Errc::invalid_argument, "item spans " + std::to_string(r.count) + " chunks; table " +
                                                   table_.name() + " allows " + std::to_string(table_.refs_per_item())}),
           Outcome::done;
  bool my_turn = insert_line_.empty() || insert_line_.front() == &c;
  if (!my_turn || !table_.limiter().can_insert(1)) return refuse(c, r, "an insert");

  // Check the chunks before taking anything: a refused insert must leave a
  // writer's blocks as they were (still reserved by it). Clients may
  // rewrite a chunk later, but only samplers read chunk bytes, and they
  // check what they read.
  ChunkHeader headers[kRecordRefs];
  for (uint32_t i = 0; i < r.count; ++i) {
    Status s = check_insert_chunk(in.refs[i], in.chunk_steps, &headers[i]);
    if (!s.ok()) return fail(c, r, {s.code(), "item reference " + std::to_string(i) + ": " + s.message()}), Outcome::done;
  }
  // Each reference takes one item reference; a chunk this channel does not
  // hold yet also takes the channel's hold, in the same CAS (sealing the
  // writer's new chunk).
  BlockRef newly[kRecordRefs];
  uint32_t newly_ref[kRecordRefs];
  uint32_t n_new = 0, n_taken = 0;
  auto undo = [&] {
    for (uint32_t i = 0; i < n_taken; ++i) (void)arena_.release(arena_id_, {in.refs[i].block, in.refs[i].generation});
    for (uint32_t i = 0; i < n_new; ++i) {
      c.holds.erase(pack_block(newly[i]));
      (void)arena_.release(arena_id_, newly[i]);
    }
  };
  for (; n_taken < r.count; ++n_taken) {
    BlockRef b{in.refs[n_taken].block, in.refs[n_taken].generation};
    bool held = c.holds.contains(pack_block(b));
    Status s = held ? arena_.acquire(b) : arena_.pin(c.client, b, 2);
    if (!s.ok()) {
      undo();
      return fail(c, r, {s.code(), "item reference " + std::to_string(n_taken) + ": " + s.message()}), Outcome::done;
    }
    if (!held) {
      c.holds.insert(pack_block(b));
      newly_ref[n_new] = n_taken;
      newly[n_new++] = b;
    }
  }
  size_t freed_before = freed_.size();  // an eviction may free blocks
  auto key = table_.insert(in.priority, in.refs, r.count, plain_steps_of(headers[0]));
  if (!key.ok()) {
    undo();
    return fail(c, r, key.status()), Outcome::done;
  }
  // The next insert's eviction drops a reference to a chunk written long
  // ago: start fetching its state word now.
  const ChunkRef* victim = nullptr;
  for (uint32_t i = 0, n = table_.next_victim(&victim); i < n; ++i)
    if (victim[i].block < arena_.total_blocks()) arena_.prefetch_state(victim[i].block);
  for (uint32_t i = 0; i < n_new; ++i) {
    uint64_t raw = 0, stored = 0;
    if (chunk_sizes(arena_.data(newly[i]), arena_.block_size(newly[i].index), headers[newly_ref[i]], table_.columns(),
                    &raw, &stored)
            .ok())
      table_.count_chunk(raw, stored);
  }
  InsertAck a{*key, kNoSpare, 0};
  // A spare for the writer, if it wants one (see InsertAck): the victim's
  // block, if this insert freed one of the class of the item's newest
  // chunk, else one from the free list.
  uint32_t want = arena_.class_of(in.refs[r.count - 1].block);
  for (size_t i = freed_before; in.want_spare && i < freed_.size(); ++i) {
    if (c.broken || arena_.class_of(freed_[i].index) != want || !arena_.hand_over(arena_id_, c.client, freed_[i]).ok()) continue;
    a.spare_block = freed_[i].index;
    a.spare_generation = freed_[i].generation;
    freed_.erase(freed_.begin() + static_cast<long>(i));
    break;
  }
  if (a.spare_block == kNoSpare && in.want_spare && !c.broken) {
    auto b = arena_.alloc(arena_id_, want);  // none free: the writer waits for evictions, or asks the server
    if (b.ok() && arena_.hand_over(arena_id_, c.client, *b).ok()) {
      a.spare_block = b->index;
      a.spare_generation = b->generation;
    } else if (b.ok()) {
      (void)arena_.free_reserved(arena_id_, *b);
    }
  }
  // Joins the ack record of the inserts just before it in this batch, if
  // there is one with room: one record (and one cache line for the client
  // to fetch) per few inserts, not per insert.
  if (c.broken) return Outcome::done;
  if (!out_.empty() && is_ack_record(out_.back()) && out_.back().count < kRecordAcks) {
    ResponseRecord& group = out_.back();
    group.payload.acks[group.count++] = a;
    return Outcome::done;
  }
  ResponseRecord rsp{};
  rsp.op = r.op;
  rsp.id = r.id;
  rsp.count = 1;
  rsp.payload.acks[0] = a;
  respond(c, rsp);
  return Outcome::done;
}

TableOwner::Outcome TableOwner::sample(ChannelState& c, const RequestRecord& r) {
  if (c.pins.count(r.id)) return fail(c, r, {Errc::invalid_argument, "sample id " + std::to_string(r.id) +
                                                                          " is still pinned; release it first"}),
                                 Outcome::done;
  if (expired(c, r, "a sample")) return Outcome::done;
  if (given_up(c, r))
    return fail(c, r, {Errc::timeout, "a sample on table " + table_.name() + " was given up by its caller"}), Outcome::done;
  if (!table_.limiter().can_sample(r.count) || table_.size() == 0) return refuse(c, r, "a sample");
  if (!claim_sample(c, r)) return Outcome::done;
  batch_.clear();
  defer_releases_ = true;
  Status sampled = table_.sample(r.count, &batch_);
  defer_releases_ = false;
  struct Flush {  // after the pins below, whatever happens
    TableOwner* o;
    ~Flush() {
      for (BlockRef b : o->deferred_) o->unpin(b, "releasing an expired item's chunk");
      o->deferred_.clear();
    }
  } flush{this};
  if (!sampled.ok()) {
    if (sampled.code() == Errc::rate_limited) return refuse(c, r, "a sample");
    return fail(c, r, sampled), Outcome::done;
  }
  std::vector<BlockRef>& pins = c.pins[r.id];
  pins.reserve(batch_.refs.size());
  size_t num_refs = batch_.refs.size();
  for (size_t k = 0; k < num_refs && k < kPrefetchAhead; ++k) arena_.prefetch_state(batch_.refs[k].block);
  ResponseRecord rsp{};  // one item of any number of slices
  rsp.op = r.op;
  rsp.id = r.id;
  rsp.count = static_cast<uint32_t>(batch_.items.size());
  ResponseRecord packed = rsp;  // one-slice items, kPackedItems to a record
  packed.op = static_cast<uint32_t>(RequestOp::sample_packed);
  auto send_packed = [&] {
    if (packed.payload.packed.n == 0) return;
    respond(c, packed);
    packed.payload.packed.n = 0;
  };
  for (uint32_t i = 0; i < rsp.count; ++i) {
    const SampledItem& it = batch_.items[i];
    SampledItemWire& w = rsp.payload.item;
    w = {it.key, it.priority, it.probability, it.times_sampled, it.table_size, it.num_refs, 0, {}};
    for (uint32_t k = 0; k < it.num_refs && k < kRecordRefs; ++k) {
      w.refs[k] = batch_.refs[it.first_ref + k];
      if (it.first_ref + k + kPrefetchAhead < num_refs) arena_.prefetch_state(batch_.refs[it.first_ref + k + kPrefetchAhead].block);
      BlockRef b{w.refs[k].block, w.refs[k].generation};
      // The item still holds its reference (expired items' releases are
      // deferred until after this loop), so this fails only on corruption.
      if (Status s = arena_.acquire(b); s.ok()) pins.push_back(b);
      else log_error("table " + table_.name() + ": pinning a sampled chunk: " + s.message());
    }
    if (it.num_refs != 1) {
      send_packed();
      rsp.index = i;
      respond(c, rsp);
      continue;
    }
    PackedItemsWire& p = packed.payload.packed;
    if (p.n == 0) packed.index = i;
    p.plain_steps[p.n] = it.plain_steps;
    p.items[p.n++] = {it.key, it.priority, it.probability, it.times_sampled, it.table_size, w.refs[0]};
    if (p.n == kPackedItems) send_packed();
  }
  send_packed();
  if (rsp.count == 0) respond(c, rsp);
  return Outcome::done;
}

void TableOwner::release(ChannelState& c, uint64_t id) {
  auto it = c.pins.find(id);
  if (it == c.pins.end()) return;  // unknown ids are a client bug with nothing to undo
  for (BlockRef b : it->second) unpin(b, "unpinning");
  c.pins.erase(it);
}

void TableOwner::drop(ChannelState& c, const RequestRecord& r) {
  for (uint32_t i = 0; i < r.count; ++i) {
    BlockRef b = r.payload.blocks[i];
    if (!c.holds.erase(pack_block(b))) continue;  // never held here: nothing to give back
    unpin(b, "dropping a writer's chunk");
  }
}

void TableOwner::update(ChannelState& c, const RequestRecord& r) {
  for (uint32_t i = 0; i < r.count; ++i)
    if (Status s = validate_priority(r.payload.updates[i].priority); !s.ok())
      return fail(c, r, {s.code(), "update entry " + std::to_string(i) + ": " + s.message() + " (nothing applied)"});
  ResponseRecord rsp{};
  rsp.op = r.op;
  rsp.id = r.id;
  for (uint32_t i = 0; i < r.count; ++i) {
    Status s = table_.update(r.payload.updates[i].key, r.payload.updates[i].priority);
    if (s.ok()) ++rsp.payload.keys.applied;
    else if (s.code() == Errc::stale_key) rsp.payload.keys.stale_mask |= 1u << i;
    else if (s.code() == Errc::invalid_priority)  // its weight would bring the total past the limit
      return fail(c, r, {s.code(), "update entry " + std::to_string(i) + ": " + s.message() + " (the " +
                                       std::to_string(i) + " entries before it were applied, it and the rest not)"});
    else rsp.payload.keys.unknown_mask |= 1u << i;
  }
  respond(c, rsp);
}

void TableOwner::remove(ChannelState& c, const RequestRecord& r) {
  ResponseRecord rsp{};
  rsp.op = r.op;
  rsp.id = r.id;
  for (uint32_t i = 0; i < r.count; ++i) {
    Status s = table_.remove(r.payload.keys[i]);
    if (s.ok()) ++rsp.payload.keys.applied;
    else if (s.code() == Errc::stale_key) rsp.payload.keys.stale_mask |= 1u << i;
    else rsp.payload.keys.unknown_mask |= 1u << i;
  }
  respond(c, rsp);
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

}  // namespace engram
