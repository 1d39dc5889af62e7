// The baseline the K-ary tree is measured against: the classic binary
// segment tree of OpenAI baselines' SegmentTree (capacity rounded up to a
// power of two, leaves at [cap, 2cap), parent = left + right), behind one
// std::mutex as a multi-threaded learner would use it. The lock is taken
// once per batch, the most favourable way for the baseline.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

namespace engram::bench {

class BaselineSumTree {
 public:
  explicit BaselineSumTree(uint32_t capacity) {
    cap_ = 1;
    while (cap_ < capacity) cap_ *= 2;
    tree_.assign(2 * size_t{cap_}, 0.0);
  }
  void assign(const double* w, uint32_t n) {
    std::lock_guard<std::mutex> g(mu_);
    for (uint32_t i = 0; i < n; ++i) tree_[cap_ + i] = w[i];
    for (size_t i = cap_ - 1; i >= 1; --i) tree_[i] = tree_[2 * i] + tree_[2 * i + 1];
  }
  void set_batch(const uint32_t* idx, const double* w, size_t n) {
    std::lock_guard<std::mutex> g(mu_);
    for (size_t q = 0; q < n; ++q) {
      size_t i = cap_ + idx[q];
      tree_[i] = w[q];
      for (i /= 2; i >= 1; i /= 2) tree_[i] = tree_[2 * i] + tree_[2 * i + 1];
    }
  }
  void sample_batch(const double* u, uint32_t* out, size_t n) {
    std::lock_guard<std::mutex> g(mu_);
    const double total = tree_[1];
    for (size_t q = 0; q < n; ++q) {
      double prefix = u[q] * total;
      size_t i = 1;
      while (i < cap_) {
        if (tree_[2 * i] > prefix) {
          i = 2 * i;
        } else {
          prefix -= tree_[2 * i];
          i = 2 * i + 1;
        }
      }
      out[q] = static_cast<uint32_t>(i - cap_);
    }
  }
  double total() const { return tree_[1]; }

 private:
  uint32_t cap_;
  std::vector<double> tree_;
  std::mutex mu_;
};

}  // namespace engram::bench
