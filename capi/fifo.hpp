// A first-in first-out queue that keeps its storage: a vector and the
// index of its front. The client's per-request queues (a table's owed
// answers, a writer's pending items and chunks) take an entry per item and
// give it back soon after. std::deque allocated and freed a node every few
// entries there, about a point of an Ape-X actor's CPU (bench/NOTES.md,
// "Ape-X: time in engram calls"); this allocates only while it grows.
//
// The live entries are buf_[head_, buf_.size()). Popping moves head_; the
// dead prefix is dropped when the queue empties (the usual case) or, so
// that a queue that never empties cannot grow without bound, once it is
// longer than the live part. Amortized O(1) per operation; pointers and
// iterators are invalidated by any push or pop.
#pragma once

#include <cstddef>
#include <vector>

namespace engram {

template <typename T>
class Fifo {
 public:
  using iterator = typename std::vector<T>::iterator;
  using const_iterator = typename std::vector<T>::const_iterator;

  bool empty() const noexcept { return head_ == buf_.size(); }
  size_t size() const noexcept { return buf_.size() - head_; }
  size_t capacity() const noexcept { return buf_.capacity(); }  // entries stored without allocating
  T& front() { return buf_[head_]; }
  const T& front() const { return buf_[head_]; }
  T& operator[](size_t i) { return buf_[head_ + i]; }
  const T& operator[](size_t i) const { return buf_[head_ + i]; }
  iterator begin() { return buf_.begin() + static_cast<ptrdiff_t>(head_); }
  iterator end() { return buf_.end(); }
  const_iterator begin() const { return buf_.begin() + static_cast<ptrdiff_t>(head_); }
  const_iterator end() const { return buf_.end(); }

  void push_back(const T& v) {
    compact();
    buf_.push_back(v);
  }
  template <typename It>
  void append(It first, It last) {
    compact();
    buf_.insert(buf_.end(), first, last);
  }
  void pop_front() {
    if (++head_ == buf_.size()) clear();
  }
  void clear() noexcept {
    buf_.clear();
    head_ = 0;
  }

 private:
  // Before a push: drops the dead prefix once it outweighs the live part.
  void compact() {
    if (head_ == 0 || head_ < size()) return;
    buf_.erase(buf_.begin(), buf_.begin() + static_cast<ptrdiff_t>(head_));
    head_ = 0;
  }

  std::vector<T> buf_;
  size_t head_ = 0;
};

}  // namespace engram
