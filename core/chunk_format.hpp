// The bytes of one chunk inside an arena block: a header, then each column's
// steps. Two layouts, fixed by the table signature:
//
// plain (no compressed column): column-major, every column 64-aligned at an
// offset that follows from the signature and capacity_steps alone:
//   ChunkHeader | column 0: capacity_steps x step bytes | column 1: ... | ...
//
// packed (some column compressed; flags has kChunkPacked): a directory
// entry per column gives where its bytes lie and how they are encoded:
//   ChunkHeader | ChunkColumn[num_columns] | column 0 bytes | column 1 bytes ...
// A packed chunk is written once, when the writer finalizes it.
//
// Nothing read from a block is trusted: it belongs to a client, which may
// have written anything. A reader copies the header once (check_chunk), and
// re-checks each directory entry it uses (chunk_column_span).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/codec.hpp"
#include "core/signature.hpp"
#include "core/status.hpp"

namespace engram {

inline constexpr uint32_t kChunkMagic = 0x4b4e4843;  // "CHNK"
inline constexpr uint32_t kChunkPacked = 1;          // ChunkHeader::flags
inline constexpr uint32_t kMaxChunkSteps = 1u << 20;  // a writer's chunk_length

struct ChunkHeader {
  uint32_t magic;
  uint32_t num_steps;       // steps written, 1..capacity_steps
  uint32_t capacity_steps;  // steps each column has room for (the writer's chunk_length)
  uint32_t num_columns;
  uint64_t signature_hash;  // signature_hash() of the writer's columns
  uint64_t episode;         // writer-chosen; items never span two
  uint32_t flags;           // kChunkPacked, or 0
  uint8_t reserved_[28];
};
static_assert(sizeof(ChunkHeader) == 64);

// Where one column of a packed chunk lies, from the block start.
struct ChunkColumn {
  uint64_t offset;
  uint64_t stored_bytes;
  uint32_t encoding;  // Encoding
  uint32_t pad_;
};
static_assert(sizeof(ChunkColumn) == 24);

// Plain layout: byte offset of column c's first step.
size_t chunk_column_offset(const Column* cols, uint32_t c, uint32_t capacity_steps) noexcept;
// Bytes a chunk of `capacity_steps` steps needs at most, in the layout the
// signature implies (packed: as if nothing compressed).
size_t chunk_bytes(const Column* cols, uint32_t n, uint32_t capacity_steps) noexcept;
// Packed layout: offset of the first column's bytes (after the directory).
size_t packed_data_offset(uint32_t n) noexcept;

// Copies the header out of `block` (block_size bytes) and checks it against a
// table's columns and an item's slice [offset, offset + length):
// magic, signature, num_steps <= capacity_steps, the layout (and a packed
// chunk's directory) inside the block, and the slice inside num_steps.
// Errc::corrupt otherwise.
Status check_chunk(const void* block, size_t block_size, const Column* cols, uint32_t n, uint64_t sig_hash,
                   uint32_t offset, uint32_t length, ChunkHeader* out) noexcept;
// What ItemSlot::plain_steps records of a chunk whose header passed
// check_chunk: its capacity in steps if it is plain, else 0 (samplers must
// read a packed chunk's directory).
inline uint32_t plain_steps_of(const ChunkHeader& h) noexcept { return h.flags & kChunkPacked ? 0 : h.capacity_steps; }
// The header of a plain chunk of `capacity_steps` whose header someone
// trusted already checked (the owner, at insert), as far as spans need it:
// num_steps is the slice's end, which the steps written reach at least.
// Checks the same bounds as check_chunk without reading the block.
Status plain_chunk_header(size_t block_size, const Column* cols, uint32_t n, uint64_t sig_hash, uint32_t capacity_steps,
                          uint32_t offset, uint32_t length, ChunkHeader* out) noexcept;

// A plain chunk's layout for one capacity, worked out once for the many
// items a reader copies from one writer's chunks, instead of per item and
// column (chunk_column_offset walks the columns before c each time):
// column c's steps start at offset[c] and take step[c] bytes each; `bytes`
// is chunk_bytes() of that capacity.
struct PlainLayout {
  uint32_t capacity_steps = 0;  // 0: none worked out yet
  uint32_t num_columns = 0;
  size_t bytes = 0;
  size_t offset[kMaxColumns] = {};
  size_t step[kMaxColumns] = {};
};
// n <= kMaxColumns (a signature's bound). Any capacity: a layout of more
// than kMaxChunkSteps steps is refused by check_plain_slice before use.
void plain_layout(const Column* cols, uint32_t n, uint32_t capacity_steps, PlainLayout* out) noexcept;
// plain_chunk_header's bounds, against a layout worked out already: the
// layout within the block, the slice [offset, +length) within the capacity.
Status check_plain_slice(const PlainLayout& l, size_t block_size, uint32_t offset, uint32_t length) noexcept;

// Where column c of a chunk whose header `h` passed check_chunk lies.
struct ColumnSpan {
  uint64_t offset;  // from the block start
  uint64_t bytes;   // stored
  Encoding encoding;
};
Status chunk_column_span(const void* block, size_t block_size, const ChunkHeader& h, const Column* cols, uint32_t c,
                         ColumnSpan* out) noexcept;

// A sealed chunk's bytes as another machine receives them (remote/):
// checked as check_chunk checks it, then its header, a packed chunk's
// directory (as read and checked), and each column's stored steps where the
// layout puts them; every other byte zero, for a block's unused room holds
// older data of any table, which must not leave the machine. Appends to
// *out: a plain chunk's chunk_bytes(), a packed one's up to its last
// column's end. The writer may scribble meanwhile: the header is read once,
// and what is copied is what was checked.
Status copy_sealed_chunk(const void* block, size_t block_size, const Column* cols, uint32_t n, uint64_t sig_hash,
                         std::string* out);

// Bytes of the chunk's steps before (raw) and after (stored) compression,
// directory and padding left out; for a plain chunk they are equal.
Status chunk_sizes(const void* block, size_t block_size, const ChunkHeader& h, const Column* cols, uint64_t* raw,
                   uint64_t* stored) noexcept;

}  // namespace engram
