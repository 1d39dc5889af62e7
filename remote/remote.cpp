#include "remote/remote.hpp"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "server/log.hpp"
#include "remote/credentials.hpp"
#include "remote/identity.hpp"
#include "remote/mirror_link.hpp"
#include "remote/peer_service.hpp"
#include "remote/shard_link.hpp"
#include "remote/upstream_link.hpp"

#include <malloc.h>
#include <unistd.h>

namespace engram::remote {
namespace {

// How often the health check's answer is brought up to date with
// Server::health, and how long that may take: an orchestrator's probe
// sees a wedged server within about the two.
constexpr int kHealthPeriodMs = 1000;
constexpr int kHealthTimeoutMs = 2000;
// Threads for calls other than Deliver streams (Hello, health checks) and
// for gRPC's own pollers, beside [remote] max_streams.
constexpr int kCallThreadHeadroom = 16;

std::string json_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\';
    if (static_cast<unsigned char>(ch) < 0x20) continue;
    o += ch;
  }
  return o;
}

// One link in engramctl status --json: its ends and state around `counters`
// (its own fields, already JSON).
std::string link_json(const RemoteConfig::Upstream& u, const LinkState& st, const std::string& counters) {
  return "{\"table\": \"" + json_escape(u.table) + "\", \"peer\": \"" + json_escape(u.peer) + "\", \"peer_table\": \"" +
         json_escape(u.peer_table) + "\", \"state\": \"" + json_escape(st.state) + "\", " + counters +
         ", \"reconnects\": " + std::to_string(st.reconnects) + ", \"last_error\": \"" + json_escape(st.last_error) +
         "\"}";
}

// One link's line in engramctl status.
std::string link_line(const char* kind, const char* arrow, const RemoteConfig::Upstream& u, const LinkState& st,
                      const std::string& counters) {
  return "  " + std::string(kind) + u.table + arrow + u.peer + " " + u.peer_table + ": " + st.state + "; " + counters +
         ", " + std::to_string(st.reconnects) + " reconnects" +
         (st.last_error.empty() ? std::string() : "; last error: " + st.last_error) + "\n";
}

}  // namespace

// gRPC allocates every message's buffers afresh, on both sides of a link.
// Left to glibc, buffers of a megabyte (a request's size) are mmapped and
// unmapped each time, or the heap is trimmed after each free: every page
// then faults in again and the kernel clears it. That was half of each
// engramd's CPU per GB forwarded (bench/NOTES.md, "Across machines").
// Kept in the heap instead: process-wide (an embedded server's host too),
// at most kMallocKeepBytes held free per malloc arena; 32 MiB is the
// largest mmap threshold glibc takes.
constexpr int kMallocKeepBytes = 32 << 20;
void keep_message_buffers_in_heap() {
#ifdef __GLIBC__
  static std::once_flag once;
  std::call_once(once, [] {
    mallopt(M_MMAP_THRESHOLD, kMallocKeepBytes);
    mallopt(M_TRIM_THRESHOLD, kMallocKeepBytes);
  });
#endif
}

struct Remote::Impl {
  RemoteConfig config;
  Server* server = nullptr;
  PeerAddress listen;
  std::string address;
  std::string security;
  std::unique_ptr<PeerService> peer_service;  // before grpc_server, which serves it until destroyed
  std::unique_ptr<grpc::Server> grpc_server;
  std::vector<std::unique_ptr<UpstreamLink>> links;  // stopped first
  std::vector<std::unique_ptr<MirrorLink>> mirrors;
  std::vector<std::unique_ptr<ShardLink>> shards;  // of every view, in the config's order
  std::vector<RemoteConfig::Upstream> shard_ends;  // each one's view, peer and table
  std::thread health_thread;
  std::mutex mu;
  std::condition_variable wake;
  bool stopping = false;

