// The FIFO and LIFO selectors' order: a doubly linked list of slots in
// insertion order over two u32 arrays of capacity (next, prev) and the
// head, tail and count words of the selector's header. Lives in
// caller-owned (shared) memory; O(1) for every operation.
//
// Invariants: head is the oldest member and tail the newest (kNone when
// empty); prev[head] and next[tail] are kNone, so a member is a slot with
// prev[slot] != kNone or slot == head; a non-member has both kNone.
#pragma once

#include <algorithm>
#include <cstdint>

namespace engram {

struct OrderList {
  static constexpr uint32_t kNone = UINT32_MAX;
  uint32_t* next;
  uint32_t* prev;
  uint32_t* head;
  uint32_t* tail;
  uint32_t* count;

  bool contains(uint32_t s) const noexcept { return prev[s] != kNone || *head == s; }
  // Appends a non-member as the newest.
  void push_newest(uint32_t s) noexcept {
    next[s] = kNone;
    prev[s] = *tail;
    if (*tail != kNone) next[*tail] = s;
    else *head = s;
    *tail = s;
    ++*count;
  }
  // Puts a non-member back as the oldest (a refused sample's FIFO member).
  void push_oldest(uint32_t s) noexcept {
    next[s] = *head;
    prev[s] = kNone;
    if (*head != kNone) prev[*head] = s;
    else *tail = s;
    *head = s;
    ++*count;
  }
  // Unlinks a member.
  void erase(uint32_t s) noexcept {
    uint32_t n = next[s], p = prev[s];
    if (p != kNone) next[p] = n;
    else *head = n;
    if (n != kNone) prev[n] = p;
    else *tail = p;
    next[s] = prev[s] = kNone;
    --*count;
  }
  void clear(uint32_t capacity) noexcept {
    std::fill(next, next + capacity, kNone);
    std::fill(prev, prev + capacity, kNone);
    *head = *tail = kNone;
    *count = 0;
  }
};

}  // namespace engram
