// The control plane between a client and the server: messages over a Unix
// SOCK_SEQPACKET socket (the kernel keeps message boundaries, and a hang-up
// means the peer is gone). Bulk data never travels here: only attach, table
// management and information.
//
// Every message is a ControlHeader followed by `size` payload bytes (at most
// kMaxControlPayload). A reply carries the request's type and a status:
// Errc as int (0 = ok); on error the payload is the message text.
// All payload structs are plain data; strings are fixed NUL-terminated arrays.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/channel.hpp"
#include "core/arena_blocks.hpp"
#include "core/rate_limiter.hpp"
#include "core/signature.hpp"
#include "core/status.hpp"
#include "core/table.hpp"

namespace engram {

inline constexpr uint32_t kControlMagic = 0x4c525443;  // "CTRL"
// 3: insert acks carry spare blocks. 4: segments are sealed memfds passed
// with the hello and open replies (SCM_RIGHTS), not names under /dev/shm.
// 5: the arena's allocation state is the daemon's alone; clients ask for
// blocks (grant_blocks) and give them back (return_blocks). 6: insert
// requests of several one-chunk items (RequestOp::insert_items). 7: the
// hello reply names each class's per-client limit; status lists clients.
// 8: TableSpec.capacity is 64 bits, so the server alone bounds max_size.
// 9: remote_status. 10: an insert record may carry a delivery (producer,
// sequence), before its references; a sample may ask for sequences.
// 11: a sample may look at the newest items instead (kSampleNewest).
// 12: TableInfoWire carries the items' largest and smallest priority.
// 13: list_items; a sample may ask for no repeats (kSampleDistinct).
// 14: export_begin, export_items, export_end. 15: the arena grows: the
// hello reply's classes are its layout, with each class's blocks committed
// then; status says each class's committed blocks and its most.
// 16: a view's tables take shard requests and draws (kInsertDraw), and
// TableInfoWire says a view's shards.
inline constexpr uint32_t kProtocolVersion = 16;
// Descriptors one message may carry; a message that comes with more is refused.
inline constexpr size_t kMaxControlFds = 4;
inline constexpr uint32_t kMaxControlPayload = 1 << 16;
inline constexpr size_t kMaxSegmentName = 128;

enum class ControlType : uint32_t {
  hello = 1,        // HelloRequest -> HelloReply
  create_table = 2, // TableSpec -> OpenReply (the table, opened)
  open_table = 3,   // NameRequest -> OpenReply
  close_table = 4,  // NameRequest -> nothing
  drop_table = 5,   // NameRequest -> nothing
  reset_table = 6,  // NameRequest -> nothing
  table_info = 7,   // NameRequest -> TableInfoWire
  list_tables = 8,  // nothing -> TableInfoWire[]
  set_rate_limiter = 9,  // RateLimiterRequest -> nothing
  status = 10,      // nothing -> StatusReply
  goodbye = 11,     // server -> client, unsolicited: the server is stopping
  checkpoint = 12,  // nothing -> the checkpoint's path (answered once it is written)
  grant_blocks = 13,   // GrantRequest -> BlockRef[1..count], each now reserved by the client
  return_blocks = 14,  // BlockRef[1..kMaxBlockGrant], reserved by the client -> nothing
  remote_status = 15,  // uint32_t json (0 or 1) -> text: the peers' view (empty: no [remote])
  list_items = 16,     // ItemsRequest -> ItemsReply, then ListedItem[count] (core/item_listing.hpp)
  export_begin = 17,   // NameRequest -> ExportBeginReply: the table's items, pinned for this connection
  export_items = 18,   // ExportItemsRequest -> ExportItemsReply, ExportedItem[items], ChunkRef[refs]
  export_end = 19,     // nothing -> nothing: the pins go; Errc::timeout if the export had lapsed
};

// Blocks one grant_blocks or return_blocks message may carry.
inline constexpr uint32_t kMaxBlockGrant = 256;

// Asks for up to `count` (1..kMaxBlockGrant) free blocks of size class
// `size_class`. The reply carries as many as were free (at least one), or
// Errc::out_of_memory when the class has none: the client waits for
// evictions and releases, and asks again.
struct GrantRequest {
  uint32_t size_class;
  uint32_t count;
};

struct ControlHeader {
  uint32_t magic;
  uint32_t type;    // ControlType
  int32_t status;   // replies: Errc
  uint32_t size;    // payload bytes
};

struct HelloRequest {
  uint32_t protocol_version;
  uint32_t layout_version;
  uint64_t arena_hash, channel_hash, bells_hash;
};

// Comes with two descriptors: the arena's and the bells' segments (sealed
// memfds of arena_size and bells_size bytes). The arena's geometry is
// computed from `classes`, never read from the client-writable segment.
struct HelloReply {
  uint32_t client_id;   // the client's arena id
  uint32_t ring_records;
  uint32_t max_batch;   // largest sample batch
  uint32_t num_classes;
  uint64_t arena_size, bells_size;
  uint64_t server_pid;
  SizeClassConfig classes[kArenaMaxClasses];
  // Blocks of each class this client may hold reserved at once (being
  // written, or spare); grants past it are refused with Errc::limit.
  uint32_t client_limit[kArenaMaxClasses];
  // Blocks of each class committed when the client attached: the first
  // ones of classes[k].count, the rest a hole that the class may grow
  // into, which the client must not touch before it is handed a block
  // there (a touch would allocate the page).
  uint32_t committed[kArenaMaxClasses];
};

// A table's full configuration, as created.
struct TableSpec {
  char name[kMaxTableName];
  uint64_t capacity;  // as asked for: the server bounds it (Table::check)
  uint32_t max_times_sampled;
  uint32_t sampler;  // SelectorKind
  uint32_t remover;
  double sampler_exponent;
  double remover_exponent;
  RateLimiterConfig limiter;
  uint32_t num_columns;
  uint32_t max_refs_per_item;
  Column columns[kMaxColumns];
};

struct NameRequest {
  char name[kMaxTableName];
};

// Comes with one descriptor: the channel's segment (a sealed memfd of
// channel_size bytes).
struct OpenReply {
  uint32_t table_id;  // also the index of the table's doorbell
  uint32_t reserved_;
  uint64_t channel_size;
  TableSpec spec;
};

struct TableInfoWire {
  TableSpec spec;
  uint32_t size;
  uint32_t can_sample;
  uint32_t can_insert;
  uint32_t clients;  // channels open on the table
  RateLimiterCounters counters;
  TableStats stats;
  double max_priority, min_priority;  // of the items held; 0 when there are none
  uint32_t shards, shards_present;    // a view's; 0 for a table
  uint32_t pad_;
};

// A piece of a table's listing: the items of slots from from_slot on,
// at most max_items (1..kMaxListedItems) of them and at most kMaxListScan
// slots looked at. The reply says where the next piece starts; next_slot
// == capacity when the listing has looked at every slot.
struct ItemsRequest {
  char name[kMaxTableName];
  uint32_t from_slot;
  uint32_t max_items;
};
struct ItemsReply {
  uint32_t next_slot;
  uint32_t capacity;
  uint32_t count;  // ListedItem entries that follow
  uint32_t reserved_;
};
// As many items as one reply holds.
inline constexpr uint32_t kMaxListedItems =
    static_cast<uint32_t>((kMaxControlPayload - sizeof(ItemsReply)) / sizeof(ListedItem));
// Slots one piece looks at: at most 2.5 MB of item slots, 50 us of the
// table's owner where few are occupied, 5 us where a full table fills
// the piece first (bench/NOTES.md, "Tuned constants"): a listing holds
// writers and samplers up for at most that long at a time.
inline constexpr uint32_t kMaxListScan = 1u << 16;

// An export: the items of one table at one moment, each with its chunk
// references, their chunks pinned until export_end (or the connection's
// end) so that the client copies their steps out of the arena at its own
// pace while the table goes on. The server never reads the chunks' bytes.
// One export per connection; an export that hears nothing from its client
// for idle_ms lapses (its pins go), so a stalled client hoards no blocks:
// a client that copies for longer sends an export_items of max_items 0
// now and then. export_end says whether it had lapsed (Errc::timeout): a
// copy made after that may hold recycled bytes and must be thrown away.
struct ExportBeginReply {
  TableSpec spec;    // the table's signature, as the chunks were written
  uint64_t items;    // in the export, in slot order (not insertion order)
  uint64_t refs;     // chunk references of all items
  uint64_t steps;    // all items' steps
  uint32_t idle_ms;  // the export lapses after this long without a request
  uint32_t reserved_;
};
// Items [from, from + max_items) of the export, as many as one reply holds
// whole (with their refs); max_items 0 only keeps the export alive.
struct ExportItemsRequest {
  uint64_t from;
  uint32_t max_items;
  uint32_t reserved_;
};
struct ExportItemsReply {
  uint32_t items;  // ExportedItem entries that follow, then ChunkRef[refs]
  uint32_t refs;   // each item's num_refs in turn, as arena block and generation
};
struct ExportedItem {
  uint64_t key;
  double priority;
  uint64_t inserted_seq;
  uint32_t times_sampled;
  uint32_t num_refs;
};
static_assert(sizeof(ExportedItem) == 32);
inline constexpr uint32_t kExportIdleMs = 10000;

struct RateLimiterRequest {
  char name[kMaxTableName];
  RateLimiterConfig limiter;
};

// Followed by `clients` ClientStatus entries, one per attached client.
struct StatusReply {
  uint64_t pid;
  uint64_t uptime_ms;
  uint32_t clients;      // attached (said hello): the ClientStatus entries that follow
  uint32_t tables;
  uint64_t arena_bytes;
  uint64_t blocks_total, blocks_free, blocks_reserved, blocks_sealed;
  char version[32];
  uint32_t connections;      // open, attached or not
  uint32_t max_connections;  // in force: the config's, fitted to the descriptor limit
  uint32_t max_connections_per_uid;
  uint32_t fds_open;         // the server's descriptors in use
  uint32_t fds_limit;        // its RLIMIT_NOFILE (soft)
  uint64_t refused;          // connections refused or closed unattached since start
  // Clients whose last grant of blocks, within kWaitingForBlocksNs, found
  // their class empty (writers waiting for arena space), and that class's
  // block size (the smallest, if several).
  uint32_t waiting_for_blocks;
  uint32_t num_classes;  // entries of `classes` in use
  uint64_t waiting_block_size;
  // Each size class's blocks, by state: how close each is to full, and
  // what a table's chunks cost (sealed blocks times their size).
  struct {
    uint64_t block_size;
    uint32_t total, free, reserved, sealed;  // total: committed now
    uint32_t most;                            // the blocks the class may grow to
    uint32_t pad_;
  } classes[kArenaMaxClasses];
  uint64_t arena_grow_to;  // bytes the arena may grow to (arena_bytes: committed now)
};
// How recent a refused grant keeps its client counted as waiting.
inline constexpr int64_t kWaitingForBlocksNs = 2'000'000'000;

struct ClientStatus {
  uint32_t id;
  uint32_t pid;
  uint32_t uid;
  uint32_t channels;         // tables open
  uint64_t reserved_blocks;  // arena blocks it holds reserved, every class
};

// The hello of a client built from this tree: its protocol and layouts.
HelloRequest hello_request() noexcept;

// The wire form of a table's options. It takes checked options only: the
// wire form has room for no more than Table::check allows, so nothing is
// cut or narrowed before the check has seen it. A client checks its
// options as the server will (the same check, so one message) and sends
// this; the server reports a table's options from the table (Table::options).
TableSpec to_spec(const CheckedTableOptions& o);
TableOptions from_spec(const TableSpec& s);
// A C string from a fixed array that may lack its NUL.
std::string fixed_string(const char* s, size_t cap);
// Copies s into a fixed array; Errc::invalid_argument naming `what` if it does not fit.
Status copy_fixed(char* dst, size_t cap, const std::string& s, const char* what);

// Descriptors received with a message, closed unless taken.
class ReceivedFds {
 public:
  ReceivedFds() = default;
  ~ReceivedFds() { close_all(); }
  ReceivedFds(const ReceivedFds&) = delete;
  ReceivedFds& operator=(const ReceivedFds&) = delete;
  size_t size() const noexcept { return fds_.size(); }
  // The i-th descriptor, now the caller's to close.
  int take(size_t i) noexcept;
  void add(int fd) { fds_.push_back(fd); }
  void close_all() noexcept;