  void watch_health() {
    bool serving = true;
    std::unique_lock lock(mu);
    while (!stopping) {
      lock.unlock();
      bool now = server->health(kHealthTimeoutMs).answering;
      lock.lock();
      if (stopping) break;
      if (now != serving) {
        grpc_server->GetHealthCheckService()->SetServingStatus(now);
        serving = now;
      }
      wake.wait_for(lock, std::chrono::milliseconds(kHealthPeriodMs), [&] { return stopping; });
    }
  }

  std::string status(bool json) const {
    std::string out;
    if (json) {
      out = "{\"listen\": \"" + json_escape(address) + "\", \"tls\": " + (config.tls() ? "true" : "false") +
            ", \"insecure\": " + (!config.tls() && !listen.loopback && !address.empty() ? "true" : "false") +
            ", \"security\": \"" + json_escape(security) + "\", \"clashes\": " +
            std::to_string(peer_service ? peer_service->claims().clashes() : 0) + ", \"last_clash\": \"" +
            json_escape(peer_service ? peer_service->claims().last_clash() : std::string()) + "\", \"upstreams\": [";
      for (size_t i = 0; i < links.size(); ++i) {
        UpstreamLink::Stats st = links[i]->stats();
        out += std::string(i ? ", " : "") +
               link_json(config.upstreams[i], st,
                         "\"items_sent\": " + std::to_string(st.items_sent) + ", \"items_answered\": " +
                             std::to_string(st.items_answered) + ", \"bytes_sent\": " + std::to_string(st.bytes_sent) +
                             ", \"backlog\": " + std::to_string(st.backlog) + ", \"duplicates\": " +
                             std::to_string(st.duplicates) + ", \"refused\": " + std::to_string(st.refused));
      }
      out += "], \"mirrors\": [";
      for (size_t i = 0; i < mirrors.size(); ++i) {
        MirrorLink::Stats st = mirrors[i]->stats();
        out += std::string(i ? ", " : "") +
               link_json(config.mirrors[i], st,
                         "\"items\": " + std::to_string(st.items) + ", \"bytes\": " + std::to_string(st.bytes) +
                             ", \"last_sequence\": " + std::to_string(st.last_sequence));
      }
      out += "], \"shards\": [";
      for (size_t i = 0; i < shards.size(); ++i) {
        ShardLink::Stats st = shards[i]->stats();
        out += std::string(i ? ", " : "") +
               link_json(shard_ends[i], st,
                         "\"draws\": " + std::to_string(st.draws) + ", \"bytes\": " + std::to_string(st.bytes) +
                             ", \"mass\": " + number_text(st.mass) + ", \"size\": " + std::to_string(st.size) +
                             ", \"updates\": " + std::to_string(st.updates) + ", \"held\": " +
                             std::to_string(st.held) + ", \"refused\": " + std::to_string(st.refused) +
                             ", \"malformed\": " + std::to_string(st.malformed));
      }
      return out + "]}";
    }
    if (!address.empty()) out = "  remote       listening on " + address + ": " + security + "\n";
    if (peer_service && peer_service->claims().clashes() > 0)
      out += "  clashes      " + std::to_string(peer_service->claims().clashes()) +
             " streams refused for a producer another sender holds; last: " + peer_service->claims().last_clash() + "\n";
    for (size_t i = 0; i < links.size(); ++i) {
      UpstreamLink::Stats st = links[i]->stats();
      out += link_line("upstream     ", " -> ", config.upstreams[i], st,
                       std::to_string(st.items_sent) + " items sent, " + std::to_string(st.items_answered) +
                           " answered, " + std::to_string(st.backlog) + " in flight, " + std::to_string(st.bytes_sent) +
                           " bytes");
    }
    for (size_t i = 0; i < mirrors.size(); ++i) {
      MirrorLink::Stats st = mirrors[i]->stats();
      out += link_line("mirror       ", " <- ", config.mirrors[i], st,
                       std::to_string(st.items) + " items received, " + std::to_string(st.bytes) + " bytes");
    }
    for (size_t i = 0; i < shards.size(); ++i) {
      ShardLink::Stats st = shards[i]->stats();
      out += link_line("shard        ", " <- ", shard_ends[i], st,
                       std::to_string(st.draws) + " draws, mass " + number_text(st.mass) + " in " +
                           std::to_string(st.size) + " items, " + std::to_string(st.updates) + " updates sent" +
                           (st.held ? ", " + std::to_string(st.held) + " held" : std::string()) +
                           (st.refused ? ", " + std::to_string(st.refused) + " refused" : std::string()) +
                           (st.malformed ? ", " + std::to_string(st.malformed) + " malformed" : std::string()));
    }
    return out;
  }
};

