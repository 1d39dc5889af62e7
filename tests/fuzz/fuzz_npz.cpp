// libFuzzer target: arbitrary bytes as an .npz file to import. The zip
// reader and the .npy header parser must return an error or members and
// arrays that lie inside the bytes, never read past them or crash. The seed
// (corpus/npz/export) is a small table's export: two columns, 36 items.
#include <cstdint>
#include <vector>

#include "core/npz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> b(data, data + size);  // exactly size bytes, so overreads are caught
  auto z = engram::ZipReader::open(b.data(), b.size(), "fuzz.npz");
  if (!z.ok()) return 0;
  for (const auto& m : z->members()) {
    if (m.data + m.size > b.size()) __builtin_trap();
    (void)z->check_crc(m);
    engram::NpyArray a;
    size_t at = 0;
    if (engram::parse_npy(z->bytes(m), m.size, &a, &at).ok() && at > m.size) __builtin_trap();
  }
  return 0;
}
