#include "core/signature.hpp"

#include <algorithm>
#include <cstring>

#include "core/fnv.hpp"
#include "core/name.hpp"

namespace engram {

const char* dtype_name(DType t) noexcept {
  switch (t) {
    case DType::u8: return "uint8";
    case DType::i8: return "int8";
    case DType::u16: return "uint16";
    case DType::i16: return "int16";
    case DType::u32: return "uint32";
    case DType::i32: return "int32";
    case DType::u64: return "uint64";
    case DType::i64: return "int64";
    case DType::f16: return "float16";
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::boolean: return "bool";
  }
  return "unknown";
}

size_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::u8:
    case DType::i8:
    case DType::boolean: return 1;
    case DType::u16:
    case DType::i16:
    case DType::f16: return 2;
    case DType::u32:
    case DType::i32:
    case DType::f32: return 4;
    case DType::u64:
    case DType::i64:
    case DType::f64: return 8;
  }
  return 0;
}

Column make_column(const std::string& name, DType dtype, std::vector<uint32_t> shape, Codec codec, int32_t level) {
  Column c{};
  std::strncpy(c.name, name.c_str(), kMaxColumnName - 1);
  if (name.size() >= kMaxColumnName) c.name[kMaxColumnName - 1] = 1;  // flagged as too long by validate
  c.dtype = static_cast<uint32_t>(dtype);
  c.rank = static_cast<uint32_t>(shape.size());
  for (size_t i = 0; i < shape.size() && i < kMaxRank; ++i) c.shape[i] = shape[i];
  c.codec = static_cast<uint32_t>(codec);
  // One spelling per level, so that "default" and "3" compare equal.
  c.level = codec == Codec::none ? level : effective_level(level);
  return c;
}

size_t column_step_bytes(const Column& c) noexcept {
  size_t n = dtype_size(static_cast<DType>(c.dtype));
  for (uint32_t i = 0; i < c.rank && i < kMaxRank; ++i) n *= c.shape[i];
  return n;
}

uint64_t signature_hash(const Column* cols, size_t n) noexcept {
  uint64_t h = fnv1a(kFnvOffset, &n, sizeof n);
  for (size_t i = 0; i < n; ++i) {
    h = fnv1a(h, cols[i].name, strnlen(cols[i].name, kMaxColumnName));
    h = fnv1a(h, &cols[i].dtype, sizeof cols[i].dtype);
    h = fnv1a(h, &cols[i].rank, sizeof cols[i].rank);
    h = fnv1a(h, cols[i].shape, sizeof(uint32_t) * std::min<size_t>(cols[i].rank, kMaxRank));
    // Chunk headers carry this hash, so an uncompressed signature keeps the
    // value that builds before codecs computed for it.
    if (cols[i].codec != 0 || cols[i].level != 0) {
      h = fnv1a(h, &cols[i].codec, sizeof cols[i].codec);
      h = fnv1a(h, &cols[i].level, sizeof cols[i].level);
    }
  }
  return h;
}

bool same_signature(const Column* a, size_t na, const Column* b, size_t nb) noexcept {
  if (na != nb) return false;
  for (size_t i = 0; i < na; ++i) {
    if (strncmp(a[i].name, b[i].name, kMaxColumnName) != 0 || a[i].dtype != b[i].dtype || a[i].rank != b[i].rank ||
        a[i].codec != b[i].codec || a[i].level != b[i].level)
      return false;
    for (uint32_t d = 0; d < std::min<uint32_t>(a[i].rank, kMaxRank); ++d)
      if (a[i].shape[d] != b[i].shape[d]) return false;
  }
  return true;
}

Status validate_signature(const Column* cols, size_t n) {
  if (n == 0) return {Errc::invalid_argument, "signature has no columns; give at least one"};
  if (n > kMaxColumns)
    return {Errc::invalid_argument, "signature has " + std::to_string(n) + " columns; at most " + std::to_string(kMaxColumns) + " are allowed"};
  for (size_t i = 0; i < n; ++i) {
    const Column& c = cols[i];
    size_t len = strnlen(c.name, kMaxColumnName);
    std::string where = "column " + std::to_string(i);
    if (len == kMaxColumnName)  // no NUL in the array
      return {Errc::invalid_argument, where + " has a name longer than " + std::to_string(kMaxColumnName - 1) + " bytes"};
    if (Status s = validate_name({c.name, len}, kMaxColumnName - 1, (where + "'s name").c_str()); !s.ok()) return s;
    where += " '" + std::string(c.name, len) + "'";
    if (dtype_size(static_cast<DType>(c.dtype)) == 0)
      return {Errc::invalid_argument, where + " has unknown dtype " + std::to_string(c.dtype)};
    if (c.rank > kMaxRank)
      return {Errc::invalid_argument, where + " has rank " + std::to_string(c.rank) + "; at most " + std::to_string(kMaxRank) + " dimensions"};
    // Each factor is < 2^32 and the product so far <= 2^30: no overflow.
    uint64_t bytes = dtype_size(static_cast<DType>(c.dtype));
    for (uint32_t d = 0; d < c.rank; ++d) {
      if (c.shape[d] == 0) return {Errc::invalid_argument, where + " has a zero-sized dimension " + std::to_string(d)};
      bytes *= c.shape[d];
      if (bytes > kMaxStepBytes)
        return {Errc::invalid_argument, where + " has more than " + std::to_string(kMaxStepBytes) + " bytes per step"};
    }
    for (size_t j = 0; j < i; ++j)
      if (std::strncmp(cols[j].name, c.name, kMaxColumnName) == 0)
        return {Errc::invalid_argument, where + " repeats the name of column " + std::to_string(j)};
    if (Status s = validate_codec(c.codec, c.level); !s.ok()) return {s.code(), where + ": " + s.message()};
  }
  return Status::Ok();
}

bool signature_compressed(const Column* cols, size_t n) noexcept {
  for (size_t i = 0; i < n; ++i)
    if (cols[i].codec != static_cast<uint32_t>(Codec::none)) return true;
  return false;
}

std::string column_codec_text(const Column& c) {
  std::string name(c.name, strnlen(c.name, kMaxColumnName));
  if (c.codec == static_cast<uint32_t>(Codec::none)) return name + " (uncompressed)";
  return name + " (" + codec_name(static_cast<Codec>(c.codec)) + " level " + std::to_string(effective_level(c.level)) +
         ")";
}

}  // namespace engram
