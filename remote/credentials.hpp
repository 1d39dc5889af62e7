// Who may talk to this server over the network, and how it proves itself
// to its peers: gRPC credentials from [remote]'s TLS files.
//
// The rule (engramd.toml(5), engram(7)): loopback may be plaintext;
// anything else is mutual TLS, each side's certificate signed by the CA the
// other trusts (tls_ca), or plaintext with `insecure = true`, which the log
// and engramctl status say loudly. A peer without a valid certificate never
// gets past the handshake.
#pragma once

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "core/status.hpp"
#include "server/config.hpp"
#include "server/peer_address.hpp"

namespace engram::remote {

// The PEM files of [remote], read once at start: a missing or unreadable
// file is an error naming its key and path, not a handshake that fails
// later.
struct Tls {
  std::string cert, key, ca;
};
Result<Tls> load_tls(const RemoteConfig& c);

// For the listening side: TLS that requires and verifies the peer's
// certificate, or plaintext (allowed by validate_remote).
std::shared_ptr<grpc::ServerCredentials> server_credentials(const RemoteConfig& c, const Tls& tls);

// For a link to `peer`: TLS presenting this server's certificate, or
// plaintext where the peer is loopback or insecure is set; otherwise an
// error saying how to fix it.
Result<std::shared_ptr<grpc::ChannelCredentials>> channel_credentials(const RemoteConfig& c, const Tls& tls,
                                                                       const PeerAddress& peer);

// "TLS, peers' certificates from CA FILE", "plaintext (loopback)" or
// "INSECURE: plaintext ...": what the log and engramctl status say.
std::string security_text(const RemoteConfig& c, const PeerAddress& a);

}  // namespace engram::remote
