#include "core/chunk_format.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/segment_header.hpp"

namespace engram {

size_t chunk_column_offset(const Column* cols, uint32_t c, uint32_t capacity_steps) noexcept {
  size_t off = sizeof(ChunkHeader);
  for (uint32_t j = 0; j < c; ++j) off += align_up(column_step_bytes(cols[j]) * capacity_steps, kCacheLine);
  return off;
}

void plain_layout(const Column* cols, uint32_t n, uint32_t capacity_steps, PlainLayout* out) noexcept {
  out->capacity_steps = capacity_steps;
  out->num_columns = n;
  for (uint32_t c = 0; c < n; ++c) {  // O(n^2), once per layout
    out->offset[c] = chunk_column_offset(cols, c, capacity_steps);
    out->step[c] = column_step_bytes(cols[c]);
  }
  out->bytes = chunk_column_offset(cols, n, capacity_steps);
}

size_t packed_data_offset(uint32_t n) noexcept { return align_up(sizeof(ChunkHeader) + n * sizeof(ChunkColumn), kCacheLine); }

size_t chunk_bytes(const Column* cols, uint32_t n, uint32_t capacity_steps) noexcept {
  size_t plain = chunk_column_offset(cols, n, capacity_steps);
  if (!signature_compressed(cols, n)) return plain;
  return plain - sizeof(ChunkHeader) + packed_data_offset(n);
}

namespace {

// A packed chunk's directory entry for column c, checked against the block.
Status read_entry(const void* block, size_t block_size, const ChunkHeader& h, const Column* cols, uint32_t c,
                  ColumnSpan* out) noexcept {
  ChunkColumn e;
  std::memcpy(&e, static_cast<const char*>(block) + sizeof(ChunkHeader) + c * sizeof(ChunkColumn), sizeof e);
  std::string where = "chunk column " + std::to_string(c);
  if (e.offset < packed_data_offset(h.num_columns) || e.offset > block_size || e.stored_bytes > block_size - e.offset)
    return {Errc::corrupt, where + " lies outside its block of " + std::to_string(block_size) + " bytes"};
  uint64_t raw = uint64_t{h.num_steps} * column_step_bytes(cols[c]);
  if (e.encoding == static_cast<uint32_t>(Encoding::raw)) {
    if (e.stored_bytes != raw)
      return {Errc::corrupt, where + " is stored raw in " + std::to_string(e.stored_bytes) + " bytes instead of " +
                                 std::to_string(raw)};
  } else if (e.encoding != cols[c].codec || cols[c].codec == static_cast<uint32_t>(Codec::none)) {
    return {Errc::corrupt, where + " has encoding " + std::to_string(e.encoding) + ", which its codec " +
                               codec_name(static_cast<Codec>(cols[c].codec)) + " never writes"};
  } else if (e.stored_bytes == 0 || e.stored_bytes >= raw) {
    return {Errc::corrupt, where + " claims a compressed size of " + std::to_string(e.stored_bytes) + " for " +
                               std::to_string(raw) + " raw bytes"};
  }
  *out = {e.offset, e.stored_bytes, static_cast<Encoding>(e.encoding)};
  return Status::Ok();
}

// A plain chunk fills its layout; a packed one may sit in a smaller block
// (the writer moves it), so only its directory is bounded here. Either way
// capacity is bounded first, so no size computation overflows
// (validate_signature bounds step bytes).
// Callers work `needed` out only for a capacity of at most kMaxChunkSteps
// (check_layout tests that first), so that it cannot have overflowed.
Status check_fits(size_t needed, size_t block_size, uint32_t capacity_steps) {
  if (capacity_steps > kMaxChunkSteps || needed > block_size)
    return {Errc::corrupt, "chunk layout for " + std::to_string(capacity_steps) + " steps exceeds its block of " +
                               std::to_string(block_size) + " bytes"};
  return Status::Ok();
}

Status check_layout(size_t block_size, const Column* cols, uint32_t n, uint32_t capacity_steps, bool packed) {
  if (capacity_steps > kMaxChunkSteps) return check_fits(0, block_size, capacity_steps);
  return check_fits(packed ? packed_data_offset(n) : chunk_bytes(cols, n, capacity_steps), block_size, capacity_steps);
}

Status check_slice(uint32_t offset, uint32_t length, uint32_t num_steps) {
  if (length == 0 || offset >= num_steps || length > num_steps - offset)
    return {Errc::corrupt, "item slice [" + std::to_string(offset) + ", +" + std::to_string(length) +
                               ") lies outside the chunk's " + std::to_string(num_steps) + " steps"};
  return Status::Ok();
}

}  // namespace

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
  bool packed = signature_compressed(cols, n);
  if (Status s = check_layout(block_size, cols, n, out->capacity_steps, packed); !s.ok()) return s;
  if (out->flags != (packed ? kChunkPacked : 0u))
    return {Errc::corrupt, std::string("chunk flags say ") + (out->flags & kChunkPacked ? "packed" : "plain") +
                               " but the signature implies the other layout"};
  if (packed) {
    ColumnSpan unused;
    for (uint32_t c = 0; c < n; ++c)
      if (Status s = read_entry(block, block_size, *out, cols, c, &unused); !s.ok()) return s;
  }
  return check_slice(offset, length, out->num_steps);
}

