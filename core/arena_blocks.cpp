#include "core/arena_blocks.hpp"

#include <string>

#include "core/prefetch.hpp"

namespace engram {

Status ArenaBlocks::validate(const ArenaConfig& c) {
  if (c.classes.empty()) return {Errc::invalid_argument, "arena has no size classes; configure at least one"};
  if (c.classes.size() > kArenaMaxClasses)
    return {Errc::invalid_argument, "arena has " + std::to_string(c.classes.size()) + " size classes; at most " +
                                        std::to_string(kArenaMaxClasses) + " are allowed"};
  uint64_t total = 0, prev = 0;
  for (size_t k = 0; k < c.classes.size(); ++k) {
    const auto& sc = c.classes[k];
    std::string w = "size class " + std::to_string(k) + ": ";
    if (sc.block_size == 0 || sc.block_size % kCacheLine != 0)
      return {Errc::invalid_argument, w + "block size " + std::to_string(sc.block_size) + " must be a positive multiple of 64"};
    if (sc.block_size <= prev)
      return {Errc::invalid_argument, w + "block sizes must be listed in ascending order without repeats"};
    if (sc.count == 0) return {Errc::invalid_argument, w + "block count must be at least 1"};
    prev = sc.block_size;
    total += sc.count;
  }
  if (total >= kArenaMaxBlocks)
    return {Errc::invalid_argument, "arena has " + std::to_string(total) + " blocks; at most 2^30 - 1 are allowed"};
  return Status::Ok();
}

size_t ArenaBlocks::bytes_needed(const ArenaConfig& c) {
  if (!validate(c).ok()) return 0;
  size_t bytes = 0;
  for (const auto& sc : c.classes) bytes += sc.block_size * sc.count;
  return bytes;
}

Result<ArenaBlocks> ArenaBlocks::attach(void* mem, size_t size, const ArenaConfig& c) {
  if (Status s = validate(c); !s.ok()) return Status{Errc::corrupt, "the arena's size classes are invalid: " + s.message()};
  if (reinterpret_cast<uintptr_t>(mem) % kCacheLine != 0)
    return Status{Errc::invalid_argument, "arena memory must be 64-byte aligned"};
  size_t need = bytes_needed(c);
  if (size < need)
    return Status{Errc::corrupt, "the arena's size classes need " + std::to_string(need) + " bytes; the segment has " +
                                     std::to_string(size)};
  ArenaBlocks a;
  a.num_classes_ = static_cast<uint32_t>(c.classes.size());
  a.base_ = static_cast<char*>(mem);
  uint64_t off = 0;
  for (uint32_t k = 0; k < a.num_classes_; ++k) {
    a.classes_[k] = SizeClass{c.classes[k].block_size, off, a.total_blocks_, c.classes[k].count};
    off += c.classes[k].block_size * c.classes[k].count;
    a.total_blocks_ += c.classes[k].count;
  }
  return a;
}

ArenaConfig ArenaBlocks::config() const {
  ArenaConfig c;
  for (uint32_t k = 0; k < num_classes_; ++k) c.classes.push_back({classes_[k].block_size, classes_[k].count});
  return c;
}

uint32_t ArenaBlocks::class_of(uint32_t index) const noexcept {
  uint32_t k = 0;
  while (k + 1 < num_classes_ && index >= classes_[k + 1].first_block) ++k;
  return k;
}

Result<uint32_t> ArenaBlocks::class_for(uint64_t bytes) const {
  for (uint32_t k = 0; k < num_classes_; ++k)
    if (classes_[k].block_size >= bytes) return k;
  return Status{Errc::invalid_argument, "a chunk of " + std::to_string(bytes) + " bytes exceeds the largest block size " +
                                            std::to_string(classes_[num_classes_ - 1].block_size) +
                                            "; configure a larger size class or use a shorter chunk_length"};
}

void ArenaBlocks::prefetch_block(uint32_t index, bool for_write) const noexcept {
  const SizeClass& sc = classes_[class_of(index)];
  const char* d = block_bytes(sc, index);
  uint64_t n = sc.block_size <= kPrefetchWholeBlock ? sc.block_size : kCacheLine;
  for (uint64_t o = 0; o < n; o += kCacheLine) {
    if (for_write) prefetch_for_write(d + o);
    else __builtin_prefetch(d + o, 0);
  }
}

}  // namespace engram
