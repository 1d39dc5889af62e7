#include "core/npz.hpp"

#include <array>
#include <cstring>

namespace engram {
namespace {

// Slicing-by-8: eight bytes a step through eight tables (8 KiB), about
// four times the byte-wise loop; zlib's would do as well but would make
// libengram need zlib for 40 lines.
struct CrcTables {
  std::array<std::array<uint32_t, 256>, 8> t{};
  CrcTables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (size_t s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
  }
};
const CrcTables kCrc;

void put16(std::string* s, uint16_t v) {
  s->push_back(static_cast<char>(v & 0xFF));
  s->push_back(static_cast<char>(v >> 8));
}
void put32(std::string* s, uint32_t v) {
  put16(s, static_cast<uint16_t>(v & 0xFFFF));
  put16(s, static_cast<uint16_t>(v >> 16));
}
void put64(std::string* s, uint64_t v) {
  put32(s, static_cast<uint32_t>(v));
  put32(s, static_cast<uint32_t>(v >> 32));
}
uint16_t get16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
uint32_t get32(const unsigned char* p) { return get16(p) | uint32_t{get16(p + 2)} << 16; }
uint64_t get64(const unsigned char* p) { return get32(p) | uint64_t{get32(p + 4)} << 32; }

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50, kZip64LocatorSig = 0x07064b50;
constexpr uint32_t k32 = 0xFFFFFFFFu;
constexpr size_t kLocalBytes = 30, kCentralBytes = 46, kEndBytes = 22, kZip64EndBytes = 56, kLocatorBytes = 20;
constexpr uint16_t kZip64Version = 45, kPlainVersion = 20;

struct DescrName {
  DType t;
  const char* descr;
};
constexpr DescrName kDescrs[] = {
    {DType::u8, "|u1"},  {DType::i8, "|i1"},  {DType::u16, "<u2"}, {DType::i16, "<i2"},
    {DType::u32, "<u4"}, {DType::i32, "<i4"}, {DType::u64, "<u8"}, {DType::i64, "<i8"},
    {DType::f16, "<f2"}, {DType::f32, "<f4"}, {DType::f64, "<f8"}, {DType::boolean, "|b1"},
};

// The header dictionary of a .npy: {'descr': '<f4', 'fortran_order':
// False, 'shape': (3, 4), } as NumPy writes it; keys in any order.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view s) : s_(s) {}
  Status parse(NpyArray* out) {
    bool descr = false, order = false, shape = false;
    if (!eat('{')) return bad("does not start with '{'");
    while (!eat('}')) {
      std::string key;
      if (!string(&key) || !eat(':')) return bad("has a malformed key");
      if (key == "descr" && !descr) {
        if (!string(&out->descr)) return bad("has a malformed descr");
        descr = true;
      } else if (key == "fortran_order" && !order) {
        bool fortran = false;
        if (word("True")) fortran = true;
        else if (!word("False")) return bad("has a malformed fortran_order");
        if (fortran) return {Errc::invalid_argument, "the array is in Fortran order; save it in C order (np.ascontiguousarray)"};
        order = true;
      } else if (key == "shape" && !shape) {
        if (!tuple(&out->shape)) return bad("has a malformed shape");
        shape = true;
      } else {
        return bad("has an unexpected key '" + key + "'");
      }
      if (!eat(',') && !peek('}')) return bad("lacks a ','");
    }
    if (!descr || !order || !shape) return bad("lacks descr, fortran_order or shape");
    out->dtype = dtype_from_descr(out->descr);
    return Status::Ok();
  }

