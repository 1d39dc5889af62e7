// libFuzzer target: arbitrary bytes as a checkpoint MANIFEST. Reading must
// return a manifest or an error, never crash or allocate without bound; what
// it accepts must be safe to hand to Table::check and Table::restore.
//
// The harness rewrites the trailing checksum before parsing (when there is
// room for one): otherwise nearly every mutation would stop at the checksum
// and the parser behind it would go unexplored. The seed
// (corpus/manifest/two-tables) is a valid manifest of a FIFO and a max-heap
// table with compressed columns.
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/checkpoint_format.hpp"
#include "core/table.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> b(data, data + size);
  if (b.size() >= 8) {
    uint64_t h = engram::checksum(b.data(), b.size() - 8);
    std::memcpy(b.data() + b.size() - 8, &h, 8);
  }
  auto m = engram::decode_manifest(b.data(), b.size());
  if (!m.ok()) return 0;
  for (const engram::TableState& t : m->tables) {
    auto checked = engram::Table::check(t.options);
    if (!checked.ok() || t.options.capacity > 4096) continue;
    size_t need = engram::Table::bytes_needed(*checked);
    std::vector<char> mem(need + 64);
    char* at = mem.data() + (64 - reinterpret_cast<uintptr_t>(mem.data()) % 64) % 64;  // tables are 64-aligned
    auto table = engram::Table::format(at, need, *checked);
    if (table.ok()) (void)table->restore(t);
  }
  return 0;
}
