#include "core/segment_header.hpp"

#include <string>

namespace engram {

void segment_begin_format(SegmentHeader* h, SegmentKind kind, uint64_t hash, uint64_t total_size) {
  h->version.store(0, std::memory_order_relaxed);
  h->magic = kSegmentMagic;
  h->layout_hash = hash;
  h->total_size = total_size;
  h->kind = static_cast<uint32_t>(kind);
}

void segment_publish(SegmentHeader* h) { h->version.store(kLayoutVersion, std::memory_order_release); }

Status segment_check(const SegmentHeader* h, SegmentKind kind, uint64_t hash, uint64_t mapped_size) {
  if (mapped_size < sizeof(SegmentHeader))
    return {Errc::corrupt, "segment of " + std::to_string(mapped_size) + " bytes is smaller than its header"};
  uint32_t v = h->version.load(std::memory_order_acquire);
  if (v == 0) return {Errc::corrupt, "segment is not initialised yet (its creator has not finished formatting it)"};
  if (h->magic != kSegmentMagic) return {Errc::corrupt, "segment does not start with the engram magic number"};
  if (v != kLayoutVersion || h->layout_hash != hash)
    return {Errc::layout_mismatch, "segment has layout version " + std::to_string(v) + " (hash " +
                                       std::to_string(h->layout_hash) + ") but this build expects version " +
                                       std::to_string(kLayoutVersion) + " (hash " + std::to_string(hash) +
                                       "); rebuild the client against the daemon's engram version"};
  if (h->kind != static_cast<uint32_t>(kind))
    return {Errc::corrupt, "segment kind " + std::to_string(h->kind) + " is not the expected kind " +
                               std::to_string(static_cast<uint32_t>(kind))};
  if (h->total_size > mapped_size)
    return {Errc::corrupt, "segment header claims " + std::to_string(h->total_size) + " bytes but only " +
                               std::to_string(mapped_size) + " are mapped"};
  return Status::Ok();
}

}  // namespace engram
