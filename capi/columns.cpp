// C column descriptions (engram_column, engram_compression) to engram's
// signatures: the one conversion every entry point that takes columns
// uses. It checks what the conversion needs (the arrays' bounds); the
// signature itself is checked by whoever uses it: the server for a table
// (Table::check), engram_writer_open for a writer's.
#include "capi/client.hpp"
#include "core/name.hpp"
#include "core/signature.hpp"

namespace engram {

Status columns_from_c(const engram_column* cols, uint32_t n, const engram_compression* comp, std::vector<Column>* out) {
  if (n == 0 || n > kMaxColumns)
    return {Errc::invalid_capacity, "num_columns is " + std::to_string(n) + "; allowed 1.." + std::to_string(kMaxColumns)};
  if (!cols) return {Errc::invalid_argument, "columns is NULL"};
  out->clear();
  for (uint32_t i = 0; i < n; ++i) {
    const engram_column& c = cols[i];
    std::string name;
    if (Status s = bounded_string(c.name, kMaxColumnName - 1, ("column " + std::to_string(i) + "'s name").c_str(), &name);
        !s.ok())
      return s;
    if (c.rank > kMaxRank)
      return {Errc::invalid_argument, "column " + escaped(name) + " has rank " + std::to_string(c.rank) +
                                          "; at most " + std::to_string(kMaxRank)};
    Codec codec = comp ? static_cast<Codec>(comp[i].codec) : Codec::none;
    out->push_back(make_column(name, static_cast<DType>(c.dtype), std::vector<uint32_t>(c.shape, c.shape + c.rank),
                               codec, comp ? comp[i].level : 0));
  }
  return Status::Ok();
}

}  // namespace engram
