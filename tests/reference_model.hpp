// The reference rule for the deterministic selectors, by linear scan, shared
// by the selector and table models. Members need fields inserted (insertion
// order), touched (order of last insert or update) and priority.
#pragma once

#include "core/selector.hpp"

namespace engram::test {

// The member FIFO / LIFO / MaxHeap / MinHeap must pick from [begin, end) (non-empty).
template <typename It>
It deterministic_pick(SelectorKind k, It begin, It end) {
  It best = begin;
  for (It it = begin; it != end; ++it) {
    bool better = false;
    switch (k) {
      case SelectorKind::fifo: better = it->inserted < best->inserted; break;
      case SelectorKind::lifo: better = it->inserted > best->inserted; break;
      case SelectorKind::max_heap:
        better = it->priority > best->priority || (it->priority == best->priority && it->touched < best->touched);
        break;
      case SelectorKind::min_heap:
        better = it->priority < best->priority || (it->priority == best->priority && it->touched < best->touched);
        break;
      default: break;
    }
    if (better) best = it;
  }
  return best;
}

}  // namespace engram::test
