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

// Orders every earlier stream_copy of this thread before every later store
// of this thread (sfence).
void stream_fence() noexcept;

// The calling thread, as a token: an address unique while the thread lives.
const void* this_thread_token() noexcept;

// Bytes streamed by one thread and published by another (a handle passed
// between threads between two calls) need more than stream_fence(), which
// orders only the caller's own stores. fence_all_threads() has every
// thread of this process that is running execute a core-serializing
// instruction, which drains its write-combining buffers (membarrier(2),
// MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE); a thread that is not running
// drained them on its way off its CPU (the kernel's entry and the
// scheduler's locked instructions). About a microsecond here.
// can_fence_all_threads() registers the process for it on its first call
// and says whether the kernel offers it (Linux 4.16 on, where seccomp
// allows membarrier); fence_all_threads() may be called only after it
// returned true.
bool can_fence_all_threads() noexcept;
void fence_all_threads() noexcept;

}  // namespace engram
