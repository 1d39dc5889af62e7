// A table's signature: the columns every step carries (name, dtype, shape).
// Column is plain data stored in the table's shared header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/codec.hpp"
#include "core/status.hpp"

namespace engram {

enum class DType : uint32_t { u8 = 1, i8, u16, i16, u32, i32, u64, i64, f16, f32, f64, boolean };

inline constexpr size_t kMaxColumns = 32;
inline constexpr size_t kMaxRank = 6;
inline constexpr size_t kMaxColumnName = 32;  // bytes, including the terminating NUL
inline constexpr size_t kMaxStepBytes = size_t{1} << 30;  // of one column's step

struct Column {
  char name[kMaxColumnName];
  uint32_t dtype;  // DType
  uint32_t rank;
  uint32_t shape[kMaxRank];
  uint32_t codec;  // Codec (codec.hpp): how chunks store the column
  int32_t level;   // zstd level; 0 = the default
};
static_assert(sizeof(Column) == 72);

const char* dtype_name(DType t) noexcept;
size_t dtype_size(DType t) noexcept;  // 0 for an unknown dtype

// A column from C++ values; check it with validate_signature.
Column make_column(const std::string& name, DType dtype, std::vector<uint32_t> shape, Codec codec = Codec::none,
                   int32_t level = 0);
// Bytes of one step of the column (product of shape times dtype size).
size_t column_step_bytes(const Column& c) noexcept;
// A fingerprint of names, dtypes, shapes and codecs: two signatures with the
// same hash lay out their chunks identically (chunks carry it; see
// chunk_format.hpp).
uint64_t signature_hash(const Column* cols, size_t n) noexcept;
// Same columns (codecs and levels included), in the same order.
bool same_signature(const Column* a, size_t na, const Column* b, size_t nb) noexcept;
// Names non-empty, NUL-terminated, unique; known dtypes; rank <= kMaxRank;
// dims >= 1; at most kMaxStepBytes per step; known codecs with valid levels.
Status validate_signature(const Column* cols, size_t n);
// True when some column is compressed: chunks then use the packed layout.
bool signature_compressed(const Column* cols, size_t n) noexcept;
// "obs (delta_zstd level 3)" or "obs (uncompressed)", for messages.
std::string column_codec_text(const Column& c);

}  // namespace engram
