// Every shared segment starts with a SegmentHeader. The version word is
// written last (release) and read first (acquire), so it doubles as the
// "initialised" flag: a reader that sees the right version also sees every
// byte the formatter wrote before it. The layout hash folds in the size and
// alignment of every shared struct, so a client compiled against another
// layout is refused even when someone forgot to bump the version.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "core/fnv.hpp"
#include "core/status.hpp"

namespace engram {

// Bumped on every incompatible change of any shared-memory layout.
inline constexpr uint32_t kLayoutVersion = 7;
inline constexpr uint64_t kSegmentMagic = 0x4d41524745'4e45ULL;  // "ENGRAM" little-endian
inline constexpr size_t kCacheLine = 64;
// How many elements ahead a loop over scattered memory prefetches: enough
// to overlap the misses, few enough for the core's outstanding-miss slots
// (prefetching a whole batch up front drops most of it).
inline constexpr size_t kPrefetchAhead = 8;

// Selectors and sum trees live inside a table's region, under its header.
enum class SegmentKind : uint32_t { arena = 1, ring = 2, channel = 3, bells = 4, table = 5, demo = 100 };

struct alignas(kCacheLine) SegmentHeader {
  uint64_t magic;
  uint64_t layout_hash;
  uint64_t total_size;  // bytes of the whole segment, header included
  uint32_t kind;        // SegmentKind
  std::atomic<uint32_t> version;  // 0 until fully formatted; kLayoutVersion after
};
static_assert(sizeof(SegmentHeader) == kCacheLine);
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

// FNV-1a over (sizeof, alignof) pairs and a tag: a compile-time fingerprint.
struct LayoutItem {
  uint64_t size;
  uint64_t align;
};
constexpr uint64_t layout_hash(uint64_t tag, std::initializer_list<LayoutItem> items) {
  uint64_t h = fnv1a_u64(kFnvOffset ^ tag, kLayoutVersion);
  for (const auto& it : items) h = fnv1a_u64(fnv1a_u64(h, it.size), it.align);
  return h;
}
template <typename T>
constexpr LayoutItem layout_of() {
  return {sizeof(T), alignof(T)};
}

// Writes every field except the version. Call publish() after the body.
void segment_begin_format(SegmentHeader* h, SegmentKind kind, uint64_t hash, uint64_t total_size);
void segment_publish(SegmentHeader* h);
// Checks magic, version, hash, kind and size; the message names both versions.
Status segment_check(const SegmentHeader* h, SegmentKind kind, uint64_t hash, uint64_t mapped_size);

inline constexpr size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

}  // namespace engram
