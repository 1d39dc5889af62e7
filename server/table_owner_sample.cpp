// Samples: claimed through the channel's sample gate (so that a caller who
// gave up and the owner agree), drawn by the table's sampler, pinned for
// the channel until released, and answered item by item. It touches the
// table, the channel's pins and the sampled chunks' references.
#include <algorithm>
#include <string>

#include "server/log.hpp"
#include "server/table_owner.hpp"

namespace engram {

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

TableOwner::Outcome TableOwner::sample(ChannelState& c, const RequestRecord& r) {
  Outcome o = sample_in_turn(c, r);
  if (o == Outcome::done) c.split.clear();  // a view's held counts go with their request
  return o;
}

TableOwner::Outcome TableOwner::sample_in_turn(ChannelState& c, const RequestRecord& r) {
  if (c.pins.count(r.id)) return fail(c, r, {Errc::invalid_argument, "sample id " + std::to_string(r.id) +
                                                                          " is still pinned; release it first"}),
                                 Outcome::done;
  if (expired(c, r, "a sample")) return Outcome::done;
  if (given_up(c, r))
    return fail(c, r, {Errc::timeout, "a sample on table " + table_.name() + " was given up by its caller"}), Outcome::done;
  if (view_) return sample_view(c, r);
  const bool look = (r.flags & kSampleNewest) != 0;  // answered at once, none or more
  // A take for delivery (kSampleSequences) takes up to its count: what a
  // queue's limiter allows now, so that the last items of a burst leave
  // too, not only full batches.
  uint32_t count = r.count;
  if (!look && (r.flags & kSampleSequences))
    count = static_cast<uint32_t>(std::max<int64_t>(1, table_.limiter().samples_allowed(count)));
  const bool distinct = (r.flags & kSampleDistinct) != 0;
  if (!look && !table_.limiter().can_sample(count)) return refuse(c, r, "a sample");
  // An empty table waits (as the limiter would have it), unless the
  // sample is without repeats: then too few items is the caller's error,
  // at once (Table::sample says so), as for a table of fewer than count.
  if (!look && !distinct && table_.size() == 0) return refuse(c, r, "a sample");
  if (!claim_sample(c, r)) return Outcome::done;
  batch_.clear();
  defer_releases_ = true;
  Status sampled = look ? table_.newest(count, r.payload.sample.from, &batch_)
                        : table_.sample(count, &batch_, distinct, r.payload.sample.num_steps);
  defer_releases_ = false;
  if (!sampled.ok()) {
    release_deferred();  // nothing, as a refused sample changes nothing
    if (sampled.code() == Errc::rate_limited) return refuse(c, r, "a sample");
    return fail(c, r, sampled), Outcome::done;
  }
  answer_sample(c, r);
  return Outcome::done;
}

void TableOwner::answer_sample(ChannelState& c, const RequestRecord& r) {
  std::vector<BlockRef>& pins = c.pins[r.id];
  pins.reserve(batch_.refs.size());
  size_t num_refs = batch_.refs.size();
  for (size_t k = 0; k < num_refs && k < kPrefetchAhead; ++k) arena_.prefetch_state(batch_.refs[k].block);
  const bool sequences = (r.flags & kSampleSequences) != 0;
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
    w = {it.key, it.priority, {it.probability}, it.times_sampled, it.table_size, it.num_refs, 0, {}};
    if (sequences) w.sequence = it.inserted_seq;
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
    p.items[p.n] = {it.key, it.priority, {it.probability}, it.times_sampled, it.table_size, w.refs[0]};
    if (sequences) p.items[p.n].sequence = it.inserted_seq;
    ++p.n;
    if (p.n == kPackedItems) send_packed();
  }
  send_packed();
  if (rsp.count == 0) respond(c, rsp);
  release_deferred();
}

void TableOwner::release_deferred() {
  for (BlockRef b : deferred_) unpin(b, "releasing an expired item's chunk");
  deferred_.clear();
}

void TableOwner::release(ChannelState& c, uint64_t id) {
  auto it = c.pins.find(id);
  if (it == c.pins.end()) return;  // unknown ids are a client bug with nothing to undo
  for (BlockRef b : it->second) unpin(b, "unpinning");
  c.pins.erase(it);
}

}  // namespace engram