 private:
  std::vector<int> fds_;
};

// Sends `n` bytes as one datagram with `nfds` descriptors attached, as
// they are: no header, no limits checked. A non-blocking socket whose peer
// stopped reading gives Errc::full, never a wait. send_message frames and
// checks; tests and fuzzers that speak the protocol wrong on purpose call
// this directly.
Status send_datagram(int fd, const void* bytes, size_t n, const int* fds, size_t nfds);
// Sends one message (header + payload, and up to kMaxControlFds
// descriptors) on a SOCK_SEQPACKET socket. On a non-blocking socket whose
// peer stopped reading: Errc::full, never a wait.
Status send_message(int fd, ControlType type, int32_t status, const void* payload, size_t size,
                    const int* fds = nullptr, size_t nfds = 0);
// Receives one message; Errc::system with "hung up" when the peer closed.
// timeout_ms < 0 waits for ever. Descriptors that came with it go to *fds,
// or are closed when fds is null; more than kMaxControlFds, or ancillary
// data cut short, fail the message (Errc::corrupt) and close them all.
Status recv_message(int fd, ControlHeader* h, std::vector<char>* payload, int timeout_ms, ReceivedFds* fds = nullptr);

// One request and its reply. The reply's status becomes the Status (its
// payload the message); a hang-up or a goodbye is Errc::disconnected.
Status control_call(int fd, ControlType type, const void* payload, size_t size, std::vector<char>* reply,
                    int timeout_ms, ReceivedFds* fds = nullptr);

// Connects to the server on `path` and says hello, the whole within
// timeout_ms (< 0: no limit), every step included: connect(2) is
// non-blocking and retried while the server's backlog is full. On success
// *fd is a blocking socket, *hello the server's reply and *fds its two
// descriptors (arena, bells). Errors name the step: Errc::disconnected (no
// server listens there, or it hung up), Errc::permission_denied (the
// socket's mode), Errc::timeout (backlog full, or no answer to the hello,
// until the deadline), or the server's refusal (its message: a limit, the
// credentials, another version).
Status connect_control(const std::string& path, int timeout_ms, int* fd, HelloReply* hello, ReceivedFds* fds);

}  // namespace engram
