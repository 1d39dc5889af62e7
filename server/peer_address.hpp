// A peer's address as engramd.toml writes it ([remote] listen, a table's
// upstream): "HOST:PORT", HOST a name, an IPv4 address, or an IPv6 address
// in brackets. Plain text here: the daemon opens no network socket; remote/
// hands the address to gRPC as written.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.hpp"

namespace engram {

struct PeerAddress {
  std::string host;  // without the brackets of an IPv6 address
  uint16_t port = 0;
  // Only this machine can reach it: "localhost", 127.0.0.0/8, ::1. A name
  // other than localhost is not loopback: it may resolve to anywhere. What
  // is not loopback carries data off the machine, so it needs TLS or an
  // explicit insecure (remote/credentials.hpp).
  bool loopback = false;
  std::string text() const;  // "HOST:PORT", brackets restored
};

// Errc::invalid_argument saying what is wrong and what is allowed. Port 0
// (any free port, said in the log) only where `any_port` (listening).
Result<PeerAddress> parse_peer_address(std::string_view s, bool any_port);

}  // namespace engram
