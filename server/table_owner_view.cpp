// A view over shards, as its owner serves it: each shard's link reports
// the shard and inserts its draws on a channel of its own, and waits there
// (a shard request) for what the shard is owed; clients sample and update
// the view as a table. The draws, the splits and the routes are the
// ShardView's (core/shard_view.hpp); the items are the table's, so that
// their chunks are pinned, handed out and given back as any table's.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "server/table_owner.hpp"

namespace engram {
namespace {

double draw_probability(const RequestRecord& r) {
  double p;
  static_assert(sizeof p == sizeof r.payload.insert.sequence);
  std::memcpy(&p, &r.payload.insert.sequence, sizeof p);
  return p;
}

}  // namespace

void TableOwner::make_view(uint32_t shards, size_t routes, uint64_t seed) {
  view_ = std::make_unique<ShardView>(shards, routes);
  view_rng_.seed(seed);
}

std::vector<ShardCounters> TableOwner::shard_counters() {
  std::vector<ShardCounters> out;
  if (!view_) return out;
  call([&] {
    for (uint32_t i = 0; i < view_->shards(); ++i) out.push_back(view_->counters(i));
  });
  return out;
}

Status TableOwner::check_draw(const ChannelState& c, const RequestRecord& r) const {
  const bool draw = (r.flags & kInsertDraw) != 0;
  if (!view_) {
    if (!draw) return Status::Ok();
    return {Errc::invalid_argument, "table " + table_.name() + " is not a view over shards; a shard's draw "
                                                               "(kInsertDraw) goes into a view's table only"};
  }
  if (!draw)
    return {Errc::invalid_argument, "table " + table_.name() + " is a view over " + std::to_string(view_->shards()) +
                                        " shards: its items are the shards' draws, which engramd's shard links "
                                        "insert; write into the shards' tables"};
  if (c.shard < 0)
    return {Errc::invalid_argument, "a shard's draw on a channel that has not reported its shard (a shard request "
                                    "comes first)"};
  if (!view_->counters(static_cast<uint32_t>(c.shard)).present)
    return {Errc::invalid_argument, "a draw of shard " + std::to_string(c.shard) + ", which its link reported away"};
  double p = draw_probability(r);
  if (!std::isfinite(p) || p < 0 || p > 1)
    return {Errc::invalid_argument, "a draw of shard " + std::to_string(c.shard) + " with probability " +
                                        std::to_string(p) + ", outside [0, 1]"};
  return Status::Ok();
}

void TableOwner::add_draw(ChannelState& c, const RequestRecord& r, uint64_t key) {
  // check_draw let it in: the shard is present and the numbers are sound,
  // and a key just issued waits nowhere yet.
  Status s = view_->add(static_cast<uint32_t>(c.shard), key, r.payload.insert.producer, draw_probability(r),
                        c.shard_mass);
  if (!s.ok()) (void)table_.remove(key);  // not a draw the view knows: not an item either
}

uint64_t TableOwner::held_draws(uint32_t shard) const {
  uint64_t n = 0;
  for (const auto& ch : channels_)
    if (!ch->broken && shard < ch->split.size()) n += ch->split[shard];
  return n;
}

TableOwner::Outcome TableOwner::shard(ChannelState& c, const RequestRecord& r) {
  const auto& in = r.payload.shard;
  if (!view_)
    return fail(c, r, {Errc::invalid_argument, "table " + table_.name() + " is not a view over shards"}), Outcome::done;
  if (in.shard >= view_->shards())
    return fail(c, r, {Errc::invalid_argument, "shard " + std::to_string(in.shard) + " of a view over " +
                                                   std::to_string(view_->shards()) + " shards"}),
           Outcome::done;
  if (c.shard >= 0 && c.shard != in.shard)
    return fail(c, r, {Errc::invalid_argument, "this channel carries shard " + std::to_string(c.shard) + "'s draws, not " +
                                                   std::to_string(in.shard) + "'s: one channel per shard"}),
           Outcome::done;
  // The report, again at each look while the request waits: the same.
  if (in.state == kShardAway) {
    std::vector<uint64_t> dropped;
    view_->away(in.shard, &dropped);
    for (uint64_t key : dropped) (void)table_.remove(key);
  } else {
    if (Status s = view_->report(in.shard, in.mass, in.size); !s.ok()) return fail(c, r, s), Outcome::done;
    c.shard_mass = in.mass;
  }
  c.shard = in.shard;
  const ShardCounters& n = view_->counters(in.shard);
  const uint64_t lack = view_->short_of(in.shard, held_draws(in.shard));
  const bool owed = n.waiting < in.wait_below || lack > 0 || n.outbox > 0;
  if (!owed && !stopping_ && r.deadline_ns != 0 && (r.deadline_ns < 0 || monotonic_ns() < r.deadline_ns))
    return Outcome::deferred;
  ResponseRecord rsp{};
  rsp.op = r.op;
  rsp.id = r.id;
  constexpr uint64_t kMax32 = std::numeric_limits<uint32_t>::max();
  rsp.payload.shard.waiting = static_cast<uint32_t>(std::min(n.waiting, kMax32));
  rsp.payload.shard.short_of = static_cast<uint32_t>(std::min(lack, kMax32));
  std::vector<RemoteUpdate> updates;
  view_->take_updates(in.shard, std::min(r.count, kRecordUpdates), &updates);
  for (const RemoteUpdate& u : updates) rsp.payload.shard.updates[rsp.count++] = {u.key, u.priority};
  respond(c, rsp);
  return Outcome::done;
}

TableOwner::Outcome TableOwner::sample_view(ChannelState& c, const RequestRecord& r) {
  if (r.flags & (kSampleNewest | kSampleDistinct | kSampleSequences))
    return fail(c, r, {Errc::invalid_argument, "table " + table_.name() +
                                                   " is a view over shards, sampled with repeats as its shards' "
                                                   "samplers draw; follow, sample without repeats or take for "
                                                   "delivery from a shard's own table"}),
           Outcome::done;
  // Split once, and again only when a shard it counted went away: a batch
  // held for its draws keeps its counts (core/shard_view.hpp says why).
  bool gone = false;
  if (!c.split.empty() && !view_->ready(c.split, &gone) && gone) c.split.clear();
  if (c.split.empty() && !view_->split(r.count, view_rng_, &c.split).ok()) {
    c.split.clear();
    return refuse(c, r, "a sample (no shard holds an item)");
  }
  if (!view_->ready(c.split, &gone)) return refuse(c, r, "a sample (its shards' draws are on their way)");
  if (!claim_sample(c, r)) return Outcome::done;
  std::vector<ViewPick> picks;
  uint64_t size = 0;
  if (Status s = view_->peek(c.split, &picks, &size); !s.ok()) return fail(c, r, s), Outcome::done;
  std::vector<uint64_t> keys;
  std::vector<double> probabilities;
  for (const ViewPick& p : picks) {
    keys.push_back(p.key);
    probabilities.push_back(p.probability);
  }
  batch_.clear();
  // The draws expire as they are taken (max_times_sampled 1); while
  // defer_releases_ holds their chunks, the remove hook also leaves them
  // to commit() below rather than forgetting them.
  defer_releases_ = true;
  Status taken = table_.take(keys.data(), probabilities.data(), static_cast<uint32_t>(keys.size()), &batch_,
                             r.payload.sample.num_steps);
  defer_releases_ = false;
  if (!taken.ok()) {
    release_deferred();
    return fail(c, r, taken), Outcome::done;  // a refused take changed nothing: the draws wait on
  }
  view_->commit(c.split);
  const uint32_t one_table = static_cast<uint32_t>(std::min<uint64_t>(size, std::numeric_limits<uint32_t>::max()));
  for (SampledItem& it : batch_.items) it.table_size = one_table;
  answer_sample(c, r);
  return Outcome::done;
}

void TableOwner::update_view(ChannelState& c, const RequestRecord& r) {
  // A key handed out left the view's table at once (max_times_sampled 1):
  // its update goes to its shard; one the view no longer remembers is
  // stale, as an update of an item gone is.
  ResponseRecord rsp{};
  rsp.op = r.op;
  rsp.id = r.id;
  for (uint32_t i = 0; i < r.count; ++i) {
    if (view_->route(r.payload.updates[i].key, r.payload.updates[i].priority)) ++rsp.payload.keys.applied;
    else rsp.payload.keys.stale_mask |= 1u << i;
  }
  respond(c, rsp);
}

}  // namespace engram
