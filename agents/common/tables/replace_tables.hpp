// An agent's learner starts from empty tables: a server that outlived a
// previous run (engramd, --socket) still holds that run's, which would
// mix old items, episodes and parameters into this one.
#pragma once

#include <engram/engram.hpp>

#include <vector>

namespace engram::agents {

// Drops each table of `tables` that exists, by name, then creates it.
inline void replace_tables(api::Client& c, const std::vector<api::TableOptions>& tables) {
  for (const api::TableOptions& t : tables) {
    try {
      c.drop_table(t.name);
    } catch (const api::Error& e) {
      if (e.code() != ENGRAM_E_NOT_FOUND) throw;
    }
    c.create_table(t);
  }
}

}  // namespace engram::agents
