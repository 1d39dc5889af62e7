// engramd listening to its peers ([remote] listen): who may talk to it
// (remote/credentials: mutual TLS with certificates from the configured CA,
// plaintext on loopback, and plaintext beyond it only with insecure = true,
// said loudly), the health check, and the peer protocol's Hello. The
// certificates are made here (tests/remote/make_certs.sh).
#include <gtest/gtest.h>

#include "remote/peer.grpc.pb.h"
#include "remote/peer_probe.hpp"
#include "remote/peer_service.hpp"

namespace engram::test {
namespace {

class RemoteSecurity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = make_temp_dir();
    std::string cmd = std::string(ENGRAM_SOURCE_DIR) + "/tests/remote/make_certs.sh " + certs_;
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  static void TearDownTestSuite() {
    std::string cmd = "rm -rf " + certs_;
    if (std::system(cmd.c_str()) != 0) {
    }
  }
  static std::string tls_toml(const std::string& listen) {
    return "[remote]\nlisten = \"" + listen + "\"\ntls_cert = \"" + certs_ + "/a.crt\"\ntls_key = \"" + certs_ +
           "/a.key\"\ntls_ca = \"" + certs_ + "/ca.crt\"\n";
  }
  static std::string certs_;
};
std::string RemoteSecurity::certs_;

TEST_F(RemoteSecurity, APeerWithACertificateFromTheCaIsServed) {
  Daemon d(tls_toml("127.0.0.1:0"));
  std::string address = remote_address(d);
  ASSERT_FALSE(address.empty()) << read_file(d.log());
  Probe p = health_check(address, tls_as(certs_, "b"));
  EXPECT_TRUE(p.ok()) << p.message;
  EXPECT_EQ(p.serving, 1);
  auto [rc, status] = engramctl(d, {"status"});
  EXPECT_EQ(rc, 0);
  EXPECT_NE(status.find("listening on " + address + ": TLS, peers' certificates signed by " + certs_ + "/ca.crt"),
            std::string::npos)
      << status;
}

TEST_F(RemoteSecurity, PeersWithoutACertificateOfTheCaAreRefusedAndOthersStillServed) {
  Daemon d(tls_toml("127.0.0.1:0"));
  std::string address = remote_address(d);
  ASSERT_FALSE(address.empty()) << read_file(d.log());
  struct Case {
    const char* what;
    std::shared_ptr<grpc::ChannelCredentials> creds;
  } cases[] = {
      {"a certificate from another CA", tls_as(certs_, "rogue", "ca")},
      {"no certificate", tls_as(certs_, "")},
      {"plaintext", grpc::InsecureChannelCredentials()},
  };
  for (const Case& c : cases) {
    Probe p = health_check(address, c.creds, 2000);
    EXPECT_EQ(p.code, grpc::StatusCode::UNAVAILABLE) << c.what << ": " << p.message;
    EXPECT_EQ(p.serving, -1) << c.what;
  }
  // A peer that trusts another CA refuses this server in turn.
  EXPECT_FALSE(health_check(address, tls_as(certs_, "b", "other-ca"), 2000).ok());
  Probe good = health_check(address, tls_as(certs_, "b"));
  EXPECT_TRUE(good.ok()) << good.message;
}

TEST_F(RemoteSecurity, PlaintextBeyondLoopbackNeedsInsecureAndIsSaidLoudly) {
  std::string dir = make_temp_dir();
  std::string config = dir + "/engramd.toml";
  std::ofstream(config) << "socket = \"" << dir << "/engram.sock\"\n[remote]\nlisten = \"0.0.0.0:0\"\n";
  std::string log = dir + "/check.log";
  EXPECT_NE(wait_exit(spawn({ENGRAMD_PATH, "--config", config, "--check-config"}, log), 10000), 0);
  std::string why = read_file(log);
  EXPECT_NE(why.find("remote.listen: 0.0.0.0:0 is reachable from other machines, so peers must use TLS"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("insecure = true"), std::string::npos) << why;
  if (std::system(("rm -rf " + dir).c_str()) != 0) {
  }

  Daemon d("[remote]\nlisten = \"0.0.0.0:0\"\ninsecure = true\n");
  std::string address = remote_address(d);
  ASSERT_EQ(address.rfind("0.0.0.0:", 0), 0u) << address << read_file(d.log());
  Probe p = health_check("127.0.0.1:" + address.substr(8), grpc::InsecureChannelCredentials());
  EXPECT_TRUE(p.ok()) << p.message;
  EXPECT_NE(read_file(d.log()).find("INSECURE: plaintext to the network"), std::string::npos) << read_file(d.log());
  auto [rc, status] = engramctl(d, {"status"});
  EXPECT_NE(status.find("INSECURE"), std::string::npos) << status;
  auto [rcj, json] = engramctl(d, {"status", "--json"});
  EXPECT_NE(json.find("\"insecure\": true"), std::string::npos) << json;
}

TEST_F(RemoteSecurity, LoopbackMayBePlaintextAndAServerWithoutRemoteSaysNothing) {
  Daemon d("[remote]\nlisten = \"127.0.0.1:0\"\n");
  std::string address = remote_address(d);
  ASSERT_FALSE(address.empty()) << read_file(d.log());
  EXPECT_TRUE(health_check(address, grpc::InsecureChannelCredentials()).ok());
  EXPECT_NE(engramctl(d, {"status"}).second.find("plaintext (loopback only)"), std::string::npos);

  Daemon quiet("");
  EXPECT_EQ(remote_address(quiet, 0), "");
  EXPECT_EQ(engramctl(quiet, {"status"}).second.find("remote"), std::string::npos);
}

TEST_F(RemoteSecurity, TlsFilesAreCheckedAtStartNamingTheKeyAndFile) {
  struct Case {
    std::string body, expect;
  } cases[] = {
      {"[remote]\nlisten = \"127.0.0.1:0\"\ntls_cert = \"" + certs_ + "/a.crt\"\n",
       "tls_cert, tls_key and tls_ca go together"},
      {"[remote]\nlisten = \"127.0.0.1:0\"\ntls_cert = \"" + certs_ + "/missing.crt\"\ntls_key = \"" + certs_ +
           "/a.key\"\ntls_ca = \"" + certs_ + "/ca.crt\"\n",
       "remote.tls_cert: cannot read " + certs_ + "/missing.crt"},
      {"[remote]\nlisten = \"127.0.0.1:0\"\ntls_cert = \"" + certs_ + "/ca.srl\"\ntls_key = \"" + certs_ +
           "/a.key\"\ntls_ca = \"" + certs_ + "/ca.crt\"\n",
       "is not PEM"},
      {"[remote]\nlisten = \"127.0.0.1\"\n", "is not HOST:PORT (no port)"},
      {"[remote]\nlisten = \"::1:7000\"\n", "an IPv6 address goes in brackets"},
      {"[remote]\nlisten = \"127.0.0.1:70000\"\n", "the port must be 0 (any free one) to 65535"},
      {"[remote]\nlisten = \"127.0.0.1:0\"\ninsecure = true\ntls_cert = \"x\"\ntls_key = \"y\"\ntls_ca = \"z\"\n",
       "choose TLS"},
      {"[remote]\nlisten = \"127.0.0.1:0\"\nport = 7\n", "remote.port: unknown key"},
      {"[remote]\nlisten = \"127.0.0.1:0\"\nmax_streams = 0\n", "remote.max_streams"},
      {"[server]\nmax_connections_per_uid = 8\n[remote]\nlisten = \"127.0.0.1:0\"\nmax_streams = 8\n",
       "which [server] max_connections_per_uid = 8 must exceed"},
  };
  for (const Case& c : cases) expect_refused_config(c.body, c.expect);
}

// Hello: a peer of another protocol is refused naming both numbers; a
// name out of bounds is refused naming the field.
TEST(RemotePeer, HelloChecksTheProtocolAndTheName) {
  Daemon d("[remote]\nlisten = \"127.0.0.1:0\"\n");
  std::string address = remote_address(d);
  ASSERT_FALSE(address.empty()) << read_file(d.log());
  auto stub = engram::peer::v1::Peer::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  auto hello = [&](uint32_t protocol, const std::string& name, engram::peer::v1::HelloReply* out) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    engram::peer::v1::HelloRequest rq;
    rq.set_protocol(protocol);
    rq.set_name(name);
    return stub->Hello(&ctx, rq, out);
  };
  engram::peer::v1::HelloReply reply;
  grpc::Status ok = hello(remote::kPeerProtocol, "actor-host-1", &reply);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(reply.protocol(), remote::kPeerProtocol);
  EXPECT_EQ(reply.version(), engram_version_string());
  EXPECT_NE(read_file(d.log()).find("peer actor-host-1 at ipv4:127.0.0.1:"), std::string::npos) << read_file(d.log());

  grpc::Status other = hello(99, "future-host", &reply);
  EXPECT_EQ(other.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(other.error_message().find("peer speaks engram peer protocol 99, this server " +
                                       std::to_string(remote::kPeerProtocol)),
            std::string::npos)
      << other.error_message();
  for (const std::string& name : {std::string(), std::string(256, 'x')}) {
    grpc::Status bad = hello(remote::kPeerProtocol, name, &reply);
    EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << name.size();
    EXPECT_NE(bad.error_message().find("HelloRequest.name must be 1..255 bytes"), std::string::npos)
        << bad.error_message();
  }
  EXPECT_TRUE(hello(remote::kPeerProtocol, "actor-host-1", &reply).ok());  // the server carries on
}

}  // namespace
}  // namespace engram::test