 private:
  static Status bad(const std::string& why) { return {Errc::corrupt, "its .npy header " + why}; }
  void space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n')) ++i_;
  }
  bool peek(char c) {
    space();
    return i_ < s_.size() && s_[i_] == c;
  }
  bool eat(char c) {
    if (!peek(c)) return false;
    ++i_;
    return true;
  }
  bool word(std::string_view w) {
    space();
    if (s_.substr(i_, w.size()) != w) return false;
    i_ += w.size();
    return true;
  }
  bool string(std::string* out) {
    space();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) return false;
    char q = s_[i_++];
    size_t end = s_.find(q, i_);
    if (end == std::string_view::npos || end - i_ > 64) return false;
    *out = std::string(s_.substr(i_, end - i_));
    i_ = end + 1;
    return true;
  }
  bool tuple(std::vector<uint64_t>* out) {
    if (!eat('(')) return false;
    while (!eat(')')) {
      space();
      uint64_t v = 0;
      size_t digits = 0;
      for (; i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9' && digits < 19; ++i_, ++digits) v = v * 10 + (s_[i_] - '0');
      if (digits == 0 || out->size() >= 32) return false;
      out->push_back(v);
      if (!eat(',') && !peek(')')) return false;
    }
    return true;
  }

  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace

uint32_t crc32(uint32_t crc, const void* data, size_t n) noexcept {
  const auto& t = kCrc.t;
  auto p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint32_t lo = crc ^ get32(p), hi = get32(p + 4);
    crc = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^ t[3][hi & 0xFF] ^
          t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
  }
  while (n--) crc = t[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

const char* npy_descr(DType t) noexcept {
  for (const DescrName& d : kDescrs)
    if (d.t == t) return d.descr;
  return nullptr;
}

DType dtype_from_descr(const std::string& descr) noexcept {
  // One-byte types may come as '<u1' or '=u1' too; NumPy writes '|u1'.
  std::string d = descr;
  if (d.size() == 3 && d[2] == '1' && (d[0] == '<' || d[0] == '=')) d[0] = '|';
  for (const DescrName& x : kDescrs)
    if (d == x.descr) return x.t;
  return DType{};
}

uint64_t NpyArray::elements() const noexcept {
  uint64_t n = 1;
  for (uint64_t d : shape) n = __builtin_mul_overflow(n, d, &n) ? UINT64_MAX : n;
  return n;
}

std::string npy_header(const char* descr, const std::vector<uint64_t>& shape, uint64_t data_at) {
  std::string dict = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i) dict += std::to_string(shape[i]) + (shape.size() == 1 ? "," : i + 1 < shape.size() ? ", " : "");
  dict += "), }";
  // magic (6) + version (2) + length (2) + dict + padding + '\n'
  size_t total = 10 + dict.size() + 1;
  size_t pad = (64 - (data_at + total) % 64) % 64;
  dict.append(pad, ' ');
  dict += '\n';
  std::string h("\x93NUMPY\x01\x00", 8);
  put16(&h, static_cast<uint16_t>(dict.size()));
  return h + dict;
}

Status parse_npy(const unsigned char* p, size_t n, NpyArray* out, size_t* data_offset) {
  if (n < 10 || std::memcmp(p, "\x93NUMPY", 6) != 0) return {Errc::corrupt, "it is not a .npy array (no magic)"};
  uint8_t major = p[6];
  size_t len, at;
  if (major == 1) {
    len = get16(p + 8);
    at = 10;
  } else if ((major == 2 || major == 3) && n >= 12) {
    len = get32(p + 8);
    at = 12;
  } else {
    return {Errc::corrupt, "its .npy version " + std::to_string(major) + " is not one of 1, 2, 3"};
  }
  if (len > n - at) return {Errc::corrupt, "its .npy header runs past its end"};
  *out = NpyArray{};
  Status s = HeaderParser({reinterpret_cast<const char*>(p + at), len}).parse(out);
  if (!s.ok()) return s;
  *data_offset = at + len;
  size_t item = out->dtype == DType{} ? 0 : dtype_size(out->dtype);
  if (item == 0) return Status::Ok();  // the caller names the column and the dtype
  uint64_t want;
  if (out->elements() == UINT64_MAX || __builtin_mul_overflow(out->elements(), item, &want) || want != n - *data_offset)
    return {Errc::corrupt, "its data is " + std::to_string(n - *data_offset) + " bytes, not what shape and dtype say"};
  return Status::Ok();
}

uint32_t ZipWriter::local_header_bytes(const std::string& name, bool zip64) noexcept {
  return static_cast<uint32_t>(kLocalBytes + name.size() + (zip64 ? 20 : 0));
}

std::string ZipWriter::begin_member(const std::string& name, uint64_t size, uint64_t offset, bool zip64) {
  bool big = zip64 || size >= k32;
  std::string h;
  put32(&h, kLocalSig);
  put16(&h, big ? kZip64Version : kPlainVersion);
  put16(&h, 0);  // flags
  put16(&h, 0);  // stored
  put16(&h, dos_time_);
  put16(&h, dos_date_);
  put32(&h, 0);  // CRC-32, patched
  put32(&h, big ? k32 : static_cast<uint32_t>(size));
  put32(&h, big ? k32 : static_cast<uint32_t>(size));
  put16(&h, static_cast<uint16_t>(name.size()));
  put16(&h, big ? 20 : 0);
  h += name;
  if (big) {  // a local ZIP64 field holds both sizes
    put16(&h, 1);
    put16(&h, 16);
    put64(&h, size);
    put64(&h, size);
  }
  members_.push_back({name, offset, size, static_cast<uint32_t>(h.size()), 0});
  return h;
}

std::vector<std::pair<uint64_t, uint32_t>> ZipWriter::local_crc_patches() const {
  std::vector<std::pair<uint64_t, uint32_t>> out;
  for (const Member& m : members_) out.push_back({m.offset + 14, m.crc});
  return out;
}

std::string ZipWriter::finish(uint64_t offset) const {
  std::string cd;
  for (const Member& m : members_) {
    bool big_size = m.size >= k32, big_offset = m.offset >= k32;
    std::string extra;
    if (big_size) {
      put64(&extra, m.size);
      put64(&extra, m.size);
    }
    if (big_offset) put64(&extra, m.offset);
    if (!extra.empty()) {
      std::string head;
      put16(&head, 1);
      put16(&head, static_cast<uint16_t>(extra.size()));
      extra = head + extra;
    }
    uint16_t version = big_size || big_offset ? kZip64Version : kPlainVersion;
    put32(&cd, kCentralSig);
    put16(&cd, version);  // made by (MS-DOS attributes)
    put16(&cd, version);
    put16(&cd, 0);
    put16(&cd, 0);
    put16(&cd, dos_time_);
    put16(&cd, dos_date_);
    put32(&cd, m.crc);
    put32(&cd, big_size ? k32 : static_cast<uint32_t>(m.size));
    put32(&cd, big_size ? k32 : static_cast<uint32_t>(m.size));
    put16(&cd, static_cast<uint16_t>(m.name.size()));
    put16(&cd, static_cast<uint16_t>(extra.size()));
    put16(&cd, 0);  // comment
    put16(&cd, 0);  // disk
    put16(&cd, 0);  // internal attributes
    put32(&cd, 0);  // external attributes
    put32(&cd, big_offset ? k32 : static_cast<uint32_t>(m.offset));
    cd += m.name + extra;
  }
  uint64_t cd_size = cd.size(), count = members_.size();
  bool zip64 = offset >= k32 || cd_size >= k32 || count >= 0xFFFF;
  std::string out = cd;
  if (zip64) {
    uint64_t end64 = offset + cd_size;
    put32(&out, kZip64EndSig);
    put64(&out, kZip64EndBytes - 12);
    put16(&out, kZip64Version);
    put16(&out, kZip64Version);
    put32(&out, 0);
    put32(&out, 0);
    put64(&out, count);
    put64(&out, count);
    put64(&out, cd_size);
    put64(&out, offset);
    put32(&out, kZip64LocatorSig);
    put32(&out, 0);
    put64(&out, end64);
    put32(&out, 1);
  }
  put32(&out, kEndSig);
  put16(&out, 0);
  put16(&out, 0);
  put16(&out, zip64 ? 0xFFFF : static_cast<uint16_t>(count));
  put16(&out, zip64 ? 0xFFFF : static_cast<uint16_t>(count));
  put32(&out, zip64 ? k32 : static_cast<uint32_t>(cd_size));
  put32(&out, zip64 ? k32 : static_cast<uint32_t>(offset));
  put16(&out, 0);
  return out;
}

Result<ZipReader> ZipReader::open(const unsigned char* p, size_t n, const std::string& file) {
  auto corrupt = [&](const std::string& why) { return Status{Errc::corrupt, file + " is damaged: " + why}; };
  ZipReader z;
  z.p_ = p;
  z.n_ = n;
  z.file_ = file;
  // The end record is the last 22 bytes, unless a comment follows it.
  size_t end = SIZE_MAX;
  for (size_t i = n >= kEndBytes ? n - kEndBytes + 1 : 0; i-- > 0 && n - i <= kEndBytes + 0xFFFF;)
    if (get32(p + i) == kEndSig && i + kEndBytes + get16(p + i + 20) == n) {
      end = i;
      break;
    }
  if (end == SIZE_MAX)
    return Status{Errc::invalid_argument, file + " is not a .npz file (no zip end record): give a file that "
                                                 "engramctl export or numpy's np.savez wrote"};
  uint64_t count = get16(p + end + 10), cd_size = get32(p + end + 12), cd_at = get32(p + end + 16);
  if (end >= kLocatorBytes && get32(p + end - kLocatorBytes) == kZip64LocatorSig) {
    uint64_t at = get64(p + end - kLocatorBytes + 8);
    if (at > end - kLocatorBytes || end - kLocatorBytes - at < kZip64EndBytes || get32(p + at) != kZip64EndSig)
      return corrupt("its ZIP64 end record is not where its locator says");
    count = get64(p + at + 32);
    cd_size = get64(p + at + 40);
    cd_at = get64(p + at + 48);
    end = at;
  }
  if (cd_at > end || cd_size > end - cd_at) return corrupt("its central directory lies outside the file");
  if (count > cd_size / kCentralBytes) return corrupt("its central directory is too short for its entries");
  const unsigned char* e = p + cd_at;
  const unsigned char* cd_end = e + cd_size;
  for (uint64_t i = 0; i < count; ++i) {
    if (size_t(cd_end - e) < kCentralBytes || get32(e) != kCentralSig) return corrupt("central directory entry " + std::to_string(i) + " is malformed");
    uint16_t flags = get16(e + 8), method = get16(e + 10);
    uint64_t csize = get32(e + 20), usize = get32(e + 24), local = get32(e + 42);
    size_t nlen = get16(e + 28), xlen = get16(e + 30), clen = get16(e + 32);
    if (size_t(cd_end - e) - kCentralBytes < nlen + xlen + clen) return corrupt("central directory entry " + std::to_string(i) + " runs past it");
    Member m;
    m.name.assign(reinterpret_cast<const char*>(e + kCentralBytes), nlen);
    m.crc = get32(e + 16);
    // ZIP64: each field that reads all ones is in the extra field, in order.
    for (const unsigned char* x = e + kCentralBytes + nlen; x + 4 <= e + kCentralBytes + nlen + xlen;) {
      uint16_t id = get16(x), len = get16(x + 2);
      const unsigned char* v = x + 4;
      if (v + len > e + kCentralBytes + nlen + xlen) return corrupt("member " + m.name + "'s extra field runs past it");
      if (id == 1) {
        const unsigned char* f = v;
        for (uint64_t* field : {&usize, &csize, &local})
          if (*field == k32) {
            if (f + 8 > v + len) return corrupt("member " + m.name + "'s ZIP64 field is short");
            *field = get64(f);
            f += 8;
          }
      }
      x = v + len;
    }
    if (flags & 1) return Status{Errc::invalid_argument, file + ": member " + m.name + " is encrypted"};
    if (method != 0)
      return Status{Errc::invalid_argument, file + ": member " + m.name + " is compressed (method " + std::to_string(method) +
                                                "); engram reads stored members: write it with np.savez, not np.savez_compressed"};
    if (csize != usize) return corrupt("member " + m.name + " is stored with two sizes");
    if (local > cd_at || cd_at - local < kLocalBytes || get32(p + local) != kLocalSig)
      return corrupt("member " + m.name + "'s local header is not where the directory says");
    uint64_t data = local + kLocalBytes + get16(p + local + 26) + get16(p + local + 28);
    if (data > cd_at || usize > cd_at - data) return corrupt("member " + m.name + "'s data runs past the directory");
    m.data = data;
    m.size = usize;
    z.members_.push_back(std::move(m));
    e += kCentralBytes + nlen + xlen + clen;
  }
  return z;
}

const ZipReader::Member* ZipReader::find(const std::string& name) const noexcept {
  for (const Member& m : members_)
    if (m.name == name) return &m;
  return nullptr;
}

Status ZipReader::check_crc(const Member& m) const {
  if (crc32(0, p_ + m.data, m.size) != m.crc)
    return {Errc::corrupt, file_ + " is damaged: member " + m.name + " fails its CRC-32 check"};
  return Status::Ok();
}

}  // namespace engram
