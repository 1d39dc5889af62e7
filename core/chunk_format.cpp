#include "core/chunk_format.hpp"

#include <cstring>
#include <string>

#include "core/segment_header.hpp"

namespace engram {

size_t chunk_column_offset(const Column* cols, uint32_t c, uint32_t capacity_steps) noexcept {
  size_t off = sizeof(ChunkHeader);
  for (uint32_t j = 0; j < c; ++j) off += align_up(column_step_bytes(cols[j]) * capacity_steps, kCacheLine);
  return off;
}

size_t chunk_bytes(const Column* cols, uint32_t n, uint32_t capacity_steps) noexcept {
  return chunk_column_offset(cols, n, capacity_steps);
}

Status check_chunk(const void* block, size_t block_size, const Column* cols, uint32_t n, uint64_t sig_hash,
                   uint32_t offset, uint32_t length, ChunkHeader* out) noexcept {
  if (block_size < sizeof(ChunkHeader)) return {Errc::corrupt, "chunk block smaller than a chunk header"};
  std::memcpy(out, block, sizeof(ChunkHeader));  // one copy: the client may keep writing
  if (out->magic != kChunkMagic) return {Errc::corrupt, "chunk header has a bad magic number"};
  if (out->num_columns != n || out->signature_hash != sig_hash)
    return {Errc::corrupt, "chunk was written with another signature than the table's"};
  if (out->num_steps == 0 || out->num_steps > out->capacity_steps)
    return {Errc::corrupt, "chunk header says " + std::to_string(out->num_steps) + " steps of room for " +
                               std::to_string(out->capacity_steps)};
  // Guard the multiplication in chunk_bytes against absurd capacities.
  if (out->capacity_steps > block_size || chunk_bytes(cols, n, out->capacity_steps) > block_size)
    return {Errc::corrupt, "chunk layout for " + std::to_string(out->capacity_steps) + " steps exceeds its block of " +
                               std::to_string(block_size) + " bytes"};
  if (length == 0 || offset >= out->num_steps || length > out->num_steps - offset)
    return {Errc::corrupt, "item slice [" + std::to_string(offset) + ", +" + std::to_string(length) +
                               ") lies outside the chunk's " + std::to_string(out->num_steps) + " steps"};
  return Status::Ok();
}

}  // namespace engram
