// libFuzzer target: arbitrary text as engramd.toml and as an engramctl
// table snippet. Parsing and checking must return a value or an error,
// never crash.
#include <cstdint>
#include <string_view>

#include "core/table.hpp"
#include "server/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto c = engram::parse_config(text, "fuzz");
  (void)c;
  auto t = engram::parse_table_snippet(text, "fuzz");
  if (t.ok()) (void)engram::Table::check(*t);
  return 0;
}
