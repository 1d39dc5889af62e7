#include "core/shard_view.hpp"

#include <cmath>
#include <string>

namespace engram {
namespace {

Status no_shard(uint32_t shard, size_t shards) {
  return {Errc::invalid_argument,
          "shard " + std::to_string(shard) + " of a table of " + std::to_string(shards) + " shards"};
}

}  // namespace

ShardView::ShardView(uint32_t shards, size_t routes)
    : shards_(shards), fifo_(shards), outbox_(shards), max_routes_(routes) {}

Status ShardView::report(uint32_t shard, double mass, uint64_t size) {
  if (shard >= shards()) return no_shard(shard, shards());
  // One shard's report alone, as ShardSplit::of checks it among all.
  if (Result<ShardSplit> one = ShardSplit::of({ShardShare{mass, size}});
      !one.ok() && one.status().code() != Errc::empty)
    return {Errc::invalid_argument, "shard " + std::to_string(shard) + ": " + one.status().message()};
  ShardCounters& c = shards_[shard];
  c.present = true;
  c.mass = mass;
  c.size = size;
  return Status::Ok();
}

void ShardView::away(uint32_t shard, std::vector<uint64_t>* dropped) {
  if (shard >= shards()) return;
  ShardCounters& c = shards_[shard];
  c.present = false;
  for (uint64_t key : fifo_[shard]) {
    if (waiting_.erase(key) == 0) continue;  // forgotten before
    dropped->push_back(key);
    ++c.dropped;
  }
  fifo_[shard].clear();
  c.waiting = 0;
}

Status ShardView::add(uint32_t shard, uint64_t key, uint64_t remote_key, double local, double mass) {
  if (shard >= shards()) return no_shard(shard, shards());
  ShardCounters& c = shards_[shard];
  if (!c.present)
    return {Errc::invalid_argument, "a draw of shard " + std::to_string(shard) + ", which has not reported"};
  if (!std::isfinite(local) || local < 0 || local > 1 || !std::isfinite(mass) || mass < 0)
    return {Errc::invalid_argument, "a draw of shard " + std::to_string(shard) +
                                        " with a probability outside [0, 1] or a mass that is not finite and >= 0"};
  if (!waiting_.emplace(key, Waiting{shard, remote_key, local * mass}).second)
    return {Errc::already_exists, "key " + std::to_string(key) + " is waiting already"};
  fifo_[shard].push_back(key);
  ++c.waiting;
  ++c.draws;
  return Status::Ok();
}

void ShardView::forget(uint64_t key) {
  auto it = waiting_.find(key);
  if (it == waiting_.end()) return;
  ShardCounters& c = shards_[it->second.shard];
  --c.waiting;
  ++c.dropped;
  waiting_.erase(it);  // its place in the FIFO is skipped when reached
}

std::vector<ShardShare> ShardView::shares() const {
  std::vector<ShardShare> out;
  out.reserve(shards_.size());
  for (const ShardCounters& c : shards_) out.push_back(c.present ? ShardShare{c.mass, c.size} : ShardShare{});
  return out;
}

Status ShardView::split(uint32_t n, std::mt19937_64& rng, std::vector<uint32_t>* counts) const {
  Result<ShardSplit> s = ShardSplit::of(shares());
  if (!s.ok()) return s.status();
  counts->assign(shards_.size(), 0);
  s->draw(n, rng, counts->data());
  return Status::Ok();
}

bool ShardView::ready(const std::vector<uint32_t>& counts, bool* gone) const {
  *gone = false;
  bool all = true;
  for (size_t i = 0; i < counts.size() && i < shards_.size(); ++i) {
    if (counts[i] == 0) continue;
    if (!shards_[i].present) *gone = true;
    if (shards_[i].waiting < counts[i]) all = false;
  }
  return all && !*gone && counts.size() == shards_.size();
}

Status ShardView::peek(const std::vector<uint32_t>& counts, std::vector<ViewPick>* out, uint64_t* size) const {
  bool gone = false;
  if (!ready(counts, &gone)) return {Errc::rate_limited, "the shards' draws are not all here yet"};
  Result<ShardSplit> s = ShardSplit::of(shares());
  if (!s.ok()) return s.status();
  *size = s->size();
  for (uint32_t i = 0; i < shards(); ++i) {
    uint32_t k = 0;
    for (auto key = fifo_[i].begin(); k < counts[i]; ++key) {  // ready(): enough live keys
      auto w = waiting_.find(*key);
      if (w == waiting_.end()) continue;  // forgotten
      out->push_back({*key, i, s->weight_probability(w->second.weight)});
      ++k;
    }
  }
  return Status::Ok();
}

void ShardView::commit(const std::vector<uint32_t>& counts) {
  for (uint32_t i = 0; i < shards() && i < counts.size(); ++i) {
    ShardCounters& c = shards_[i];
    for (uint32_t k = 0; k < counts[i] && !fifo_[i].empty();) {
      uint64_t key = fifo_[i].front();
      fifo_[i].pop_front();
      auto w = waiting_.find(key);
      if (w == waiting_.end()) continue;  // forgotten
      routes_[key] = {i, w->second.remote_key};
      route_order_.push_back(key);
      waiting_.erase(w);
      --c.waiting;
      ++c.taken;
      ++k;
    }
  }
  while (route_order_.size() > max_routes_) {
    routes_.erase(route_order_.front());
    route_order_.pop_front();
  }
}

Status ShardView::take(const std::vector<uint32_t>& counts, std::vector<ViewPick>* out, uint64_t* size) {
  if (Status s = peek(counts, out, size); !s.ok()) return s;
  commit(counts);
  return Status::Ok();
}

bool ShardView::route(uint64_t key, double priority) {
  auto r = routes_.find(key);
  if (r == routes_.end()) {
    ++unrouted_;
    return false;
  }
  ShardCounters& c = shards_[r->second.shard];
  std::deque<RemoteUpdate>& box = outbox_[r->second.shard];
  if (box.size() == kMaxShardOutbox) {
    box.pop_front();
    ++c.outbox_dropped;
  }
  box.push_back({r->second.remote_key, priority});
  ++c.updates;
  c.outbox = box.size();
  return true;
}

void ShardView::take_updates(uint32_t shard, size_t max, std::vector<RemoteUpdate>* out) {
  if (shard >= shards()) return;
  std::deque<RemoteUpdate>& box = outbox_[shard];
  for (; max > 0 && !box.empty(); --max) {
    out->push_back(box.front());
    box.pop_front();
  }
  shards_[shard].outbox = box.size();
}

}  // namespace engram
