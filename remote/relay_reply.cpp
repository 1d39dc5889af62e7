#include "remote/relay_reply.hpp"

#include <stdexcept>
#include <string>

#include "core/table.hpp"

namespace engram::remote {
namespace {
constexpr int32_t kRelaySliceMs = 100;  // a wait for blocks before the link looks around
}

Status relay_chunks(LocalTable& t, const WireChunks& chunks, const std::function<bool()>& stopping,
                    RelayedChunks* held, uint64_t* bytes) {
  for (const peer::v1::Chunk& c : chunks) {
    uint64_t id = 0;
    for (;;) {
      int e = engram_private_relay_chunk(t.relay, c.data().data(), c.data().size(), kRelaySliceMs, &id);
      if (e == ENGRAM_OK) break;
      if (e == ENGRAM_E_DISCONNECTED || e == ENGRAM_E_CLOSED) throw std::runtime_error("this server's table went away");
      if (e != ENGRAM_E_TIMEOUT && e != ENGRAM_E_NOMEM && e != ENGRAM_E_LIMIT)
        return {Errc::invalid_argument, "a chunk the table refuses: " + std::string(engram_last_error())};
      if (stopping()) return {Errc::interrupted, "the link stops"};
    }
    if (!held->emplace(c.id(), id).second) {
      (void)engram_private_relay_forget(t.relay, id);
      return {Errc::invalid_argument, "chunk id " + std::to_string(c.id()) + " twice in one reply"};
    }
    *bytes += c.data().size();
  }
  return Status::Ok();
}

Status relay_slices(const WireSlices& slices, const RelayedChunks& held, uint64_t* ids, uint32_t* offsets,
                    uint32_t* lengths, uint32_t* n) {
  if (slices.empty() || slices.size() > static_cast<int>(kMaxItemChunks))
    return {Errc::invalid_argument, "an item of " + std::to_string(slices.size()) + " slices (1.." +
                                        std::to_string(kMaxItemChunks) + ")"};
  for (int k = 0; k < slices.size(); ++k) {
    auto h = held.find(slices[k].chunk());
    if (h == held.end()) return {Errc::invalid_argument, "an item over a chunk not in its reply"};
    ids[k] = h->second;
    offsets[k] = slices[k].offset();
    lengths[k] = slices[k].length();
  }
  *n = static_cast<uint32_t>(slices.size());
  return Status::Ok();
}

void forget_chunks(LocalTable& t, const RelayedChunks& held) {
  for (const auto& [peer_id, id] : held) (void)engram_private_relay_forget(t.relay, id);
}

}  // namespace engram::remote
