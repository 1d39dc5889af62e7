// A peer's reply of chunks and of items over them, into a relay of this
// server (capi/relay.h): what a mirror link's and a shard link's replies
// share. The reply is untrusted: a chunk the table refuses, a chunk id
// twice, or a slice that names no chunk of the reply is refused by name.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>

#include "core/status.hpp"
#include "remote/local_table.hpp"
#include "remote/wire_items.hpp"

namespace engram::remote {

// The peer's chunk id -> the relay's, for one reply.
using RelayedChunks = std::unordered_map<uint64_t, uint64_t>;

// Copies the reply's chunks into t's relay, mapping their ids in *held
// (*bytes grows by their sizes), waiting for blocks in slices while
// stopping() is false. Errc::invalid_argument for a chunk refused or an id
// twice, Errc::interrupted once stopping(); throws std::runtime_error when
// the local table went away (its link opens it again).
Status relay_chunks(LocalTable& t, const WireChunks& chunks, const std::function<bool()>& stopping,
                    RelayedChunks* held, uint64_t* bytes);
// An item's slices as the relay's chunk ids, offsets and lengths (arrays
// of kMaxItemChunks); Errc::invalid_argument for none, too many, or one
// over a chunk not in the reply. *n is the number of slices.
Status relay_slices(const WireSlices& slices, const RelayedChunks& held, uint64_t* ids, uint32_t* offsets,
                    uint32_t* lengths, uint32_t* n);
// No item names the reply's chunks from now on: they go back once answered.
void forget_chunks(LocalTable& t, const RelayedChunks& held);

}  // namespace engram::remote
