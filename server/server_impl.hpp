// The state of a running server, shared by the files that make it up:
// server.cpp (start-up, the shared segments, the control loop, reload,
// health, shutdown), connections.cpp (admitting, refusing and timing out
// connections within the descriptors the process has) and
// control_protocol.cpp (one handler per control message). Tables live in the TableRegistry, checkpoints are the
// CheckpointScheduler's, and who may connect is AccessControl's.
//
// Threads: the control thread owns everything here but the few fields
// marked otherwise; each table's owner thread owns its table
// (table_owner.hpp); the checkpoint worker touches only what the
// scheduler hands it.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/channel.hpp"
#include "core/chunk_arena.hpp"
#include "core/control_message.hpp"
#include "core/futex.hpp"
#include "core/shm.hpp"
#include "server/access_control.hpp"
#include "server/checkpoint_scheduler.hpp"
#include "server/id_pool.hpp"
#include "server/log.hpp"
#include "server/server.hpp"
#include "server/table_registry.hpp"

namespace engram {

// A control message's payload as a T: exactly sizeof(T) bytes, copied out
// (the handlers' one check of a fixed-size payload).
template <typename T>
bool read_payload(const std::vector<char>& p, T* out) {
  if (p.size() != sizeof(T)) return false;
  std::memcpy(out, p.data(), sizeof(T));
  return true;
}
inline const Status kMalformed{Errc::invalid_argument, "malformed request"};

// A table's items at one moment with their chunks pinned, for the client
// that asked to copy them out (table_export.cpp; ExportBeginReply says why).
struct TableExport {
  std::vector<ItemState> items;  // slot order; first_ref indexes refs
  std::vector<ChunkRef> refs;    // arena block and generation
  std::vector<BlockRef> pinned;  // one reference each, until released
  uint64_t steps = 0;
  int64_t last_ns = 0;           // the client's last export request
  bool lapsed = false;           // idle too long: pins released
};

// One connection on the control socket.
struct Client {
  int fd = -1;
  uint32_t id = 0;  // arena client id, after hello
  ucred cred{};
  bool attached = false;
  int64_t hello_deadline_ns = 0;  // closed if still not attached then
  // By table id: the daemon's mapping of each channel the client opened
  // (its descriptor went to the client with the open reply).
  std::map<uint32_t, ShmSegment> channels;
  std::unique_ptr<TableExport> table_export;  // export_begin's, until export_end
};

struct Server::Impl {
  ServerConfig config;
  std::string prefix;  // of the segments' names
  AccessControl access;
  int listen_fd = -1;
  int wake_fd = -1;  // eventfd: stop, reload, probes, a finished checkpoint
  std::thread thread;
  std::atomic<bool> stopping{false};
  std::atomic<bool> stopped{false};
  Server::Progress progress;  // may be empty
  int64_t started_ns = monotonic_ns();

  // Requests from other threads, taken by the control thread when woken.
  std::mutex requests_mu;
  std::unique_ptr<ServerConfig> pending_reload;
  struct HealthProbe {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    Server::Health h;
    int timeout_ms = 0;
  };
  std::vector<std::shared_ptr<HealthProbe>> pending_probes;
  Server::RemoteStatus remote_view;  // under requests_mu; may be empty

  ShmSegment arena_seg, bells_seg;
  // The arena's allocation state: in this process's memory, out of every
  // client's reach (ChunkArena).
  // The allocator's private state: an anonymous mapping, so that the
  // block states of classes not yet grown are zero pages, costing nothing.
  struct MetaMapping {
    void* addr = nullptr;
    size_t size = 0;
    ~MetaMapping();
  } arena_meta;
  ArenaGrowth arena_growth;  // outlives `arena`, which points at it; max_bytes 0: no growth
  int64_t next_trim_ns = 0;  // when trim_arena next gives the holes' pages back
  ChunkArena arena;
  BellsHeader* bells = nullptr;
  IdPool arena_ids{1, kArenaMaxClients};
  std::unique_ptr<TableRegistry> tables;
  std::unique_ptr<CheckpointScheduler> checkpoints;
  uint32_t export_arena_id = 0;  // releases exports' pins (control thread only)
  std::map<int, Client> clients;  // by fd, attached or not

