// The bytes of one chunk inside an arena block: a header, then each column's
// steps, column-major, every column 64-aligned:
//
//   ChunkHeader | column 0: capacity_steps x step bytes | column 1: ... | ...
//
// Column offsets follow from the table signature and capacity_steps alone,
// so nothing but the header is stored, and nothing read from it is trusted:
// the block belongs to a client, which may have written anything. A reader
// copies the header once (check_chunk) and bounds every access with it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/signature.hpp"
#include "core/status.hpp"

namespace engram {

inline constexpr uint32_t kChunkMagic = 0x4b4e4843;  // "CHNK"

struct ChunkHeader {
  uint32_t magic;
  uint32_t num_steps;       // steps written, 1..capacity_steps
  uint32_t capacity_steps;  // steps each column has room for (the writer's chunk_length)
  uint32_t num_columns;
  uint64_t signature_hash;  // signature_hash() of the writer's columns
  uint64_t episode;         // writer-chosen; items never span two
  uint8_t reserved_[32];
};
static_assert(sizeof(ChunkHeader) == 64);

// Byte offset of column c's first step for `capacity_steps` steps per column.
size_t chunk_column_offset(const Column* cols, uint32_t c, uint32_t capacity_steps) noexcept;
// Bytes a chunk of `capacity_steps` steps needs in total.
size_t chunk_bytes(const Column* cols, uint32_t n, uint32_t capacity_steps) noexcept;

// Copies the header out of `block` (block_size bytes) and checks it against a
// table's columns and an item's slice [offset, offset + length):
// magic, signature, num_steps <= capacity_steps, the whole layout inside the
// block, and the slice inside num_steps. Errc::corrupt otherwise.
Status check_chunk(const void* block, size_t block_size, const Column* cols, uint32_t n, uint64_t sig_hash,
                   uint32_t offset, uint32_t length, ChunkHeader* out) noexcept;

}  // namespace engram
