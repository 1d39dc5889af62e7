// One mirrored table's link: follows a table of a peer (a Follow stream,
// peer.proto) and inserts each newer item it sends into the local table,
// whose FIFO remover keeps the newest. For parameters: each version
// crosses the network once per machine, however many local actors read
// it. Nothing is owed across a break: after a reconnect the peer sends its
// newest items again, and a version missed while the link was down is one
// no actor needs any more. One thread per link (PeerLink).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "remote/peer_link.hpp"

namespace engram::remote {

using MirrorLinkOptions = LinkEnds;

class MirrorLink {
 public:
  MirrorLink(MirrorLinkOptions o, std::shared_ptr<grpc::ChannelCredentials> creds);
  ~MirrorLink();

  struct Stats : LinkState {
    uint64_t items = 0, bytes = 0;  // received and inserted
    uint64_t last_sequence = 0;     // of the newest item received (the peer's numbering)
  };
  Stats stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace engram::remote
