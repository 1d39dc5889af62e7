// Copying bytes into memory that nobody will read soon, past the caches.
//
// A plain store to a line that is not in this core's cache first reads the
// line from memory (read-for-ownership), so a writer copying into a cold
// chunk block waits on as many reads as lines it writes; the hardware
// prefetchers hide that only for addresses in ascending order, which
// recycled blocks are not. Non-temporal stores write whole lines without
// reading them. They are weakly ordered: stream_fence() must run after the
// last one and before any store that publishes the bytes to another thread
// or process (a ring record naming the chunk).
#pragma once

#include <cstddef>

namespace engram {

// Copies n bytes from src to dst (no overlap). The whole cache lines inside
// dst are written with non-temporal stores where the CPU has them (x86-64:
// SSE2, always), the partial lines at either end with plain stores. src
// needs no alignment.
void stream_copy(void* dst, const void* src, size_t n) noexcept;

// Orders every earlier stream_copy before every later store (sfence).
void stream_fence() noexcept;

}  // namespace engram
