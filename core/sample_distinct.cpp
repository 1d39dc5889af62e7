// Batches without repeats: n distinct items in one draw (a sample with
// ENGRAM_SAMPLE_NO_REPEATS; Reverb never had them).
//
// What `probability` means in such a batch: the item's chance to be in it,
// divided by n. That is the convention of a batch drawn with replacement
// (there n draws of chance p each put an item in the batch p*n times on
// average), so a learner's importance weights (size * probability)^-beta
// need no change, and the weighted mean (1/n) sum f(i) / (size * p_i) over
// a batch is an unbiased estimate of the table's mean of f (Horvitz and
// Thompson's estimator).
//
// How each sampler draws:
//  - uniform: a uniform n-subset of the members (Floyd's algorithm, n
//    draws); probability 1/size, as with replacement.
//  - prioritized: systematic sampling in proportion to weight, with
//    certainty members (as survey samplers draw "probability proportional
//    to size" without replacement). A member whose weight w is at least
//    its share W/n would be drawn at least once in every batch: the table
//    finds such members (Table::sample_distinct; taking them out lowers the
//    share of the rest, so it looks again) and they are in every batch,
//    with chance 1 (probability 1/n). The rest, of total weight W' over
//    m = n - certain places, are drawn with one uniform u: the points
//    (u + k) / m * W', k < m, each descend the sum tree. Every remaining
//    member's interval is shorter than the points' spacing, so it holds at
//    most one point, with chance exactly m * w / W': probability
//    m * w / (n * W'), which is w / W, as with replacement, whenever no
//    member is certain. Each member's chance is exact; which members come
//    together is not independent: members next to each other in the tree
//    (slot order) whose weights sum to less than a spacing never meet.
//    When every weight is 0, a uniform n-subset, as with replacement.
//  - fifo and lifo: the n oldest or newest; max_heap and min_heap: the n
//    first in heap order (priority, then age); probability 1, as for their
//    draws with replacement.
#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <string>
#include <vector>

#include "core/selector.hpp"
#include "core/table.hpp"
#include "core/u64_set.hpp"

