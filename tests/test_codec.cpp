// Column codecs and the packed chunk layout: round trips, the raw fallback,
// and refusal of directories and frames that do not add up.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/chunk_format.hpp"
#include "core/codec.hpp"

namespace engram {
namespace {

// Frames of `w` x `w` bytes: a fixed background and an 8x8 square that moves
// one pixel per step: consecutive frames differ in a few bytes.
std::vector<unsigned char> moving_square(uint32_t w, uint32_t steps) {
  std::vector<unsigned char> v(size_t{w} * w * steps);
  for (uint32_t t = 0; t < steps; ++t)
    for (uint32_t y = 0; y < w; ++y)
      for (uint32_t x = 0; x < w; ++x) {
        bool in = x >= t % (w - 8) && x < t % (w - 8) + 8 && y >= 20 && y < 28;
        v[(size_t{t} * w + y) * w + x] = in ? 255 : static_cast<unsigned char>((x * 7 + y * 13) & 0x3f);
      }
  return v;
}

TEST(Codec, EveryCodecRoundTrips) {
  auto frames = moving_square(84, 20);
  const size_t step = 84 * 84;
  Encoder enc;
  Decoder dec;
  std::vector<unsigned char> stored(frames.size()), back(frames.size());
  for (Codec c : {Codec::none, Codec::zstd, Codec::delta_zstd}) {
    Encoding used;
    size_t n = enc.encode_column(c, 0, frames.data(), step, 20, stored.data(), stored.size(), &used);
    ASSERT_TRUE(dec.decode_column(used, stored.data(), n, step, 20, back.data()).ok()) << codec_name(c);
    EXPECT_EQ(back, frames) << codec_name(c);
    if (c == Codec::none) {
      EXPECT_EQ(used, Encoding::raw);
    } else {
      EXPECT_LT(n, frames.size() / 4) << codec_name(c);
    }
  }
}

TEST(Codec, DeltaBeatsPlainZstdWhenEveryPixelDrifts) {
  // A noise frame that brightens by one each step: no byte repeats the
  // previous frame's, so plain zstd finds nothing; the deltas are all ones.
  std::mt19937 rng(3);
  const size_t step = 84 * 84;
  std::vector<unsigned char> frames(step * 20);
  for (size_t i = 0; i < step; ++i) frames[i] = static_cast<unsigned char>(rng());
  for (size_t i = step; i < frames.size(); ++i) frames[i] = static_cast<unsigned char>(frames[i - step] + 1);
  Encoder enc;
  std::vector<unsigned char> a(frames.size()), b(frames.size());
  Encoding ua, ub;
  size_t plain = enc.encode_column(Codec::zstd, 0, frames.data(), step, 20, a.data(), a.size(), &ua);
  size_t delta = enc.encode_column(Codec::delta_zstd, 0, frames.data(), step, 20, b.data(), b.size(), &ub);
  EXPECT_EQ(ub, Encoding::delta_zstd);
  EXPECT_LT(delta * 5, plain);
  std::vector<unsigned char> back(frames.size());
  Decoder dec;
  ASSERT_TRUE(dec.decode_column(ub, b.data(), delta, step, 20, back.data()).ok());
  EXPECT_EQ(back, frames);
}

TEST(Codec, IncompressibleColumnsAreStoredRaw) {
  std::mt19937 rng(7);
  std::vector<unsigned char> noise(4096);
  for (auto& x : noise) x = static_cast<unsigned char>(rng());
  Encoder enc;
  std::vector<unsigned char> out(noise.size());
  Encoding used;
  size_t n = enc.encode_column(Codec::zstd, 19, noise.data(), 1024, 4, out.data(), out.size(), &used);
  EXPECT_EQ(used, Encoding::raw);
  EXPECT_EQ(n, noise.size());
  EXPECT_EQ(out, noise);
}

TEST(Codec, DamagedFramesAreCorruptNotCrashes) {
  auto frames = moving_square(32, 8);
  Encoder enc;
  Decoder dec;
  std::vector<unsigned char> stored(frames.size()), back(frames.size());
  Encoding used;
  size_t n = enc.encode_column(Codec::zstd, 0, frames.data(), 32 * 32, 8, stored.data(), stored.size(), &used);
  ASSERT_EQ(used, Encoding::zstd);
  EXPECT_EQ(dec.decode_column(used, stored.data(), n - 3, 32 * 32, 8, back.data()).code(), Errc::corrupt);
  EXPECT_EQ(dec.decode_column(used, stored.data(), n, 32 * 32, 7, back.data()).code(), Errc::corrupt);
  stored[n / 2] ^= 0xff;
  Status s = dec.decode_column(used, stored.data(), n, 32 * 32, 8, back.data());
  // zstd frames carry no checksum here (the sizes are checked), so a flip
  // may still decode, but never to the original bytes.
  if (s.ok()) {
    EXPECT_NE(back, frames);
  }
  EXPECT_EQ(dec.decode_column(Encoding::raw, stored.data(), 10, 32 * 32, 8, back.data()).code(), Errc::corrupt);
}

TEST(Codec, LevelsAndNamesAreValidated) {
  EXPECT_TRUE(validate_codec(0, 0).ok());
  EXPECT_FALSE(validate_codec(0, 3).ok());
  EXPECT_TRUE(validate_codec(1, 19).ok());
  EXPECT_FALSE(validate_codec(1, 1000).ok());
  EXPECT_FALSE(validate_codec(9, 0).ok());
  EXPECT_EQ(*codec_from_name("delta_zstd"), Codec::delta_zstd);
  auto bad = codec_from_name("lz4");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("delta_zstd"), std::string::npos);
  // "Default" and its value are one level, so signatures compare equal.
  Column a = make_column("obs", DType::u8, {4}, Codec::zstd, 0);
  Column b = make_column("obs", DType::u8, {4}, Codec::zstd, kDefaultZstdLevel);
  EXPECT_TRUE(same_signature(&a, 1, &b, 1));
  EXPECT_EQ(signature_hash(&a, 1), signature_hash(&b, 1));
  Column c = make_column("obs", DType::u8, {4}, Codec::delta_zstd, 0);
  EXPECT_FALSE(same_signature(&a, 1, &c, 1));
  EXPECT_NE(signature_hash(&a, 1), signature_hash(&c, 1));
}

// A packed chunk as the writer lays it out.
struct Packed {
  std::vector<Column> cols{make_column("obs", DType::u8, {16, 16}, Codec::delta_zstd),
                           make_column("r", DType::f32, {})};
  std::vector<char> block;
  ChunkHeader h{};
  Packed() {
    block.resize(chunk_bytes(cols.data(), 2, 4));
    h = {kChunkMagic, 4, 4, 2, signature_hash(cols.data(), 2), 1, kChunkPacked, {}};
    std::memcpy(block.data(), &h, sizeof h);
    auto frames = moving_square(16, 4);
    float r[4] = {1, 2, 3, 4};
    Encoder enc;
    size_t off = packed_data_offset(2);
    const void* src[2] = {frames.data(), r};
    size_t steps[2] = {256, 4};
    for (uint32_t c = 0; c < 2; ++c) {
      Encoding used;
      size_t n = enc.encode_column(static_cast<Codec>(cols[c].codec), cols[c].level, src[c], steps[c], 4,
                                   block.data() + off, block.size() - off, &used);
      set_entry(c, {off, n, static_cast<uint32_t>(used), 0});
      off = (off + n + 63) / 64 * 64;
    }
  }
  void set_entry(uint32_t c, ChunkColumn e) {
    std::memcpy(block.data() + sizeof(ChunkHeader) + c * sizeof e, &e, sizeof e);
  }
  ChunkColumn entry(uint32_t c) const {
    ChunkColumn e;
    std::memcpy(&e, block.data() + sizeof(ChunkHeader) + c * sizeof e, sizeof e);
    return e;
  }
  Status check() {
    ChunkHeader out;
    return check_chunk(block.data(), block.size(), cols.data(), 2, h.signature_hash, 0, 4, &out);
  }
};

TEST(PackedChunk, AWellFormedChunkPassesAndDecodes) {
  Packed p;
  ASSERT_TRUE(p.check().ok()) << p.check().message();
  ColumnSpan span;
  ASSERT_TRUE(chunk_column_span(p.block.data(), p.block.size(), p.h, p.cols.data(), 0, &span).ok());
  EXPECT_EQ(span.encoding, Encoding::delta_zstd);
  std::vector<unsigned char> back(256 * 4);
  Decoder dec;
  ASSERT_TRUE(dec.decode_column(span.encoding, p.block.data() + span.offset, span.bytes, 256, 4, back.data()).ok());
  EXPECT_EQ(back, moving_square(16, 4));
  uint64_t raw = 0, stored = 0;
  ASSERT_TRUE(chunk_sizes(p.block.data(), p.block.size(), p.h, p.cols.data(), &raw, &stored).ok());
  EXPECT_EQ(raw, 4u * 256 + 4 * 4);
  EXPECT_LT(stored, raw);
}

TEST(PackedChunk, BadDirectoriesAreRefused) {
  {
    Packed p;  // outside the block
    ChunkColumn e = p.entry(0);
    e.offset = p.block.size() - 2;
    p.set_entry(0, e);
    EXPECT_NE(p.check().message().find("outside"), std::string::npos) << p.check().message();
  }
  {
    Packed p;  // over the directory
    ChunkColumn e = p.entry(0);
    e.offset = sizeof(ChunkHeader);
    p.set_entry(0, e);
    EXPECT_EQ(p.check().code(), Errc::corrupt);
  }
  {
    Packed p;  // an encoding the column's codec never writes
    ChunkColumn e = p.entry(1);
    e.encoding = static_cast<uint32_t>(Encoding::zstd);
    p.set_entry(1, e);
    EXPECT_NE(p.check().message().find("never writes"), std::string::npos) << p.check().message();
  }
  {
    Packed p;  // raw with the wrong size
    ChunkColumn e = p.entry(1);
    e.stored_bytes = 3;
    p.set_entry(1, e);
    EXPECT_EQ(p.check().code(), Errc::corrupt);
  }
  {
    Packed p;  // the plain flag on a compressed signature
    p.h.flags = 0;
    std::memcpy(p.block.data(), &p.h, sizeof p.h);
    EXPECT_NE(p.check().message().find("layout"), std::string::npos) << p.check().message();
  }
}


// What leaves the machine of a sealed chunk: its steps where the layout
// puts them, and zeros where a block's unused room held other data.
TEST(SealedChunk, ACopyCarriesTheStepsAndZerosTheRest) {
  std::vector<Column> cols{make_column("obs", DType::u8, {8}), make_column("r", DType::f32, {})};
  uint64_t sig = signature_hash(cols.data(), 2);
  std::vector<char> block(chunk_bytes(cols.data(), 2, 4) + 100, 'X');  // stale bytes everywhere
  ChunkHeader h{kChunkMagic, 3, 4, 2, sig, 9, 0, {}};
  std::memcpy(block.data(), &h, sizeof h);
  for (uint32_t i = 0; i < 3; ++i) {
    std::memset(block.data() + chunk_column_offset(cols.data(), 0, 4) + i * 8, 'a' + static_cast<int>(i), 8);
    float r = static_cast<float>(i);
    std::memcpy(block.data() + chunk_column_offset(cols.data(), 1, 4) + i * 4, &r, 4);
  }
  std::string out = "prefix";
  ASSERT_TRUE(copy_sealed_chunk(block.data(), block.size(), cols.data(), 2, sig, &out).ok());
  ASSERT_EQ(out.size(), 6 + chunk_bytes(cols.data(), 2, 4));
  const char* c = out.data() + 6;
  EXPECT_EQ(std::memcmp(c, &h, sizeof h), 0);
  for (size_t i = sizeof h; i < out.size() - 6; ++i) {
    size_t obs = chunk_column_offset(cols.data(), 0, 4), rr = chunk_column_offset(cols.data(), 1, 4);
    bool step = (i >= obs && i < obs + 3 * 8) || (i >= rr && i < rr + 3 * 4);
    if (step) EXPECT_EQ(c[i], block[i]) << i;
    else ASSERT_EQ(c[i], 0) << "byte " << i << " is outside every written step";
  }
  // What a receiver checks, it finds whole.
  ChunkHeader back;
  EXPECT_TRUE(check_chunk(c, out.size() - 6, cols.data(), 2, sig, 0, 3, &back).ok());
  // Not a chunk of these columns: refused, nothing appended.
  std::string none;
  EXPECT_EQ(copy_sealed_chunk(block.data(), block.size(), cols.data(), 2, sig + 1, &none).code(), Errc::corrupt);
  EXPECT_TRUE(none.empty());
}

TEST(SealedChunk, APackedChunkKeepsItsDirectoryAndDecodes) {
  Packed p;
  std::fill(p.block.end() - 64, p.block.end(), 'X');  // stale room past the last column
  std::string out;
  ASSERT_TRUE(copy_sealed_chunk(p.block.data(), p.block.size(), p.cols.data(), 2, p.h.signature_hash, &out).ok());
  ChunkColumn last;
  std::memcpy(&last, p.block.data() + sizeof(ChunkHeader) + sizeof last, sizeof last);
  EXPECT_EQ(out.size(), last.offset + last.stored_bytes);
  ChunkHeader h;
  ASSERT_TRUE(check_chunk(out.data(), out.size(), p.cols.data(), 2, p.h.signature_hash, 0, 4, &h).ok());
  ColumnSpan span;
  ASSERT_TRUE(chunk_column_span(out.data(), out.size(), h, p.cols.data(), 0, &span).ok());
  std::vector<unsigned char> frames(256 * 4);
  Decoder dec;
  ASSERT_TRUE(dec.decode_column(span.encoding, out.data() + span.offset, span.bytes, 256, 4, frames.data()).ok());
  EXPECT_EQ(frames, moving_square(16, 4));
}

}  // namespace
}  // namespace engram

namespace engram {
namespace {

// The levels the pages promise, -7..22, and no others: -1000 was taken
// (zstd's own floor is -131072) and its error named zstd's range (64.5).
TEST(Codec, LevelsAreThoseThePagesSay) {
  const uint32_t zstd = static_cast<uint32_t>(Codec::zstd);
  for (int32_t ok : {-7, -1, 0, 1, 22}) EXPECT_TRUE(validate_codec(zstd, ok).ok()) << ok;
  for (int32_t bad : {-1000, -8, 23}) {
    Status s = validate_codec(zstd, bad);
    EXPECT_EQ(s.code(), Errc::invalid_argument) << bad;
    EXPECT_NE(s.message().find("allowed -7..22"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace engram