Status plain_chunk_header(size_t block_size, const Column* cols, uint32_t n, uint64_t sig_hash, uint32_t capacity_steps,
                          uint32_t offset, uint32_t length, ChunkHeader* out) noexcept {
  if (Status s = check_layout(block_size, cols, n, capacity_steps, /*packed=*/false); !s.ok()) return s;
  if (Status s = check_slice(offset, length, capacity_steps); !s.ok()) return s;
  *out = {kChunkMagic, offset + length, capacity_steps, n, sig_hash, 0, 0, {}};
  return Status::Ok();
}

Status check_plain_slice(const PlainLayout& l, size_t block_size, uint32_t offset, uint32_t length) noexcept {
  if (Status s = check_fits(l.bytes, block_size, l.capacity_steps); !s.ok()) return s;
  return check_slice(offset, length, l.capacity_steps);
}

Status chunk_column_span(const void* block, size_t block_size, const ChunkHeader& h, const Column* cols, uint32_t c,
                         ColumnSpan* out) noexcept {
  if (h.flags & kChunkPacked) return read_entry(block, block_size, h, cols, c, out);
  *out = {chunk_column_offset(cols, c, h.capacity_steps), uint64_t{h.num_steps} * column_step_bytes(cols[c]),
          Encoding::raw};
  return Status::Ok();
}

Status copy_sealed_chunk(const void* block, size_t block_size, const Column* cols, uint32_t n, uint64_t sig_hash,
                         std::string* out) {
  ChunkHeader h;
  if (Status s = check_chunk(block, block_size, cols, n, sig_hash, 0, 1, &h); !s.ok()) return s;
  bool packed = h.flags & kChunkPacked;
  ColumnSpan spans[kMaxColumns];
  size_t end = packed ? packed_data_offset(n) : chunk_bytes(cols, n, h.capacity_steps);
  for (uint32_t c = 0; c < n; ++c) {
    if (Status s = chunk_column_span(block, block_size, h, cols, c, &spans[c]); !s.ok()) return s;
    end = std::max<size_t>(end, spans[c].offset + spans[c].bytes);
  }
  size_t base = out->size();
  out->resize(base + end, '\0');
  char* dst = out->data() + base;
  std::memcpy(dst, &h, sizeof h);
  const char* src = static_cast<const char*>(block);
  for (uint32_t c = 0; c < n; ++c) {
    if (packed) {
      ChunkColumn e{spans[c].offset, spans[c].bytes, static_cast<uint32_t>(spans[c].encoding), 0};
      std::memcpy(dst + sizeof h + c * sizeof e, &e, sizeof e);
    }
    std::memcpy(dst + spans[c].offset, src + spans[c].offset, spans[c].bytes);
  }
  return Status::Ok();
}

Status chunk_sizes(const void* block, size_t block_size, const ChunkHeader& h, const Column* cols, uint64_t* raw,
                   uint64_t* stored) noexcept {
  *raw = *stored = 0;
  for (uint32_t c = 0; c < h.num_columns; ++c) {
    ColumnSpan span;
    if (Status s = chunk_column_span(block, block_size, h, cols, c, &span); !s.ok()) return s;
    *raw += uint64_t{h.num_steps} * column_step_bytes(cols[c]);
    *stored += span.bytes;
  }
  return Status::Ok();
}

}  // namespace engram
