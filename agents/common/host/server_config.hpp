// The engramd.toml(5) text of an agent's embedded server: its arena's
// size classes, [remote] from the command line (--listen, --tls-*,
// --insecure), and the tables an actor machine declares (their links are
// config only: engramctl create-table and the C API take no upstream).
#pragma once

#include <engram/engram.hpp>

#include <cstdint>
#include <string>

#include "agents/common/host/run_options.hpp"

namespace engram::agents {

// One size class of the embedded server's arena.
struct ArenaClass {
  uint64_t block_size;
  uint64_t count;
};

// `s` as a TOML basic string, quoted and escaped: the command line's
// addresses and paths go in as values the server checks by their key,
// never as TOML of the user's making.
std::string toml_string(const std::string& s);

// [arena]: the episodes' class, the agent's chunks and the parameters'
// (`params` floats) class.
std::string arena_toml(ArenaClass chunks, size_t params);

// [remote] for o (listen, TLS, insecure) under the name `name` ("": the
// host's), or "" when o neither listens nor has an upstream.
std::string remote_toml(const RunOptions& o, const std::string& name);

// A [[table]] entry: `t` (its name, size, selectors, max_times_sampled and
// columns; its rate limiter is `limiter`, an inline TOML table such as
// { kind = "queue", size = 64 }, or "" for the default) and `extra` lines
// (e.g. upstream = "HOST:PORT", the value through toml_string).
std::string table_toml(const api::TableOptions& t, const std::string& limiter, const std::string& extra);

}  // namespace engram::agents
