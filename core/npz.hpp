// NumPy's .npz: a zip archive of .npy arrays, the file format of a table's
// export (engram-export(5)). Chosen over HDF5 because numpy alone reads it
// (np.load), with no library the reader must install and no format whose
// reader a hostile file could exploit: engram's own reader below is small
// enough to check every offset it follows.
//
// Written here: stored (uncompressed) members, each .npy of format 1.0 with
// its header padded so that the data starts 64-aligned in the file. ZIP64
// fields are written where a size or an offset passes 32 bits, so an
// export of any size opens with Python's zipfile and Info-ZIP's unzip.
//
// Read here: stored members only (np.savez, not np.savez_compressed), .npy
// versions 1 to 3, C order. Every offset, size and header field is checked
// against the file before use; each member's CRC-32 is checked by crc().
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/signature.hpp"
#include "core/status.hpp"

namespace engram {

// The CRC-32 of zip (and zlib, and Ethernet), continued from `crc` (0 at
// the start).
uint32_t crc32(uint32_t crc, const void* data, size_t n) noexcept;

// NumPy's name of a dtype ("<f4", "|u1", "|b1"); nullptr for none.
const char* npy_descr(DType t) noexcept;
// The dtype that NumPy's name `descr` stands for; 0 for none that engram has.
DType dtype_from_descr(const std::string& descr) noexcept;

// An array's dtype and shape, as a .npy header states them.
struct NpyArray {
  std::string descr;           // as written, e.g. "<f4"
  DType dtype{};               // 0 when engram has no such dtype
  std::vector<uint64_t> shape; // () for a scalar
  uint64_t elements() const noexcept;
};

// The .npy header of an array (magic through the padding), `data_at` being
// the file offset where the header starts: its length makes the data start
// at a multiple of 64.
std::string npy_header(const char* descr, const std::vector<uint64_t>& shape, uint64_t data_at);
// Parses a .npy member's bytes: its header and where its data starts. The
// data must be exactly elements x itemsize bytes (itemsize from descr).
Status parse_npy(const unsigned char* p, size_t n, NpyArray* out, size_t* data_offset);

// Writes a zip archive member by member in one pass: a member's local
// header, then its data (by the caller, at offset data_at()), then
// end_member() with the data's CRC-32; finish() returns the central
// directory and end records to append. The local headers' CRC fields are
// written as 0 and must be patched: local_crc_patches() says where.
class ZipWriter {
 public:
  // The local header of member `name` of `size` bytes, to write at
  // `offset` (the end of the archive so far); with ZIP64 sizes when
  // `zip64` or when size needs them (a caller that must know the header's
  // length before the exact size says zip64 for any size near 4 GiB).
  std::string begin_member(const std::string& name, uint64_t size, uint64_t offset, bool zip64 = false);
  // The length of that header.
  static uint32_t local_header_bytes(const std::string& name, bool zip64) noexcept;
  // Offset of the open member's first data byte.
  uint64_t data_at() const noexcept { return members_.back().offset + members_.back().header; }
  void end_member(uint32_t crc) noexcept { members_.back().crc = crc; }
  // Where each member's local CRC field lies, with its CRC (4 bytes, LE).
  std::vector<std::pair<uint64_t, uint32_t>> local_crc_patches() const;
  // Central directory, ZIP64 end records (when needed) and the end record,
  // to write at `offset`, the end of the last member's data.
  std::string finish(uint64_t offset) const;

 private:
  struct Member {
    std::string name;
    uint64_t offset = 0, size = 0;
    uint32_t header = 0, crc = 0;
  };
  std::vector<Member> members_;
  uint16_t dos_time_ = 0, dos_date_ = 0x21;  // 1980-01-01
};

// A zip archive in memory (a mapped file), its central directory checked.
class ZipReader {
 public:
  struct Member {
    std::string name;
    uint64_t data = 0;  // offset of the member's bytes
    uint64_t size = 0;
    uint32_t crc = 0;
  };
  // Errc::invalid_argument when the bytes are no zip archive, or a member
  // is compressed or encrypted (the message says how to write one engram
  // reads); Errc::corrupt when a record or offset does not check out. Both
  // name `file`.
  static Result<ZipReader> open(const unsigned char* p, size_t n, const std::string& file);
  const std::vector<Member>& members() const noexcept { return members_; }
  const Member* find(const std::string& name) const noexcept;
  // The member's bytes checked against its CRC-32.
  Status check_crc(const Member& m) const;
  const unsigned char* bytes(const Member& m) const noexcept { return p_ + m.data; }

 private:
  const unsigned char* p_ = nullptr;
  size_t n_ = 0;
  std::string file_;
  std::vector<Member> members_;
};

}  // namespace engram
