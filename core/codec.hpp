// Column codecs: how one column of a chunk is stored. A table's signature
// chooses one per column; the writer encodes when it finalizes a chunk and
// the sampling client decodes into the caller's buffers. The daemon never
// runs a codec on chunk data (it only checks sizes), so a hostile writer can
// cost a sampler an error, never the daemon its time.
//
//   none        the steps as they are
//   zstd        one zstd frame of the column's steps
//   delta_zstd  step 0 as is, then every step minus the previous one, byte
//               by byte (mod 256), as one zstd frame: for image-like columns,
//               where consecutive frames differ in a few bytes
//
// A column whose frame would not be smaller than its steps is stored as is
// (Encoding::raw), so a chunk never needs more room than uncompressed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.hpp"

typedef struct ZSTD_CCtx_s ZSTD_CCtx;
typedef struct ZSTD_DCtx_s ZSTD_DCtx;

namespace engram {

enum class Codec : uint32_t { none = 0, zstd = 1, delta_zstd = 2 };

// How a column of one chunk was actually stored (a chunk directory field).
enum class Encoding : uint32_t { raw = 0, zstd = 1, delta_zstd = 2 };

inline constexpr int32_t kDefaultZstdLevel = 3;
// The zstd levels engram takes, the one home of the bound (columns'
// compression, checkpoints): zstd's fast levels past -7 gain little and
// its library's own floor (-131072) invites typos, so -7..22 as the pages
// say.
inline constexpr int32_t kMinZstdLevel = -7, kMaxZstdLevel = 22;

const char* codec_name(Codec c) noexcept;
// "none", "zstd", "delta_zstd"; Errc::invalid_argument naming the choices.
Result<Codec> codec_from_name(const std::string& name);
// A known codec; level 0 (the default) or within zstd's levels for a zstd
// codec, and 0 for none.
Status validate_codec(uint32_t codec, int32_t level);
// The level a codec runs at (level 0 means kDefaultZstdLevel).
int32_t effective_level(int32_t level) noexcept;

// Encodes; one per thread (it owns a zstd context and scratch).
class Encoder {
 public:
  Encoder();
  ~Encoder();
  Encoder(const Encoder&) = delete;
  Encoder& operator=(const Encoder&) = delete;

  // Encodes `steps` steps of `step_bytes` each from src into dst (room for
  // cap >= steps * step_bytes bytes). Returns the bytes stored and sets
  // *used to how: the codec's encoding, or raw when that is not smaller.
  size_t encode_column(Codec codec, int32_t level, const void* src, size_t step_bytes, uint32_t steps, void* dst,
                       size_t cap, Encoding* used);
  // One zstd frame of n bytes into dst (cap bytes); 0 when it does not fit.
  size_t compress(int32_t level, const void* src, size_t n, void* dst, size_t cap);

 private:
  ZSTD_CCtx* cctx_;
  std::vector<unsigned char> delta_;
};

// Decodes; one per thread.
class Decoder {
 public:
  Decoder();
  ~Decoder();
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  // Decodes `stored` bytes written by Encoder::encode_column with encoding
  // `used` into exactly steps * step_bytes bytes at dst. Errc::corrupt when
  // the bytes do not decode to exactly that many.
  Status decode_column(Encoding used, const void* src, size_t stored, size_t step_bytes, uint32_t steps, void* dst);
  // One zstd frame into exactly n bytes at dst; Errc::corrupt otherwise.
  Status decompress(const void* src, size_t stored, void* dst, size_t n);

 private:
  ZSTD_DCtx* dctx_;
};

}  // namespace engram
