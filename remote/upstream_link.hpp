// One upstream table's link: takes the items of a local table, oldest
// first, and delivers them into a table of a peer over one Deliver stream
// (peer.proto), letting them go only once the peer answered them. The
// local table is the buffer: its capacity and rate limiter hold local
// writers back while the link waits for the peer, and the peer's own rate
// limiter holds the link through the stream's flow control.
//
// Delivery is exactly once across broken links and restarts of either
// side: each item goes with its inserted_seq as sequence and a producer
// fixed by [remote] name and the table's name, the peer's table applies
// each (producer, sequence) once, and after a reconnect the link sends
// again everything not answered. One thread per link (PeerLink).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "remote/peer_link.hpp"

namespace engram::remote {

struct UpstreamLinkOptions : LinkEnds {
  uint64_t producer = 0;   // nonzero, the same across restarts
  std::string sender;      // this server's name among peers (remote/identity.hpp), for the peer's messages
  uint64_t incarnation = 0;  // this server process, nonzero (remote/producer_claims.hpp)
  uint32_t batch_items = 1024;      // items per request at most
  uint32_t batch_bytes = 1 << 20;  // new chunk bytes per request, about (one item's chunks at least): bench/NOTES.md
};

class UpstreamLink {
 public:
  UpstreamLink(UpstreamLinkOptions o, std::shared_ptr<grpc::ChannelCredentials> creds);
  ~UpstreamLink();  // stops: what was not answered stays for the next start only if checkpointed

  struct Stats : LinkState {
    uint64_t items_sent = 0, items_answered = 0, bytes_sent = 0, duplicates = 0, refused = 0;
    uint64_t backlog = 0;  // taken, not yet answered
  };
  Stats stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// The producer of a table's stream: nonzero, from the server's name and the
// table's, so that it stays the same across restarts.
uint64_t producer_of(const std::string& server_name, const std::string& table);

}  // namespace engram::remote
