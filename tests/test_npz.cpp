// core/npz: the CRC-32 against its check value, .npy headers as NumPy
// writes them, archives written and read back (with ZIP64 forced), and a
// reader that refuses every damaged archive without reading past it.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "core/npz.hpp"

namespace engram {
namespace {

TEST(Npz, Crc32CheckValueAndContinuation) {
  EXPECT_EQ(crc32(0, "123456789", 9), 0xCBF43926u);  // the catalogued check value
  EXPECT_EQ(crc32(0, "", 0), 0u);
  std::string s(1000, '\0');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>(i * 31 + 7);
  for (size_t cut : {0, 1, 7, 8, 9, 500, 999})
    EXPECT_EQ(crc32(crc32(0, s.data(), cut), s.data() + cut, s.size() - cut), crc32(0, s.data(), s.size())) << cut;
  // Byte-wise reference for unaligned tails.
  uint32_t c = ~0u;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
  }
  EXPECT_EQ(crc32(0, s.data() + 0, s.size()), ~c);
}

TEST(Npz, NpyHeadersAsNumpyWritesThem) {
  std::string h = npy_header("<f4", {3, 4}, 0);
  EXPECT_EQ(h.size() % 64, 0u);
  EXPECT_NE(h.find("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }"), std::string::npos) << h;
  EXPECT_EQ(h.back(), '\n');
  EXPECT_NE(npy_header("|u1", {5}, 0).find("'shape': (5,)"), std::string::npos);
  EXPECT_NE(npy_header("<u4", {}, 0).find("'shape': ()"), std::string::npos);
  EXPECT_EQ((npy_header("<u4", {}, 37).size() + 37) % 64, 0u) << "data aligned in the file";

  std::string arr = npy_header("<i2", {2, 3}, 0) + std::string(12, 'x');
  NpyArray a;
  size_t at = 0;
  ASSERT_TRUE(parse_npy(reinterpret_cast<const unsigned char*>(arr.data()), arr.size(), &a, &at).ok());
  EXPECT_EQ(a.dtype, DType::i16);
  EXPECT_EQ(a.shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(at, arr.size() - 12);
  // What NumPy 1.x writes for a bool vector, version 1.0, 16-aligned.
  std::string np = std::string("\x93NUMPY\x01\x00", 8) + std::string("\x46\x00", 2) +
                   "{'descr': '|b1', 'fortran_order': False, 'shape': (4,), }          \n";
  np.resize(10 + 0x46, ' ');
  np.back() = '\n';
  np += std::string(4, '\1');
  ASSERT_TRUE(parse_npy(reinterpret_cast<const unsigned char*>(np.data()), np.size(), &a, &at).ok());
  EXPECT_EQ(a.dtype, DType::boolean);

  auto refused = [&](std::string bytes, const char* says) {
    Status s = parse_npy(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), &a, &at);
    EXPECT_FALSE(s.ok()) << says;
    EXPECT_NE(s.message().find(says), std::string::npos) << s.message();
  };
  refused(arr.substr(0, arr.size() - 1), "not what shape and dtype say");
  refused("\x93NUMPX" + arr.substr(6), "no magic");
  std::string fortran = arr;
  fortran.replace(fortran.find("False"), 5, "True ");
  refused(fortran, "Fortran order");
  std::string wrong_key = arr;
  wrong_key.replace(wrong_key.find("descr"), 5, "dtype");
  refused(wrong_key, "unexpected key");
  std::string huge = arr;
  huge.replace(huge.find("(2, 3)"), 6, "(99999999999999999999)");
  refused(huge, "malformed shape");
  std::string be = npy_header(">f4", {1}, 0) + "abcd";
  ASSERT_TRUE(parse_npy(reinterpret_cast<const unsigned char*>(be.data()), be.size(), &a, &at).ok());
  EXPECT_EQ(a.dtype, DType{}) << "big-endian: no engram dtype, for the caller to name";
}

std::string archive(bool zip64, std::vector<std::pair<std::string, std::string>> members) {
  ZipWriter z;
  std::string out;
  for (auto& [name, data] : members) {
    out += z.begin_member(name, data.size(), out.size(), zip64);
    out += data;
    z.end_member(crc32(0, data.data(), data.size()));
  }
  for (auto [at, crc] : z.local_crc_patches())
    for (int k = 0; k < 4; ++k) out[at + k] = static_cast<char>(crc >> (8 * k));
  return out + z.finish(out.size());
}

Result<ZipReader> read(const std::string& s) {
  return ZipReader::open(reinterpret_cast<const unsigned char*>(s.data()), s.size(), "t.npz");
}

TEST(Npz, ArchivesReadBack) {
  for (bool zip64 : {false, true}) {
    std::string a = archive(zip64, {{"a.npy", "hello"}, {"dir/b.npy", std::string(3000, 'z')}, {"empty.npy", ""}});
    auto z = read(a);
    ASSERT_TRUE(z.ok()) << z.status().message();
    ASSERT_EQ(z->members().size(), 3u);
    const ZipReader::Member* b = z->find("dir/b.npy");
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(z->bytes(*b)), b->size), std::string(3000, 'z'));
    for (const auto& m : z->members()) EXPECT_TRUE(z->check_crc(m).ok()) << m.name;
    EXPECT_EQ(z->find("c.npy"), nullptr);
  }
}

TEST(Npz, DamagedArchivesAreRefusedNeverOverread) {
  std::string good = archive(false, {{"a.npy", std::string(100, 'a')}, {"b.npy", std::string(50, 'b')}});
  EXPECT_EQ(read("").status().code(), Errc::invalid_argument);
  EXPECT_EQ(read("PK").status().code(), Errc::invalid_argument);
  EXPECT_EQ(read(good.substr(0, good.size() - 1)).status().code(), Errc::invalid_argument);
  std::string bad_crc = good;
  bad_crc[40] ^= 1;
  auto z = read(bad_crc);
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(z->check_crc(z->members()[0]).code(), Errc::corrupt);
  std::string compressed = good;
  compressed[8] = 8;  // deflate in the first local header...
  size_t cd = good.find(std::string("PK\x01\x02", 4));
  compressed[cd + 10] = 8;  // ...and in the directory
  z = read(compressed);
  EXPECT_EQ(z.status().code(), Errc::invalid_argument);
  EXPECT_NE(z.status().message().find("np.savez_compressed"), std::string::npos) << z.status().message();

  // Every single-byte change and every cut: an error or an archive whose
  // members lie inside the bytes (ASan checks the reads).
  std::mt19937 rng(7);
  for (int round = 0; round < 20000; ++round) {
    std::string s = round % 7 == 0 ? good.substr(0, rng() % good.size()) : good;
    if (!s.empty()) s[rng() % s.size()] = static_cast<char>(rng());
    std::vector<unsigned char> exact(s.begin(), s.end());  // so ASan sees the end
    auto r = ZipReader::open(exact.data(), exact.size(), "t.npz");
    if (!r.ok()) continue;
    for (const auto& m : r->members()) {
      ASSERT_LE(m.data + m.size, exact.size());
      (void)r->check_crc(m);
    }
  }
}

}  // namespace
}  // namespace engram
