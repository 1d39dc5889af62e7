// The level lengths of an implicit K-ary tree (the sum tree, the priority
// range): the leaves, padded to a multiple of K, then each level above
// holding one node per K below, padded to a multiple of K so that a group
// of siblings never straddles two parents, up to the root alone.
#pragma once

#include <cstdint>

#include "core/segment_header.hpp"

namespace engram {

// Writes the lengths into len[], root first, and returns the number of
// levels: at least 2 (a root over one group of leaves) for leaves >= 1.
// `max_levels` bounds len[]; a tree over at most 2^32 leaves with K >= 2
// has at most 33 levels.
inline uint32_t kary_level_lengths(uint64_t leaves, uint64_t k, uint64_t* len, uint32_t max_levels) {
  uint64_t up[64];
  uint32_t n = 0;
  uint64_t count = align_up(leaves, k);
  up[n++] = count;
  while (count > 1 && n < 64) {
    uint64_t groups = count / k;
    count = groups == 1 ? 1 : align_up(groups, k);
    up[n++] = count;
  }
  for (uint32_t l = 0; l < n && l < max_levels; ++l) len[l] = up[n - 1 - l];
  return n;
}

}  // namespace engram
