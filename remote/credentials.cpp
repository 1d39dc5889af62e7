#include "remote/credentials.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace engram::remote {
namespace {

// Peer certificates and keys are a few KiB; a bound keeps a wrong path
// (a disk image, /dev/zero) from being read whole.
constexpr size_t kMaxPemBytes = 1 << 20;

Status read_pem(const char* key, const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return {Errc::invalid_argument, std::string("remote.") + key + ": cannot read " + path + ": " + std::strerror(errno)};
  std::string text(kMaxPemBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxPemBytes)
    return {Errc::invalid_argument, std::string("remote.") + key + ": " + path + " is larger than a PEM file can be (1 MiB)"};
  if (text.find("-----BEGIN ") == std::string::npos)
    return {Errc::invalid_argument, std::string("remote.") + key + ": " + path +
                                        " is not PEM (no -----BEGIN line); convert it with openssl (x509 or pkey -outform PEM)"};
  *out = std::move(text);
  return Status::Ok();
}

}  // namespace

Result<Tls> load_tls(const RemoteConfig& c) {
  Tls t;
  if (!c.tls()) return t;
  if (Status s = read_pem("tls_cert", c.tls_cert, &t.cert); !s.ok()) return s;
  if (Status s = read_pem("tls_key", c.tls_key, &t.key); !s.ok()) return s;
  if (Status s = read_pem("tls_ca", c.tls_ca, &t.ca); !s.ok()) return s;
  return t;
}

std::shared_ptr<grpc::ServerCredentials> server_credentials(const RemoteConfig& c, const Tls& tls) {
  if (!c.tls()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions o(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  o.pem_root_certs = tls.ca;
  o.pem_key_cert_pairs.push_back({tls.key, tls.cert});
  return grpc::SslServerCredentials(o);
}

Result<std::shared_ptr<grpc::ChannelCredentials>> channel_credentials(const RemoteConfig& c, const Tls& tls,
                                                                       const PeerAddress& peer) {
  if (c.tls()) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = tls.ca;
    o.pem_private_key = tls.key;
    o.pem_cert_chain = tls.cert;
    return grpc::SslCredentials(o);
  }
  if (!peer.loopback && !c.insecure)
    return Status{Errc::invalid_argument,
                  "peer " + peer.text() + " is on another machine, so the link needs TLS: set [remote] tls_cert, "
                                          "tls_key and tls_ca (engramd.toml(5)), or insecure = true to send plaintext"};
  return grpc::InsecureChannelCredentials();
}

std::string security_text(const RemoteConfig& c, const PeerAddress& a) {
  if (c.tls()) return "TLS, peers' certificates signed by " + c.tls_ca;
  if (a.loopback) return "plaintext (loopback only)";
  return "INSECURE: plaintext to the network (insecure = true); anyone who reaches " + a.text() +
         " can read and write these tables";
}

}  // namespace engram::remote