Remote::Remote(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<Remote>> Remote::start(const RemoteConfig& c, Server& server) {
  auto impl = std::make_unique<Impl>();
  impl->config = c;
  impl->server = &server;
  if (c.listen.empty() && c.upstreams.empty() && c.mirrors.empty() && c.views.empty()) return std::unique_ptr<Remote>(new Remote(std::move(impl)));
  if (Status s = validate_remote(c); !s.ok()) return s;
  keep_message_buffers_in_heap();
  auto tls = load_tls(c);
  if (!tls.ok()) return tls.status();
  const Identity me = identity_of(c);
  const std::string& name = me.name;
  const uint64_t incarnation = random_u64();  // this process, against a clone of its name
  if (!c.upstreams.empty()) log_info("remote: this server delivers as " + name + " (" + me.note + ")");
  // A link's credentials for its peer, and the words the log gives them.
  struct LinkCredentials {
    std::shared_ptr<grpc::ChannelCredentials> creds;
    std::string security;
  };
  auto credentials_for = [&](const RemoteConfig::Upstream& u, const char* kind) -> Result<LinkCredentials> {
    const std::string where = "table " + u.table + ": " + kind + ": ";
    auto peer = parse_peer_address(u.peer, false);
    if (!peer.ok()) return Status{Errc::invalid_argument, where + peer.status().message()};
    auto creds = channel_credentials(c, *tls, *peer);
    if (!creds.ok()) return Status{creds.status().code(), where + creds.status().message()};
    return LinkCredentials{*creds, security_text(c, *peer)};
  };
  const std::string socket = server.socket_path();
  for (const RemoteConfig::Upstream& u : c.upstreams) {
    auto lc = credentials_for(u, "upstream");
    if (!lc.ok()) return lc.status();
    UpstreamLinkOptions lo;
    static_cast<LinkEnds&>(lo) = {u.table, u.peer, u.peer_table, socket};
    lo.producer = producer_of(name, u.table);
    lo.sender = name;
    lo.incarnation = incarnation;
    impl->links.push_back(std::make_unique<UpstreamLink>(lo, lc->creds));
    log_info("remote: table " + u.table + " delivers to " + u.peer + " table " + u.peer_table + " (" + lc->security + ")");
  }
  for (const RemoteConfig::Upstream& u : c.mirrors) {
    auto lc = credentials_for(u, "mirror");
    if (!lc.ok()) return lc.status();
    impl->mirrors.push_back(std::make_unique<MirrorLink>(LinkEnds{u.table, u.peer, u.peer_table, socket}, lc->creds));
    log_info("remote: table " + u.table + " mirrors " + u.peer + " table " + u.peer_table + " (" + lc->security + ")");
  }
  for (const RemoteConfig::View& v : c.views)
    for (uint32_t i = 0; i < v.shards.size(); ++i) {
      RemoteConfig::Upstream ends{v.table, v.shards[i], v.peer_table};
      auto lc = credentials_for(ends, "shards");
      if (!lc.ok()) return lc.status();
      ShardLinkOptions so;
      static_cast<LinkEnds&>(so) = {v.table, v.shards[i], v.peer_table, socket};
      so.shard = i;
      so.batch = v.batch;
      so.prefetch = v.prefetch;
      impl->shards.push_back(std::make_unique<ShardLink>(so, lc->creds));
      impl->shard_ends.push_back(ends);
      log_info("remote: view " + v.table + " samples shard " + std::to_string(i) + " at " + v.shards[i] + " table " +
               v.peer_table + " (" + lc->security + ")");
    }
  Impl* p = impl.get();
  if (c.listen.empty()) {
    server.set_remote_status([p](bool json) { return p->status(json); });
    return std::unique_ptr<Remote>(new Remote(std::move(impl)));
  }
  auto listen = parse_peer_address(c.listen, true);
  if (!listen.ok()) return Status{Errc::invalid_argument, "remote.listen: " + listen.status().message()};
  impl->listen = *listen;

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen->text(), server_credentials(c, *tls), &port);
  builder.SetMaxReceiveMessageSize(kMaxPeerMessageBytes);
  // A sender whose machine is lost leaves no FIN: pings find its streams
  // dead within about 15 s, so that they free their max_streams places
  // and its producers' claims (a restarted sender is otherwise refused as
  // a clash with its own ghost, remote/producer_claims.hpp).
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 10'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5'000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // gRPC's synchronous server takes a thread per call: past the streams
  // PeerService admits, a few more for Hello and health checks, and new
  // calls beyond are refused by gRPC (RESOURCE_EXHAUSTED), not threads.
  grpc::ResourceQuota quota("engram-remote");
  quota.SetMaxThreads(static_cast<int>(c.max_streams) + kCallThreadHeadroom);
  builder.SetResourceQuota(quota);
  impl->peer_service = std::make_unique<PeerService>(server.socket_path(), c.max_streams);
  builder.RegisterService(impl->peer_service.get());
  impl->grpc_server = builder.BuildAndStart();
  if (!impl->grpc_server || port == 0)
    return Status{Errc::invalid_argument, "remote.listen: cannot listen on " + listen->text() +
                                              ": the address is not this machine's, or the port is in use "
                                              "(ss -ltnp shows who holds it)"};
  PeerAddress bound = *listen;
  bound.port = static_cast<uint16_t>(port);
  impl->address = bound.text();
  impl->security = security_text(c, bound);
  impl->grpc_server->GetHealthCheckService()->SetServingStatus(true);
  impl->health_thread = std::thread([p] { p->watch_health(); });
  server.set_remote_status([p](bool json) { return p->status(json); });
  (listen->loopback || c.tls() ? log_info : log_warn)("remote: listening on " + impl->address + ": " + impl->security);
  return std::unique_ptr<Remote>(new Remote(std::move(impl)));
}

// How long a stop lets the requests of peers' streams be answered.
constexpr int kShutdownGraceMs = 1000;

Remote::~Remote() {
  if (impl_->links.empty() && impl_->mirrors.empty() && impl_->shards.empty() && !impl_->grpc_server) return;
  impl_->server->set_remote_status({});
  impl_->links.clear();  // each lets its request in flight be answered, then stops
  impl_->mirrors.clear();
  impl_->shards.clear();
  if (!impl_->grpc_server) return;
  {
    std::lock_guard lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  impl_->health_thread.join();
  impl_->grpc_server->GetHealthCheckService()->SetServingStatus(false);
  // Streams never end by themselves: their handlers see their peer as gone
  // now, and a Deliver handler waiting for its sender's next request is
  // cancelled at the deadline. Without one, Shutdown waits for every call
  // to end, and a stop with a peer connected waited for ever. What a
  // sender had in a request cut off is sent again and applied once.
  impl_->peer_service->stop();
  impl_->grpc_server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(kShutdownGraceMs));
  impl_->grpc_server->Wait();
  log_info("remote: stopped listening on " + impl_->address);
}

const std::string& Remote::address() const noexcept { return impl_->address; }

}  // namespace engram::remote
