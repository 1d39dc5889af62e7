// stream_copy must copy exactly what memcpy copies, whatever the alignment
// of either side and however the length splits into partial and whole
// cache lines, and touch nothing outside the destination range.
#include "core/stream_copy.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

using engram::stream_copy;
using engram::stream_fence;

TEST(StreamCopy, CopiesEveryAlignmentAndLengthExactly) {
  std::vector<unsigned char> src(8192 + 128), dst(8192 + 256);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  auto* d0 = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(dst.data()) + 63) / 64 * 64);
  auto* s0 = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(src.data()) + 63) / 64 * 64);
  for (size_t dst_off : {0, 1, 16, 48, 63})
    for (size_t src_off : {0, 5, 16, 32})
      for (size_t n : {0, 1, 15, 63, 64, 65, 127, 128, 200, 1024, 4000, 4096, 8000}) {
        std::fill(dst.begin(), dst.end(), 0xEE);
        stream_copy(d0 + dst_off, s0 + src_off, n);
        stream_fence();
        for (unsigned char* p = dst.data(); p < dst.data() + dst.size(); ++p) {
          size_t at = static_cast<size_t>(p - (d0 + dst_off));
          bool inside = p >= d0 + dst_off && at < n;
          ASSERT_EQ(*p, inside ? s0[src_off + at] : 0xEE)
              << "byte " << (p - dst.data()) << " with dst_off " << dst_off << " src_off " << src_off << " n " << n;
        }
      }
}
