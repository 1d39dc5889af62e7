// A peer as the remote tests see one: a gRPC channel to an engramd's
// [remote] address with chosen credentials, and the standard health check
// over it (grpc.health.v1.Health/Check, called without its generated stub:
// an empty request, and a response whose field 1 is the status).
#pragma once

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include "daemon_fixture.hpp"

namespace engram::test {

// mTLS as a peer holding `name`.crt/.key from `dir` that trusts `ca`.crt;
// an empty name: TLS without a certificate of its own.
inline std::shared_ptr<grpc::ChannelCredentials> tls_as(const std::string& dir, const std::string& name,
                                                        const std::string& ca = "ca") {
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = read_file(dir + "/" + ca + ".crt");
  if (!name.empty()) {
    o.pem_private_key = read_file(dir + "/" + name + ".key");
    o.pem_cert_chain = read_file(dir + "/" + name + ".crt");
  }
  return grpc::SslCredentials(o);
}

struct Probe {
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  std::string message;
  int serving = -1;  // the health status: 1 SERVING, 2 NOT_SERVING
  bool ok() const { return code == grpc::StatusCode::OK; }
};

inline Probe health_check(const std::string& address, const std::shared_ptr<grpc::ChannelCredentials>& creds,
                          int timeout_ms = 5000) {
  auto channel = grpc::CreateChannel(address, creds);
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  // HealthCheckRequest { service = "" } is zero bytes, but a buffer
  // without a slice is no message at all to gRPC.
  grpc::Slice nothing(std::string{});
  grpc::ByteBuffer request(&nothing, 1), response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status s) { done.set_value(s); });
  grpc::Status s = done.get_future().get();
  Probe p{s.error_code(), s.error_message(), -1};
  std::vector<grpc::Slice> slices;
  if (s.ok() && response.Dump(&slices).ok()) {
    std::string bytes;
    for (auto& sl : slices) bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
    // HealthCheckResponse { status = 1 }: tag 0x08, then the enum as a varint.
    p.serving = bytes.size() == 2 && bytes[0] == 0x08 ? bytes[1] : (bytes.empty() ? 0 : -2);
  }
  return p;
}

// A loopback port free at this moment, for a server that must come back
// on the same address (a restarted receiver): bound and let go.
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t n = sizeof a;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

// meta[0] of every item of a table of kProcColumns' shape (obs uint8
// [10, 30], meta int64 [2]) whose items' obs bytes are meta[0] & 0xff and
// meta[1] is 7, drawn one at a time in FIFO order (each once: the tables
// here have max_times_sampled 1), until none is left.
inline std::vector<int64_t> drain_items(const std::string& socket, const char* table) {
  engram_client* c = connect_c(socket);
  engram_table* t = nullptr;
  EXPECT_EQ(engram_table_open(c, table, &t), ENGRAM_OK) << engram_last_error();
  std::vector<int64_t> out;
  for (;;) {
    engram_sample_options so;
    engram_sample_options_init(&so);
    so.batch_size = 1;
    so.num_steps = 1;
    so.timeout_ms = 0;
    uint8_t obs[300];
    int64_t meta[2];
    void* bufs[2] = {obs, meta};
    uint32_t n = 0;
    if (engram_sample(t, &so, bufs, nullptr, &n) != ENGRAM_OK || n == 0) break;
    EXPECT_EQ(obs[299], static_cast<uint8_t>(meta[0] & 0xff));
    EXPECT_EQ(meta[1], 7);
    out.push_back(meta[0]);
  }
  engram_table_close(t);
  engram_disconnect(c);
  return out;
}

// A writer of kProcColumns' shape (obs uint8 [10, 30], meta int64 [2]) that
// writes items whose meta[0] counts from `first`, of priority 1, or of
// priority 1 + meta[0] with by_meta (distinct priorities, for shards).
inline void write_items(const std::string& socket, const char* table, int64_t first, int n, uint32_t chunk_length = 8,
                        bool by_meta = false) {
  engram_client* c = connect_c(socket);
  ASSERT_NE(c, nullptr);
  engram_table* t = nullptr;
  ASSERT_EQ(engram_table_open(c, table, &t), ENGRAM_OK) << engram_last_error();
  engram_column cols[2] = {{"obs", ENGRAM_UINT8, 2, {10, 30}}, {"meta", ENGRAM_INT64, 1, {2}}};
  engram_writer_options wo;
  engram_writer_options_init(&wo);
  wo.columns = cols;
  wo.num_columns = 2;
  wo.chunk_length = chunk_length;
  engram_writer* w = nullptr;
  ASSERT_EQ(engram_writer_open(c, &wo, &w), ENGRAM_OK) << engram_last_error();
  for (int i = 0; i < n; ++i) {
    uint8_t obs[300];
    int64_t meta[2] = {first + i, 7};
    std::memset(obs, static_cast<int>((first + i) & 0xff), sizeof obs);
    const void* step[2] = {obs, meta};
    ASSERT_EQ(engram_writer_append(w, step), ENGRAM_OK) << engram_last_error();
    ASSERT_EQ(engram_writer_create_item(w, t, 1, by_meta ? 1.0 + double(first + i) : 1.0), ENGRAM_OK)
        << engram_last_error();
  }
  ASSERT_EQ(engram_writer_flush(w, 20000), ENGRAM_OK) << engram_last_error();
  engram_writer_close(w);
  engram_table_close(t);
  engram_disconnect(c);
}

