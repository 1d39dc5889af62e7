// Taken items (capi/take.h) onto the wire: what an upstream link's
// requests and a Follow stream's replies share.
#pragma once

#include <cstdint>
#include <unordered_set>

#include "capi/take.h"
#include "core/status.hpp"
#include "remote/local_table.hpp"
#include "remote/peer.pb.h"

namespace engram::remote {

using WireChunks = google::protobuf::RepeatedPtrField<engram::peer::v1::Chunk>;
using WireItems = google::protobuf::RepeatedPtrField<engram::peer::v1::Item>;
using WireSlices = google::protobuf::RepeatedPtrField<engram::peer::v1::Slice>;

// The slices of item `it` of table t appended to `slices`, each chunk they
// name that `sent` (the stream's chunks, or one reply's) does not hold
// appended to `chunks`, copied as sealed with its unused room zeroed;
// *bytes grows by their size. A chunk that fails its check (a local
// writer rewrote it after sealing) is the Status returned, and `chunks`
// is as it was but for whole chunks of earlier slices: the caller drops
// the item whose slices these are.
Status add_wire_slices(const engram_private_item& it, const LocalTable& t, std::unordered_set<uint64_t>* sent,
                       WireChunks* chunks, WireSlices* slices, uint64_t* bytes);

// Item `it` of table t as a wire Item appended to `items` (its sequence
// inserted_seq + 1: never 0), each chunk it names that `sent` (the
// stream's chunks, or one reply's) does not hold appended to `chunks`,
// copied as sealed with its unused room zeroed; *bytes grows by their
// size. A chunk that fails its check (a local writer rewrote it after
// sealing) is the Status returned: `items`, and that chunk, are as they
// were (chunks of the item's earlier slices stay: they are whole).
Status add_wire_item(const engram_private_item& it, const LocalTable& t, std::unordered_set<uint64_t>* sent,
                     WireChunks* chunks, WireItems* items, uint64_t* bytes);

}  // namespace engram::remote
