// engramd's configuration: a TOML file (see man/man5/engramd.toml.5),
// overridden by command-line flags. Parsing never throws; every error names
// the key and what is allowed there.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/channel.hpp"
#include "core/arena_blocks.hpp"
#include "core/status.hpp"
#include "core/shard_split.hpp"
#include "core/table.hpp"
#include "server/checkpointer.hpp"

namespace engram {

inline constexpr const char* kDefaultSocket = "/run/engram/engram.sock";
inline constexpr size_t kMaxSocketPath = 107;  // bytes: sockaddr_un's sun_path less its NUL
// Connections one server may hold at once, whatever the config says: each
// is a descriptor and an entry the control thread polls.
inline constexpr uint32_t kMaxConnections = 65536;
// Deliver streams one server may serve at once ([remote] max_streams):
// each holds a gRPC thread, a connection and up to kMaxHeldChunks blocks.
inline constexpr uint32_t kMaxPeerStreams = 1024;
// The most items a mirrored table keeps of its peer's newest (its
// max_size): mirrors are for parameters, the newest version or few, and
// each look of the peer's stream copies them all.
inline constexpr uint32_t kMaxMirrorItems = 64;
// A view over shards ([[table]] shards; its peers at most kMaxShards,
// core/shard_split.hpp): the bounds of the draws one request for a
// shard's draws asks for (shard_batch; the Sample stream's own bound,
// remote/shard_sample.hpp, is at least it) and of the requests kept in
// flight per shard (shard_prefetch).
inline constexpr uint32_t kMaxShardBatch = 256;
inline constexpr uint32_t kMaxShardPrefetch = 64;
// The defaults: a batch of draws a request (what one learner batch of 64
// over two shards roughly asks of each, twice), two requests in flight.
inline constexpr uint32_t kDefaultShardBatch = 64;
inline constexpr uint32_t kDefaultShardPrefetch = 2;
// The keys a view remembers, newest first, for the updates of the items
// it handed out (about 64 bytes each): an update of one handed out longer
// ago is stale. A learner updates a batch within a few batches.
inline constexpr size_t kShardRoutes = size_t{1} << 18;

// [remote]: this server's peers over gRPC (remote/, engramd.toml(5)).
// Plain data: the daemon opens no network socket; remote/ reads these.
struct RemoteConfig {
  std::string listen;  // "HOST:PORT" (peer_address.hpp) to serve peers; "" = off
  // PEM files: this server's certificate and key (shown to peers, both
  // ways), and the CA that must have signed every peer's. All or none.
  std::string tls_cert, tls_key, tls_ca;
  // Plaintext beyond loopback, which otherwise needs TLS: allowed, and
  // said loudly (the log, engramctl status).
  bool insecure = false;
  // This server among its peers: names its upstream streams (the
  // producer of each); "" = the host name and an id of this installation
  // (remote/identity.hpp).
  std::string name;
  // Where the id of that default name is kept: the [checkpoint] dir
  // (the parser fills it), "" for none.
  std::string state_dir;
  // Deliver streams served at once: each is a client of this server, of
  // its own uid, so the bound sits below [server] max_connections_per_uid.
  uint32_t max_streams = 64;
  // [[table]] upstream = "HOST:PORT" (and upstream_table): the tables
  // whose items this server delivers to a peer's table.
  struct Upstream {
    std::string table, peer, peer_table;
    bool operator==(const Upstream&) const = default;
  };
  std::vector<Upstream> upstreams;
  // [[table]] mirror = "HOST:PORT" (and mirror_table): the tables that
  // keep the newest items of a peer's table.
  std::vector<Upstream> mirrors;
  // [[table]] shards = ["HOST:PORT", ...] (and shard_table, shard_batch,
  // shard_prefetch): the tables that are views over a table on each of
  // several peers (server/table_owner.hpp, make_view).
  struct View {
    std::string table, peer_table;
    std::vector<std::string> shards;  // HOST:PORT each
    uint32_t batch = kDefaultShardBatch, prefetch = kDefaultShardPrefetch;
    bool operator==(const View&) const = default;
  };
  std::vector<View> views;
  // The view named `table`, or nullptr.
  const View* view_of(const std::string& table) const {
    for (const View& v : views)
      if (v.table == table) return &v;
    return nullptr;
  }
  bool tls() const { return !tls_cert.empty(); }
  bool operator==(const RemoteConfig&) const = default;
};

// max(256, 4 * the CPUs this process may run on): the default
// [server] max_connections_per_uid (max_connections is twice it).
uint32_t default_connections_per_uid();

struct ServerConfig {
  std::string socket_path = kDefaultSocket;
  bool socket_given = false;  // the config's own `socket` key (configure() ranks it above $ENGRAM_SOCKET)
  std::string group;       // owner group of socket and segments; "" = the server's own
  std::string shm_prefix;  // segment name prefix; "" = derived from the socket path
  ArenaConfig arena;       // empty = arena_for_tables(default_arena(), tables)
  uint64_t arena_grow_to = 0;  // [arena] grow_to, bytes; 0 = not given (see plan_arena)
  // [server]: the control socket's connections, said hello or not. Each
  // holds one of the server's descriptors, so a flood of them is bounded
  // here; start-up lowers max_connections to what the descriptor limit fits.
  // Defaults fit a big actor machine (an actor per core, two clients
  // each, and its peers' streams): default_connections_per_uid().
  uint32_t max_connections = 2 * default_connections_per_uid();
  // Counted at hello: a connection that has not said hello yet counts
  // against max_startups, so that a silent flood cannot refuse a user's
  // next client.
  uint32_t max_connections_per_uid = default_connections_per_uid();
  // Connections not yet said hello, at once; past it, the oldest of them
  // is closed to admit a new one (as sshd's MaxStartups does).
  uint32_t max_startups = 64;
  uint32_t hello_timeout_ms = 5000;  // a connection still silent then is closed
  // [client]
  uint32_t ring_records = 1024;  // per channel ring; also the largest sample batch
  // Of each arena size class, the share one client may hold reserved
  // (being written, or spare): see client_block_limit.
  double max_reserved_share = 0.25;
  std::vector<CheckedTableOptions> tables;  // created at start (after a restore, those it did not bring back)
  CheckpointConfig checkpoint;       // [checkpoint]
  RemoteConfig remote;               // [remote]
};

// The arena of a server without [arena]: 232 MiB in nine size classes,
// 256 B to 8 MiB, doubling (and more) from one to the next, so that a chunk
// wastes less than half its block: a one-step chunk of 400 B takes a
// block of 512 B (it took 4 KiB when the smallest class was that), 140 B
// one of 256 B. Each class up to 4 KiB has 32 MiB of blocks: 65,536
// one-step items of 400 B, 131,072 of 140 B (bench/NOTES.md, "Memory per
// item"). Why classes and not chunks packed several to a block: see
// docs/ARCHITECTURE.md, "The arena".
ArenaConfig default_arena();

// `base` with each class given blocks enough for `tables` at their
// max_size in one-step chunks (chunk_length 1, the writers' default): the
// tables of a config sized into a server without [arena]. The arena stays
// within a quarter of the machine's memory; a table that does not fit then
// keeps what is left, and arena_fit says so when it is made.
ArenaConfig arena_for_tables(ArenaConfig base, const std::vector<CheckedTableOptions>& tables);

// A quarter of the machine's memory: what a server's arena takes at most
// unless its config says otherwise.
uint64_t quarter_of_memory();

// The arena a server makes: the classes' blocks it starts with and the
// layout they may grow into (ChunkArena, "Growth"), each class to all the
// room there is below grow_to.
struct ArenaPlan {
  ArenaConfig start;        // committed at start: [arena] classes, or arena_for_tables(default_arena())
  ArenaConfig layout;       // the same classes, each with the most blocks it may grow to
  uint64_t start_bytes = 0;
  // [arena] grow_to, or without it: a quarter of memory for the default
  // classes, and no growth (start_bytes) for configured ones.
  uint64_t grow_to = 0;
};
ArenaPlan plan_arena(const ServerConfig& c);

// How a table fits an arena: refused (Errc::invalid_argument, naming the
// largest block) when one step of it fits no block, since no writer could
// write it; else a warning, "" if none, when the class of its one-step
// chunks has fewer blocks than max_size items, so that a table of
// one-step items waits for blocks long before it is full (a one-step
// chunk takes a whole block). The config check and table creation share it.
Result<std::string> arena_fit(const ArenaPlan& plan, const TableOptions& o);

// The most blocks of a class of `count` that one client may hold reserved:
// `share` of them, but at least 4 (a writer's open chunk, one in flight, a
// spare), or the whole class if it has fewer.
uint32_t client_block_limit(uint32_t count, double share);

// Parses a whole config file's text; `source` names it in messages.
Result<ServerConfig> parse_config(std::string_view text, const std::string& source);
Result<ServerConfig> load_config(const std::string& path);
// Where a server's configuration comes from: engramd's flags, or
// engram_server_options.
struct ConfigSources {
  std::string path;                 // an engramd.toml(5) file; "" = none
  std::optional<std::string> text;  // the same as text, used when path is ""
  std::string socket;               // the caller's own socket (a flag, an option); "" = none
};
// The configuration a server starts with (engramd and engram_server_start
// alike): parsed, checked, and its socket by the one precedence,
// from.socket, else the config's `socket`, else $ENGRAM_SOCKET, else
// kDefaultSocket. No file and no text: the defaults.
Result<ServerConfig> configure(const ConfigSources& from);
// Parses one table definition, e.g. `engramctl create-table`'s input:
// the keys of a [[table]] entry at top level. Not checked: the server
// that creates it checks it (Table::check).
Result<TableOptions> parse_table_snippet(std::string_view text, const std::string& source);
// [remote]'s keys together: TLS files all or none, the listening address,
// and plaintext beyond loopback only with insecure; and each upstream: its
// peer's address, its table a queue that items leave as they are sent
// (sampler fifo, max_times_sampled 1), TLS or insecure beyond loopback.
Status validate_remote(const RemoteConfig& r, const std::vector<CheckedTableOptions>& tables = {});
// Checks everything parse_config cannot see alone (tables fit the arena, ...).
Status validate_config(const ServerConfig& c);

// "64KiB", "2MiB", "1GiB", "4096": bytes. Errc::invalid_argument otherwise.
Result<uint64_t> parse_size(std::string_view s);
// The other way: "4KiB" for 4096, "400B" for 400 (the largest unit that
// divides it), which parse_size reads back.
std::string size_text(uint64_t bytes);

}  // namespace engram
