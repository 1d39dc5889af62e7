// The MaxHeap and MinHeap selectors' order: a binary heap of slots over
// the selector region's arrays (heap: the slots in heap order; pos: each
// slot's index in heap, kNone for a non-member; prio and seq: per slot)
// and the header's count word. Lives in caller-owned (shared) memory.
//
// Ordered by (priority, seq): the larger priority first for a max-heap,
// the smaller for a min-heap; between equal priorities the smaller seq
// (the member inserted or updated longest ago) first. The caller hands out
// seq (the header's counter) so that a checkpoint can save and restore it.
//
// Cost: insert, update, erase O(log N); top O(1); best(n) O(n log n).
#pragma once

#include <algorithm>
#include <cstdint>
#include <queue>
#include <utility>
#include <vector>

namespace engram {

struct PriorityHeap {
  static constexpr uint32_t kNone = UINT32_MAX;
  uint32_t* heap;
  uint32_t* pos;
  double* prio;
  uint64_t* seq;
  uint32_t* count;
  bool max;

  bool contains(uint32_t s) const noexcept { return pos[s] != kNone; }
  uint32_t top() const noexcept { return heap[0]; }
  // Adds a non-member.
  void insert(uint32_t s, double priority, uint64_t age) noexcept {
    uint32_t i = (*count)++;
    heap[i] = s;
    pos[s] = i;
    prio[s] = priority;
    seq[s] = age;
    up(i);
  }
  // A member's new priority and age (an update, or a restored age).
  void set(uint32_t s, double priority, uint64_t age) noexcept {
    prio[s] = priority;
    seq[s] = age;
    fix(pos[s]);
  }
  // Removes a member.
  void erase(uint32_t s) noexcept {
    uint32_t i = pos[s], last = --*count;
    if (i != last) {
      swap(i, last);
      pos[s] = kNone;
      fix(i);
    } else {
      pos[s] = kNone;
    }
  }
  // The n (<= count) best members, best first, without changing the heap:
  // the next in heap order is the best child of one already taken.
  template <typename F>
  void best(uint32_t n, F&& each) const {
    auto after = [&](uint32_t a, uint32_t b) { return before(heap[b], heap[a]); };
    std::priority_queue<uint32_t, std::vector<uint32_t>, decltype(after)> frontier(after);
    frontier.push(0);
    for (uint32_t k = 0; k < n; ++k) {
      uint32_t i = frontier.top();
      frontier.pop();
      each(heap[i]);
      for (uint32_t c : {2 * i + 1, 2 * i + 2})
        if (c < *count) frontier.push(c);
    }
  }
  void clear(uint32_t capacity) noexcept {
    std::fill(pos, pos + capacity, kNone);
    *count = 0;
  }

 private:
  bool before(uint32_t a, uint32_t b) const noexcept {
    double pa = prio[a], pb = prio[b];
    if (pa != pb) return max ? pa > pb : pa < pb;
    return seq[a] < seq[b];
  }
  void swap(uint32_t i, uint32_t j) noexcept {
    std::swap(heap[i], heap[j]);
    pos[heap[i]] = i;
    pos[heap[j]] = j;
  }
  void up(uint32_t i) noexcept {
    while (i > 0) {
      uint32_t p = (i - 1) / 2;
      if (!before(heap[i], heap[p])) break;
      swap(i, p);
      i = p;
    }
  }
  void down(uint32_t i) noexcept {
    uint32_t n = *count;
    for (;;) {
      uint32_t b = i, l = 2 * i + 1, r = l + 1;
      if (l < n && before(heap[l], heap[b])) b = l;
      if (r < n && before(heap[r], heap[b])) b = r;
      if (b == i) return;
      swap(i, b);
      i = b;
    }
  }
  void fix(uint32_t i) noexcept {
    up(i);
    down(i);
  }
};

}  // namespace engram