  // connections.cpp's state.
  uint32_t max_connections = 0;  // in force: config.max_connections fitted to the descriptors
  std::map<uid_t, uint32_t> connections_by_uid;  // attached clients (said hello) by uid
  uint32_t startups = 0;                          // connections that have not said hello yet
  uint64_t refused = 0;          // refused, or closed for want of a hello, since start
  int reserve_fd = -1;           // given up to accept-and-refuse when out of descriptors
  int64_t accept_paused_until_ns = 0;
  RepeatedLog accept_errors, refusals, silences;
  RepeatedLog arena_waits;  // grants refused for want of a free block: writers waiting
  RepeatedLog trim_failures;  // trim_arena's refusals (a kernel without hole punching)
  // A client whose grants find their class empty: since when, and the
  // class's free list as it was then (ChunkArena::free_list_word), so that
  // a wait in which no block of the class came or went is seen.
  struct BlockWait {
    int64_t last_ns, since_ns;
    uint32_t size_class;
    uint64_t list_word;
  };
  std::map<uint32_t, BlockWait> waiting_for_blocks;

  ~Impl();

  // --- server.cpp: start-up, segments, the loop, shutdown -----------------
  Status init(const ServerConfig& c);
  Status claim_socket_path();
  Status make_arena(const ArenaPlan& plan);
  int trim_poll_ms() const;
  void trim_arena();
  Status listen_socket();
  void control_loop();
  void apply_reload();
  void answer_probes();
  void shutdown();
  void wake();

  // --- connections.cpp: admission and descriptors --------------------------
  // Fits max_connections to RLIMIT_NOFILE and takes the reserve descriptor.
  Status fit_descriptors();
  // Accepts every pending connection: admitted, or refused with a reply
  // that says which limit (and closed).
  void accept_clients();
  // Why a new connection is refused (the total cap); "" to admit it.
  std::string admission_refusal() const;
  // Why a hello from `uid` is refused (its attached clients' cap); "".
  std::string uid_refusal(uid_t uid) const;
  // At max_startups connections without a hello, closes the oldest.
  void make_room_for_startup();
  // Answers a connection's hello with a refusal and closes it.
  void refuse(int fd, Errc code, const std::string& why);
  // Closes every connection whose hello deadline has passed.
  void close_silent();
  // Milliseconds until close_silent, a paused accept or a log summary has
  // work (-1: none).
  int connections_poll_ms() const;
  // This process's open descriptors.
  static uint32_t fds_open();
  static uint32_t fds_limit();

  // --- control_protocol.cpp: the messages of the control socket -----------
  // Serves one message; false when the client is gone or must go.
  bool serve(Client& c);
  bool hello(Client& c, const std::vector<char>& p);
  bool create_table(Client& c, const std::vector<char>& p);
  bool open_table(Client& c, const std::vector<char>& p);
  bool close_table(Client& c, const std::vector<char>& p);
  bool named_table_request(Client& c, ControlType type, const std::vector<char>& p);
  bool list_items(Client& c, const std::vector<char>& p);
  bool set_rate_limiter(Client& c, const std::vector<char>& p);
  bool status(Client& c);
  bool remote_status(Client& c, const std::vector<char>& p);
  bool grant_blocks(Client& c, const std::vector<char>& p);
  // Errc::arena_exhausted when client c's wait for blocks of class k can
  // never end by itself (see grant_blocks), else Ok.
  Status wait_without_end(Client& c, uint32_t k);

  // --- table_export.cpp: a table's items pinned for a client to copy out ---
  bool export_begin(Client& c, const std::vector<char>& p);
  bool export_items(Client& c, const std::vector<char>& p);
  bool export_end(Client& c);
  // Drops the export's pins (once); at export_end, at the client's end,
  // and when it lapses.
  void release_export(TableExport& x);
  // Releases every export idle for kExportIdleMs.
  void lapse_exports();
  // Milliseconds until lapse_exports has work (-1: none).
  int exports_poll_ms() const;
  bool return_blocks(Client& c, const std::vector<char>& p);
  bool reply(Client& c, ControlType t, const Status& s, const void* payload = nullptr, size_t size = 0);
  // Drops a table and closes every client's channel to it.
  void drop_table(const std::string& name);
  // Everything the client held comes back: its channels' pins and holds,
  // its reserved blocks.
  void disconnect(Client& c);
  std::string who(const Client& c) const;
};

}  // namespace engram