// A table's info, as engram_table_info_get gives it (zeros if it cannot).
inline engram_table_info table_info(const std::string& socket, const char* table) {
  engram_table_info i;
  engram_table_info_init(&i);
  engram_client* c = connect_c(socket);
  if (!c) return i;
  if (engram_table_info_get(c, table, &i) != ENGRAM_OK) engram_table_info_init(&i);
  engram_disconnect(c);
  return i;
}
inline uint64_t inserts(const std::string& socket, const char* table) { return table_info(socket, table).inserts; }
inline uint64_t samples(const std::string& socket, const char* table) { return table_info(socket, table).samples; }
// Updates and deletes of items gone.
inline uint64_t stale_requests(const std::string& socket, const char* table) {
  return table_info(socket, table).stale_requests;
}

inline bool wait_for_inserts(const std::string& socket, const char* table, uint64_t n, int ms) {
  for (int waited = 0; waited < ms; waited += 20) {
    if (inserts(socket, table) >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// meta[0] of one item sampled from a table of kProcColumns' shape (its
// newest, for a table of max_size 1), or -1 if it is empty.
inline int64_t newest_meta(const std::string& socket, const char* table) {
  engram_client* c = connect_c(socket);
  if (!c) return -1;
  engram_table* t = nullptr;
  int64_t meta[2] = {-1, 0};
  if (engram_table_open(c, table, &t) == ENGRAM_OK) {
    engram_sample_options so;
    engram_sample_options_init(&so);
    so.batch_size = 1;
    so.num_steps = 1;
    so.timeout_ms = 0;
    uint8_t obs[300];
    void* bufs[2] = {obs, meta};
    uint32_t n = 0;
    if (engram_sample(t, &so, bufs, nullptr, &n) != ENGRAM_OK || n == 0) meta[0] = -1;
    engram_table_close(t);
  }
  engram_disconnect(c);
  return meta[0];
}

// engramctl's output (stdout and stderr) and exit status, run against d.
// Starts engramd on `body` (with a socket of its own) and expects it to
// refuse the config at start-up (exit 1), its log saying `expect`.
inline void expect_refused_config(const std::string& body, const std::string& expect) {
  std::string dir = make_temp_dir();
  std::string config = dir + "/engramd.toml";
  std::ofstream(config) << "socket = \"" << dir << "/engram.sock\"\n" << body;
  std::string log = dir + "/engramd.log";
  pid_t pid = spawn({ENGRAMD_PATH, "--config", config}, log);
  EXPECT_EQ(wait_exit(pid, 10000), 1) << body;
  EXPECT_NE(read_file(log).find(expect), std::string::npos) << body << "\n" << read_file(log);
  if (std::system(("rm -rf " + dir).c_str()) != 0) {
  }
}

inline std::pair<int, std::string> engramctl(const Daemon& d, std::vector<std::string> args) {
  args.insert(args.begin(), {ENGRAMCTL_PATH, "--socket", d.socket()});
  std::string out = d.file("engramctl.out");
  std::remove(out.c_str());
  int rc = wait_exit(spawn(args, out), 10000);
  return {rc, read_file(out)};
}

// The address d's [remote] listens on, its port filled in, from
// `engramctl status --json`; "" if it does not listen within `wait_ms`
// (engramd's control socket answers before [remote] listens: readiness,
// under systemd, waits for both).
inline std::string remote_address(const Daemon& d, int wait_ms = 5000) {
  for (int waited = 0;; waited += 20) {
    std::string out = engramctl(d, {"status", "--json"}).second;
    size_t at = out.find("\"listen\": \"");
    if (at != std::string::npos) {
      at += 11;
      return out.substr(at, out.find('"', at) - at);
    }
    if (waited >= wait_ms) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace engram::test
