#include "core/codec.hpp"

#include <zstd.h>

#include <cstring>
#include <new>

namespace engram {

const char* codec_name(Codec c) noexcept {
  switch (c) {
    case Codec::none: return "none";
    case Codec::zstd: return "zstd";
    case Codec::delta_zstd: return "delta_zstd";
  }
  return "unknown";
}

Result<Codec> codec_from_name(const std::string& name) {
  for (Codec c : {Codec::none, Codec::zstd, Codec::delta_zstd})
    if (name == codec_name(c)) return c;
  return Status{Errc::invalid_argument, "unknown compression '" + name + "'; use none, zstd or delta_zstd"};
}

Status validate_codec(uint32_t codec, int32_t level) {
  if (codec > static_cast<uint32_t>(Codec::delta_zstd))
    return {Errc::invalid_argument, "unknown codec " + std::to_string(codec) + "; use none (0), zstd (1) or delta_zstd (2)"};
  if (codec == static_cast<uint32_t>(Codec::none)) {
    if (level != 0) return {Errc::invalid_argument, "a compression level was given for an uncompressed column"};
    return Status::Ok();
  }
  if (level != 0 && (level < kMinZstdLevel || level > kMaxZstdLevel))
    return {Errc::invalid_argument, "zstd level " + std::to_string(level) + " is out of range; allowed " +
                                        std::to_string(kMinZstdLevel) + ".." + std::to_string(kMaxZstdLevel) +
                                        " (0 for the default, " + std::to_string(kDefaultZstdLevel) + ")"};
  return Status::Ok();
}

int32_t effective_level(int32_t level) noexcept { return level == 0 ? kDefaultZstdLevel : level; }

Encoder::Encoder() : cctx_(ZSTD_createCCtx()) {
  if (!cctx_) throw std::bad_alloc();
}
Encoder::~Encoder() { ZSTD_freeCCtx(cctx_); }

size_t Encoder::compress(int32_t level, const void* src, size_t n, void* dst, size_t cap) {
  size_t r = ZSTD_compressCCtx(cctx_, dst, cap, src, n, effective_level(level));
  return ZSTD_isError(r) ? 0 : r;
}

size_t Encoder::encode_column(Codec codec, int32_t level, const void* src, size_t step_bytes, uint32_t steps, void* dst,
                              size_t cap, Encoding* used) {
  size_t n = step_bytes * steps;
  if (codec != Codec::none) {
    const void* in = src;
    if (codec == Codec::delta_zstd && steps > 1) {
      // d[i] = x[i] - x[i-1] per byte; step 0 stays as is.
      delta_.resize(n);
      auto* s = static_cast<const unsigned char*>(src);
      std::memcpy(delta_.data(), s, step_bytes);
      for (size_t i = step_bytes; i < n; ++i) delta_[i] = static_cast<unsigned char>(s[i] - s[i - step_bytes]);
      in = delta_.data();
    }
    // Only a frame smaller than the steps is worth a decode.
    size_t r = compress(level, in, n, dst, std::min(cap, n > 0 ? n - 1 : 0));
    if (r > 0) {
      *used = codec == Codec::zstd ? Encoding::zstd : Encoding::delta_zstd;
      return r;
    }
  }
  std::memcpy(dst, src, n);
  *used = Encoding::raw;
  return n;
}

Decoder::Decoder() : dctx_(ZSTD_createDCtx()) {
  if (!dctx_) throw std::bad_alloc();
}
Decoder::~Decoder() { ZSTD_freeDCtx(dctx_); }

Status Decoder::decompress(const void* src, size_t stored, void* dst, size_t n) {
  size_t r = ZSTD_decompressDCtx(dctx_, dst, n, src, stored);
  if (ZSTD_isError(r))
    return {Errc::corrupt, std::string("a zstd frame does not decode: ") + ZSTD_getErrorName(r)};
  if (r != n)
    return {Errc::corrupt, "a zstd frame decodes to " + std::to_string(r) + " bytes instead of " + std::to_string(n)};
  return Status::Ok();
}

Status Decoder::decode_column(Encoding used, const void* src, size_t stored, size_t step_bytes, uint32_t steps,
                              void* dst) {
  size_t n = step_bytes * steps;
  switch (used) {
    case Encoding::raw:
      if (stored != n)
        return {Errc::corrupt, "a raw column holds " + std::to_string(stored) + " bytes instead of " + std::to_string(n)};
      std::memcpy(dst, src, n);
      return Status::Ok();
    case Encoding::zstd: return decompress(src, stored, dst, n);
    case Encoding::delta_zstd: {
      if (Status s = decompress(src, stored, dst, n); !s.ok()) return s;
      auto* x = static_cast<unsigned char*>(dst);
      for (size_t i = step_bytes; i < n; ++i) x[i] = static_cast<unsigned char>(x[i] + x[i - step_bytes]);
      return Status::Ok();
    }
  }
  return {Errc::corrupt, "unknown column encoding " + std::to_string(static_cast<uint32_t>(used))};
}

}  // namespace engram