namespace engram {
namespace {

// A member weighing at least (1 - kCertainMargin) of its share counts as
// certain (chance 1, not m * w / W' a hair below 1), so that no member's
// interval reaches a full spacing through rounding in the tree's sums
// (relative 1e-16 per level) and is drawn twice.
constexpr double kCertainMargin = 1e-9;

// Redraws of u when rounding still put two points in one member: never
// seen; bounded so that a corrupt tree cannot loop.
constexpr int kSystematicTries = 8;

uint32_t below(std::mt19937_64& rng, uint32_t n) { return std::uniform_int_distribution<uint32_t>(0, n - 1)(rng); }

// Floyd's algorithm: n distinct indices in [0, size), each n-subset
// equally likely; member(i) maps an index to a member.
template <typename Member>
void floyd(uint32_t n, uint32_t size, std::mt19937_64& rng, Member member, Sampled* out) {
  static thread_local U64Set chosen;
  chosen.clear();
  uint32_t k = 0;
  for (uint32_t j = size - n; j < size; ++j) {
    uint32_t r = below(rng, j + 1);
    uint32_t pick = chosen.insert(r) ? r : j;  // j is new: every earlier draw was below it
    if (pick == j) chosen.insert(j);
    out[k++] = {member(pick), 1.0 / size};
  }
}

}  // namespace

double Selector::total_weight() const noexcept {
  return kind() == SelectorKind::prioritized ? tree_.total() : static_cast<double>(size());
}

Status Selector::sample_distinct(uint32_t n, const uint32_t* certain, uint32_t num_certain, std::mt19937_64& rng,
                                 Sampled* out) {
  if (n == 0 || n > size()) return {Errc::empty, "a batch without repeats needs 1..size() members"};
  if (num_certain > n || (num_certain > 0 && kind() != SelectorKind::prioritized))
    return {Errc::invalid_argument, "certain members are for prioritized selectors, at most n of them"};
  switch (kind()) {
    case SelectorKind::uniform: {
      DenseSet set = uniform_set();
      floyd(n, h_->count, rng, [&](uint32_t i) { return set.dense[i]; }, out);
      return Status::Ok();
    }
    case SelectorKind::fifo:
    case SelectorKind::lifo: {
      const bool oldest = kind() == SelectorKind::fifo;
      uint32_t s = oldest ? h_->head : h_->tail;
      const OrderList l = list();
      for (uint32_t k = 0; k < n; ++k, s = oldest ? l.next[s] : l.prev[s]) out[k] = {s, 1.0};
      return Status::Ok();
    }
    case SelectorKind::max_heap:
    case SelectorKind::min_heap: {
      uint32_t k = 0;
      heap().best(n, [&](uint32_t slot) { out[k++] = {slot, 1.0}; });
      return Status::Ok();
    }
    case SelectorKind::prioritized: break;
  }
  if (!(tree_.total() > 0.0)) {  // every weight 0: uniformly, as sample() does
    floyd(n, tree_.occupied(), rng, [&](uint32_t i) { return tree_.occupied_leaf(i); }, out);
    return Status::Ok();
  }
  static thread_local std::vector<double> saved, points;
  static thread_local std::vector<uint32_t> slots;
  static thread_local SumTreeScratch scratch;
  saved.resize(num_certain);
  for (uint32_t c = 0; c < num_certain; ++c) {
    saved[c] = tree_.get(certain[c]);
    tree_.set(certain[c], 0.0);
    out[c] = {certain[c], 1.0 / n};
  }
  auto restore = [&] {
    for (uint32_t c = 0; c < num_certain; ++c) tree_.set(certain[c], saved[c]);
  };
  const uint32_t m = n - num_certain;
  const double rest = tree_.total();
  if (m == 0) return restore(), Status::Ok();
  if (!(rest > 0.0)) return restore(), Status{Errc::empty, "fewer members of nonzero weight than the batch"};
  points.resize(m);
  slots.resize(m);
  bool repeated = true;
  for (int tries = 0; tries < kSystematicTries && repeated; ++tries) {
    double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    for (uint32_t k = 0; k < m; ++k) points[k] = std::min((u + k) / m, std::nextafter(1.0, 0.0));
    // Rising points descend to rising leaves, so a repeat is a neighbour.
    for (uint32_t base = 0; base < m; base += SumTreeScratch::kMaxBatch) {
      uint32_t len = std::min<uint32_t>(m - base, SumTreeScratch::kMaxBatch);
      tree_.sample_batch(points.data() + base, slots.data() + base, len, scratch);
    }
    repeated = false;
    for (uint32_t k = 1; k < m && !repeated; ++k) repeated = slots[k] == slots[k - 1];
  }
  if (!repeated)
    for (uint32_t k = 0; k < m; ++k) out[num_certain + k] = {slots[k], m * tree_.get(slots[k]) / (n * rest)};
  restore();
  if (repeated) return {Errc::corrupt, "the sum tree drew one member twice in a batch without repeats"};
  return Status::Ok();
}

Status Table::sample_distinct(uint32_t n, SampleBatch* out, uint32_t num_steps) {
  if (h_->size < n)
    return {Errc::invalid_capacity, "table '" + std::string(h_->name) + "' holds " + std::to_string(h_->size) +
                                        " items, fewer than a batch of " + std::to_string(n) +
                                        " without repeats; sample fewer, or give the table a rate limiter with "
                                        "min_size >= the batch so that samples wait for enough items"};
  static thread_local std::vector<uint32_t> certain, found;
  static thread_local U64Set taken;
  static thread_local std::vector<Sampled> picks;
  certain.clear();
  taken.clear();
  const double total = sampler_.total_weight();
  if (sampler_.kind() == SelectorKind::prioritized && total > 0.0) {
    // The certain members: weight at least the share of what is left.
    // Each one taken lowers the share of the rest, so look again until a
    // look finds none; the range tree visits only subtrees that reach the
    // bar, so a table with no heavy member costs one look at its root.
    const double exponent = sampler_.exponent();
    double certain_weight = 0.0;
    while (certain.size() < n) {
      double bar = (total - certain_weight) / static_cast<double>(n - certain.size()) * (1.0 - kCertainMargin);
      if (!(bar > 0.0)) break;  // nothing left to weigh: the selector says there are too few
      // The smallest priority that could weigh `bar`, a little low: the
      // weights themselves decide below.
      double floor = exponent == 0.0 ? (bar <= 1.0 ? std::numeric_limits<double>::denorm_min()
                                                   : std::numeric_limits<double>::infinity())
                                     : std::pow(bar, 1.0 / exponent) * (1.0 - 1e-6);
      found.clear();
      range_.at_least(floor, &found);
      size_t before = certain.size();
      for (uint32_t slot : found) {
        if (certain.size() == n) break;
        double w = sampler_.weight(slot);
        if (w >= bar && taken.insert(slot)) {
          certain.push_back(slot);
          certain_weight += w;
        }
      }
      if (certain.size() == before) break;
    }
  }
  picks.resize(n);
  if (Status s = sampler_.sample_distinct(n, certain.data(), static_cast<uint32_t>(certain.size()), rng_, picks.data());
      !s.ok()) {
    if (s.code() != Errc::empty) return s;
    return {Errc::invalid_capacity, "table '" + std::string(h_->name) + "': fewer of its " + std::to_string(h_->size) +
                                        " items have a nonzero priority than a batch of " + std::to_string(n) +
                                        " without repeats needs; sample fewer"};
  }
  return take_distinct(picks.data(), n, out, num_steps);
}

}  // namespace engram
