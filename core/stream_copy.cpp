#include "core/stream_copy.hpp"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "core/segment_header.hpp"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace engram {

void stream_copy(void* dst, const void* src, size_t n) noexcept {
#if defined(__x86_64__)
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  // A partial line written non-temporally goes to memory as a partial
  // write; the ends go through the cache instead.
  size_t head = (kCacheLine - reinterpret_cast<uintptr_t>(d) % kCacheLine) % kCacheLine;
  if (head >= n) {
    std::memcpy(d, s, n);
    return;
  }
  std::memcpy(d, s, head);
  d += head, s += head, n -= head;
  static_assert(kCacheLine == 64, "one line is four 16-byte stores below");
  for (; n >= kCacheLine; d += kCacheLine, s += kCacheLine, n -= kCacheLine) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
    __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
    __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
  }
  std::memcpy(d, s, n);
#else
  std::memcpy(dst, src, n);
#endif
}

void stream_fence() noexcept {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

const void* this_thread_token() noexcept {
  static thread_local char token;
  return &token;
}

bool can_fence_all_threads() noexcept {
  static const bool registered = [] {
    long offered = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    return offered > 0 && (offered & MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE) != 0 &&
           syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0) == 0;
  }();
  return registered;
}

void fence_all_threads() noexcept {
  stream_fence();  // this thread's own, which membarrier does not interrupt
  (void)syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0);
}

}  // namespace engram
