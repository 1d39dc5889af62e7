// An agent's learner starts from empty tables: a server that outlived a
// previous run (engramd, --socket) still holds that run's, which would
// mix old items, episodes and parameters into this one. A learner that
// reconnects to its server within a run keeps what the server kept
// (restored from its checkpoint) and creates only what it lost.
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

// Creates each table of `tables` that does not exist, by name.
inline void ensure_tables(api::Client& c, const std::vector<api::TableOptions>& tables) {
  for (const api::TableOptions& t : tables) {
    try {
      c.create_table(t);
    } catch (const api::Error& e) {
      if (e.code() != ENGRAM_E_EXISTS) throw;
    }
  }
}

}  // namespace engram::agents
