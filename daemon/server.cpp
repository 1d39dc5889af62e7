#include "daemon/server.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <pwd.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <cstdio>
#include <latch>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include "core/channel.hpp"
#include "core/chunk_arena.hpp"
#include "core/control_message.hpp"
#include "core/fnv.hpp"
#include "core/name.hpp"
#include "core/shm.hpp"
#include "core/table.hpp"
#include "daemon/checkpointer.hpp"
#include "daemon/log.hpp"
#include "daemon/table_owner.hpp"

#ifndef ENGRAM_VERSION_STRING
#define ENGRAM_VERSION_STRING "0.0.0"
#endif

namespace engram {
namespace {

constexpr char kNoCheckpointDir[] =
    "checkpoints are off: set [checkpoint] dir in the server's config (see engramd.toml(5))";

Status sys_error(const std::string& what) { return {Errc::system, what + ": " + std::strerror(errno)}; }

// Ids handed out lowest first, so that logs stay readable.
class IdPool {
 public:
  IdPool(uint32_t first, uint32_t end) {
    for (uint32_t i = end; i-- > first;) free_.push_back(i);
  }
  Result<uint32_t> take(const char* what) {
    if (free_.empty()) return Status{Errc::full, std::string("no free ") + what + " id left"};
    uint32_t id = free_.back();
    free_.pop_back();
    return id;
  }
  void give(uint32_t id) { free_.push_back(id); }

 private:
  std::vector<uint32_t> free_;
};

struct TableEntry {
  uint32_t id = 0;
  std::string name;
  ShmSegment segment;  // the index: written by the owner only, never handed out
  std::unique_ptr<TableOwner> owner;
  uint32_t owner_arena_id = 0;
};

struct ClientChannel {
  ShmSegment segment;  // its descriptor went to the client with the open reply
};

struct Client {
  int fd = -1;
  uint32_t id = 0;  // arena client id, after hello
  ucred cred{};
  bool attached = false;
  std::map<uint32_t, ClientChannel> channels;  // by table id
};

}  // namespace

std::string shm_prefix_for(const ServerConfig& c) {
  if (!c.shm_prefix.empty()) return c.shm_prefix;
  uint64_t h = fnv1a(kFnvOffset, c.socket_path.data(), c.socket_path.size());
  char name[32];
  std::snprintf(name, sizeof name, "engram-%012llx", static_cast<unsigned long long>(h & 0xffffffffffffULL));
  return name;
}

struct Server::Impl {
  ServerConfig config;
  std::string prefix;
  gid_t group = static_cast<gid_t>(-1);  // whose members may connect
  std::string group_name;
  int listen_fd = -1;
  int wake_fd = -1;  // eventfd: stop / reload requests
  std::thread thread;
  std::atomic<bool> stopping{false};
  std::atomic<bool> stopped{false};
  Server::Progress progress;  // may be empty
  // Requests from other threads, taken by the control thread when woken.
  std::mutex reload_mu;
  std::unique_ptr<ServerConfig> pending_reload;
  struct HealthProbe {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    Server::Health h;
    int timeout_ms = 0;
  };
  std::vector<std::shared_ptr<HealthProbe>> pending_probes;  // under reload_mu
  std::string ckpt_last_path;
  int64_t ckpt_last_ns = 0;
  int64_t started_ns = monotonic_ns();

  ShmSegment arena_seg, bells_seg;
  // The arena's allocation state: in this process's memory, out of every
  // client's reach (ChunkArena).
  std::unique_ptr<void, decltype(&std::free)> arena_meta{nullptr, &std::free};
  ChunkArena arena;
  BellsHeader* bells = nullptr;
  IdPool arena_ids{1, kArenaMaxClients};
  IdPool table_ids{0, kMaxTables};
  std::map<std::string, TableEntry> tables;
  std::map<int, Client> clients;  // by fd

  // Checkpoints. The control thread takes snapshots; one worker thread at a
  // time writes one, then wakes the control thread, which answers the
  // clients that asked for it (fds in ckpt_waiters) and starts the next if
  // anyone asked meanwhile (ckpt_next_wanted, their fds in ckpt_next).
  uint32_t ckpt_arena_id = 0;  // pins and releases of checkpointed chunks
  uint64_t ckpt_seq = 0;       // the last sequence number used
  std::thread ckpt_thread;
  std::atomic<bool> ckpt_done{false};
  Result<CheckpointResult> ckpt_result{Status{Errc::invalid_argument, "no checkpoint yet"}};
  std::vector<int> ckpt_waiters, ckpt_next;
  bool ckpt_next_wanted = false;
  int64_t ckpt_due_ns = -1;  // next periodic checkpoint, or -1

  ~Impl() {
    if (listen_fd >= 0) ::close(listen_fd);
    if (wake_fd >= 0) ::close(wake_fd);
  }

  // --- start-up --------------------------------------------------------
  Status init(const ServerConfig& c) {
    config = c;
    if (config.arena.classes.empty()) config.arena = default_arena();
    if (Status s = validate_config(config); !s.ok()) return s;
    prefix = shm_prefix_for(config);
    // Default: the server's own group (under systemd, the unit's Group=).
    if (!config.group.empty()) {
      struct group* g = ::getgrnam(config.group.c_str());
      if (!g) return {Errc::invalid_argument, "group \"" + config.group + "\" does not exist; create it or change `group`"};
      group = g->gr_gid;
      group_name = config.group;
    } else {
      group = ::getegid();
      struct group* g = ::getgrgid(group);
      group_name = g ? g->gr_name : std::to_string(group);
    }
    if (Status s = claim_socket_path(); !s.ok()) return s;
    if (Status s = make_arena(); !s.ok()) return s;
    auto ck_id = arena_ids.take("checkpointer");
    if (!ck_id.ok()) return ck_id.status();
    ckpt_arena_id = *ck_id;
    if (Status s = restore_at_start(); !s.ok()) return s;
    for (const TableOptions& o : config.tables) {
      if (tables.count(o.name)) {
        log_info("table " + o.name + ": restored from the checkpoint; its [[table]] entry in the config is not applied");
        continue;
      }
      if (Status s = create_table(o); !s.ok()) return {s.code(), "table \"" + o.name + "\": " + s.message()};
    }
    if (config.checkpoint.interval_s > 0)
      ckpt_due_ns = monotonic_ns() + int64_t{config.checkpoint.interval_s} * 1'000'000'000;
    wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd < 0) return sys_error("eventfd");
    if (Status s = listen_socket(); !s.ok()) return s;
    if (!ShmSegment::seal_note().empty()) log_warn(ShmSegment::seal_note());
    log_info("serving " + config.socket_path + " (arena " +
             std::to_string(arena_seg.size() >> 20) + " MiB, " + std::to_string(tables.size()) + " tables)");
    thread = std::thread([this] { control_loop(); });
    return Status::Ok();
  }

  Status claim_socket_path() {
    const std::string& path = config.socket_path;
    std::string dir = path.substr(0, path.find_last_of('/'));
    if (!dir.empty() && ::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
      return sys_error("cannot create the socket directory " + dir);
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) return Status::Ok();
    if (!S_ISSOCK(st.st_mode))
      return {Errc::already_exists, path + " exists and is not a socket; remove it or choose another --socket"};
    int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    int r = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::close(fd);
    if (r == 0)
      return {Errc::already_exists, "another server is live on " + path +
                                        "; stop it first, or give this one another --socket"};
    ::unlink(path.c_str());
    log_warn("removed the stale socket " + path + " of a server that is gone");
    return Status::Ok();
  }

  // A sealed memfd: clients reach it only through the descriptor sent
  // over the socket, and none can resize it (ShmSegment::Sealing).
  Result<ShmSegment> make_segment(const std::string& what, size_t size, ShmSegment::Sealing sealing) {
    return ShmSegment::create_sealed(prefix + "." + what, size, sealing);
  }

  Status make_arena() {
    size_t need = ArenaBlocks::bytes_needed(config.arena);
    if (need == 0) {
      Status s = ArenaBlocks::validate(config.arena);
      return {s.code(), "arena.classes: " + s.message()};
    }
    auto seg = make_segment("arena", need, ShmSegment::Sealing::fixed_size);
    if (!seg.ok()) return seg.status();
    arena_seg = std::move(*seg);
    size_t meta = align_up(ChunkArena::meta_bytes_needed(config.arena), kCacheLine);
    arena_meta.reset(std::aligned_alloc(kCacheLine, meta));
    if (!arena_meta) return {Errc::out_of_memory, "no memory for the arena's " + std::to_string(meta) + " bytes of block states"};
    auto a = ChunkArena::format(arena_meta.get(), meta, arena_seg.data(), arena_seg.size(), config.arena);
    if (!a.ok()) return a.status();
    arena = *a;
    auto b = make_segment("bells", sizeof(BellsHeader), ShmSegment::Sealing::fixed_size);
    if (!b.ok()) return b.status();
    bells_seg = std::move(*b);
    bells = new (bells_seg.data()) BellsHeader{};
    segment_begin_format(&bells->segment, SegmentKind::bells, kBellsLayoutHash, bells_seg.size());
    segment_publish(&bells->segment);
    return Status::Ok();
  }

  Status listen_socket() {
    listen_fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (listen_fd < 0) return sys_error("socket");
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, config.socket_path.c_str(), sizeof addr.sun_path - 1);
    mode_t old = ::umask(0117);  // the socket is born 0660: no window with wider access
    int r = ::bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::umask(old);
    if (r != 0) return sys_error("cannot bind " + config.socket_path);
    // Run as the group's own (systemd's Group=), the socket is born in it and
    // engramd needs no chown (its unit forbids @privileged system calls).
    if (group != ::getegid() && ::chown(config.socket_path.c_str(), static_cast<uid_t>(-1), group) != 0)
      return sys_error("cannot give " + config.socket_path + " to group " + group_name);
    if (::listen(listen_fd, 64) != 0) return sys_error("listen");
    return Status::Ok();
  }

  // --- checkpoints ----------------------------------------------------------

  // Restores the checkpoint named by --restore, else (if restore is on) the
  // newest one that checks out, falling back to older ones. Runs before any
  // client can attach.
  Status restore_at_start() {
    const CheckpointConfig& ck = config.checkpoint;
    std::vector<std::string> candidates;
    if (!ck.dir.empty()) {
      prune_checkpoints(ck.dir, std::numeric_limits<uint32_t>::max());  // only leftovers of interrupted writes
      auto all = list_checkpoints(ck.dir);
      if (!all.empty()) ckpt_seq = checkpoint_sequence(all.front());
      if (ck.restore) candidates = all;
    }
    if (!ck.restore_path.empty()) {
      // Asked for by name: that one or nothing.
      Status s = restore_from(ck.restore_path);
      if (!s.ok()) return {s.code(), "cannot restore " + ck.restore_path + ": " + s.message()};
      ckpt_seq = std::max(ckpt_seq, checkpoint_sequence(ck.restore_path));
      return Status::Ok();
    }
    for (const std::string& path : candidates) {
      Status s = restore_from(path);
      if (s.ok()) return s;
      log_error("refusing " + s.message() + "; trying the one before it");
    }
    if (!candidates.empty()) log_error("no checkpoint in " + ck.dir + " could be restored; starting empty");
    return Status::Ok();
  }

  // All or nothing: on any failure every table and block it made is gone.
  Status restore_from(const std::string& path) {
    auto t0 = monotonic_ns();
    auto reader = CheckpointReader::open(path);
    if (!reader.ok()) return reader.status();
    const Manifest& m = reader->manifest();
    if (m.tables.size() > kMaxTables) return {Errc::corrupt, "it holds more tables than a server can"};
    for (const TableState& t : m.tables)
      if (tables.count(t.options.name)) return {Errc::already_exists, "it holds table " + t.options.name + " twice"};
    // Chunks into blocks reserved by the checkpointer id, each sealed with
    // one reference of the restore's own; items add theirs.
    std::vector<BlockRef> blocks;
    bool sealed = false;  // all of them, once every chunk checked out
    std::vector<std::string> made;
    auto undo = [&] {
      for (const std::string& name : made)
        if (TableEntry* e = find_table(name)) drop_table(*e);
      for (BlockRef b : blocks)
        (void)(sealed ? arena.release(ckpt_arena_id, b) : arena.free_reserved(ckpt_arena_id, b));
    };
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < m.chunks.size(); ++i) {
      const SavedChunk& c = m.chunks[i];
      auto k = arena.class_for(c.raw_bytes);
      if (!k.ok()) {
        undo();
        return {Errc::invalid_argument, "chunk " + std::to_string(i) + " needs a block of " + std::to_string(c.raw_bytes) +
                                            " bytes, larger than any in this arena; configure [arena] as when it was saved"};
      }
      auto b = arena.alloc(ckpt_arena_id, *k);
      if (!b.ok()) {
        undo();
        return {Errc::out_of_memory, "the arena has too few blocks of " +
                                         std::to_string(arena.size_class(*k).block_size) + " bytes for its " +
                                         std::to_string(m.chunks.size()) + " chunks; configure a larger [arena]"};
      }
      blocks.push_back(*b);
      if (Status s = reader->read_chunk(i, arena.data(*b)); !s.ok()) {
        undo();
        return s;
      }
      bytes += c.raw_bytes;
      if (progress) progress("restoring", i + 1, m.chunks.size());
    }
    if (Status s = reader->finish(); !s.ok()) {
      undo();
      return s;
    }
    for (BlockRef b : blocks) (void)arena.seal(ckpt_arena_id, b, 1);
    sealed = true;
    uint64_t items = 0;
    for (const TableState& saved : m.tables) {
      TableState st = saved;
      for (ChunkRef& r : st.refs) {
        r.generation = blocks[r.block].generation;
        r.block = blocks[r.block].index;
      }
      if (Status s = create_table(st.options); !s.ok()) {
        undo();
        return {s.code(), "table " + st.options.name + ": " + s.message()};
      }
      made.push_back(st.options.name);
      if (Status s = find_table(st.options.name)->owner->restore(st); !s.ok()) {
        undo();
        return s;
      }
      for (const ChunkRef& r : st.refs) (void)arena.acquire({r.block, r.generation});
      items += st.items.size();
    }
    for (BlockRef b : blocks) (void)arena.release(ckpt_arena_id, b);  // the restore's own references
    double secs = double(monotonic_ns() - t0) / 1e9;
    log_info("restored checkpoint " + path + " (format " + std::to_string(m.format_version) + ", engram " +
             m.engram_version + "): " + std::to_string(m.tables.size()) + " tables, " + std::to_string(items) +
             " items, " + std::to_string(m.chunks.size()) + " chunks, " + std::to_string(bytes >> 20) + " MiB in " +
             std::to_string(secs) + " s");
    note_checkpoint(path);
    return Status::Ok();
  }

  // Every table at one moment: each owner parks on a barrier, the snapshot
  // copies the indexes and pins their chunks, then all go on. Owners stand
  // still for as long as the copy takes, not for the write.
  Result<Snapshot> take_snapshot() {
    Snapshot snap;
    auto parked = std::make_shared<std::latch>(static_cast<ptrdiff_t>(tables.size()));
    auto go = std::make_shared<std::latch>(1);
    int64_t t0 = monotonic_ns();
    for (auto& [n, e] : tables) e.owner->park(parked, go);
    parked->wait();
    Status s;
    for (auto& [n, e] : tables)
      if (s.ok()) s = snap.add(e.owner->snapshot(), arena);
    go->count_down();
    snap.pause_ns = monotonic_ns() - t0;
    if (!s.ok()) {
      snap.release_all(arena, ckpt_arena_id);
      return s;
    }
    return snap;
  }

  static void log_io_fallback(const std::string& why) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true)) log_warn(why);
  }

  Result<CheckpointResult> write_snapshot(Snapshot snap, uint64_t seq) {
    double pause_ms = double(snap.pause_ns) / 1e6;
    std::function<void(uint64_t, uint64_t)> each;
    if (progress && on_control_thread()) each = [this](uint64_t d, uint64_t n) { progress("checkpointing", d, n); };
    auto r = write_checkpoint(std::move(snap), arena, ckpt_arena_id, config.checkpoint, seq, ENGRAM_VERSION_STRING,
                              &log_io_fallback, each);
    if (r.ok())
      log_info("checkpoint " + r->path + ": " + std::to_string(r->chunk_bytes >> 20) + " MiB of chunks in " +
               std::to_string(r->file_bytes >> 20) + " MiB of files, " + std::to_string(r->seconds) + " s (" +
               io_path_name(r->io) + "); tables paused " + std::to_string(pause_ms) + " ms for the snapshot");
    else
      log_error("checkpoint failed: " + r.status().message());
    return r;
  }

  // Starts a checkpoint in the background, or notes that another is wanted
  // after the running one. `waiter` (a client fd, or -1) gets the path.
  void request_checkpoint(int waiter) {
    if (config.checkpoint.dir.empty()) {
      if (waiter >= 0)
        (void)send_message(waiter, ControlType::checkpoint, static_cast<int32_t>(Errc::invalid_argument),
                           kNoCheckpointDir, std::strlen(kNoCheckpointDir));
      return;
    }
    if (ckpt_thread.joinable()) {
      if (waiter >= 0) ckpt_next.push_back(waiter);
      ckpt_next_wanted = true;
      return;
    }
    if (waiter >= 0) ckpt_waiters.push_back(waiter);
    start_checkpoint();
  }

  // Snapshots now and hands the write to the worker; ckpt_waiters hear the result.
  void start_checkpoint() {
    auto snap = take_snapshot();
    if (!snap.ok()) {
      ckpt_result = snap.status();
      finish_checkpoint_replies();
      return;
    }
    uint64_t seq = ++ckpt_seq;
    ckpt_done.store(false);
    ckpt_thread = std::thread([this, seq, sn = std::move(*snap)]() mutable {
      // Traffic first: the writer takes only CPU time that owners and
      // clients leave idle (on two cores, a compressing thread at normal
      // priority puts inserts behind it in the run queue for milliseconds).
      sched_param idle{};
      if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle) != 0)
        log_warn("checkpoint: cannot lower the writer's priority (SCHED_IDLE); traffic may wait for it");
      ckpt_result = write_snapshot(std::move(sn), seq);
      ckpt_done.store(true);
      wake();
    });
  }

  void finish_checkpoint_replies() {
    for (int fd : ckpt_waiters) {
      if (!clients.count(fd)) continue;  // gone meanwhile
      if (ckpt_result.ok())
        (void)send_message(fd, ControlType::checkpoint, 0, ckpt_result->path.data(), ckpt_result->path.size());
      else
        (void)send_message(fd, ControlType::checkpoint, static_cast<int32_t>(ckpt_result.status().code()),
                           ckpt_result.status().message().data(), ckpt_result.status().message().size());
    }
    ckpt_waiters.clear();
  }

  // On the control thread, after the worker woke it.
  void reap_checkpoint() {
    if (!ckpt_thread.joinable() || !ckpt_done.load()) return;
    ckpt_thread.join();
    if (ckpt_result.ok()) note_checkpoint(ckpt_result->path);
    finish_checkpoint_replies();
    if (ckpt_next_wanted) {
      ckpt_next_wanted = false;
      ckpt_waiters.swap(ckpt_next);  // empty after finish_checkpoint_replies
      start_checkpoint();
    }
  }

  void periodic_checkpoint() {
    if (ckpt_due_ns < 0 || monotonic_ns() < ckpt_due_ns) return;
    ckpt_due_ns = monotonic_ns() + int64_t{config.checkpoint.interval_s} * 1'000'000'000;
    if (!ckpt_thread.joinable()) request_checkpoint(-1);
  }

  // --- tables -------------------------------------------------------------
  Status create_table(const TableOptions& o) {
    if (tables.count(o.name)) return {Errc::already_exists, "a table named \"" + escaped(o.name) + "\" exists"};
    if (o.name.empty() || o.name.size() >= kMaxTableName)
      return {Errc::invalid_argument, "table name must be 1.." + std::to_string(kMaxTableName - 1) + " bytes"};
    if (o.max_refs_per_item < 1 || o.max_refs_per_item > kRecordRefs)
      return {Errc::invalid_argument, "max_chunks_per_item must be 1.." + std::to_string(kRecordRefs)};
    if (Status s = validate_signature(o.signature.data(), o.signature.size()); !s.ok()) return s;
    if (Status s = Table::validate(o); !s.ok()) return s;
    auto id = table_ids.take("table");
    if (!id.ok()) return {Errc::full, "at most " + std::to_string(kMaxTables) + " tables"};
    auto aid = arena_ids.take("arena client");
    if (!aid.ok()) {
      table_ids.give(*id);
      return aid.status();
    }
    TableEntry e;
    e.id = *id;
    e.name = o.name;
    e.owner_arena_id = *aid;
    auto seg = make_segment("index" + std::to_string(*id), Table::bytes_needed(o), ShmSegment::Sealing::writable_here_only);
    if (!seg.ok()) {
      table_ids.give(*id);
      arena_ids.give(*aid);
      return seg.status();
    }
    e.segment = std::move(*seg);
    e.segment.close_fd();  // handed to nobody: the mapping is all the daemon needs
    auto t = Table::format(e.segment.data(), e.segment.size(), o, 0x5eed0000ULL + *id);
    if (!t.ok()) {
      table_ids.give(*id);
      arena_ids.give(*aid);
      return t.status();
    }
    e.owner = std::make_unique<TableOwner>(arena, *aid, *t, to_spec(o), &bells->slots[*id].bell, config.ring_records);
    e.owner->start();
    log_info("table " + o.name + ": created (max_size " + std::to_string(o.capacity) + ", sampler " +
             selector_kind_name(o.sampler.kind) + ", remover " + selector_kind_name(o.remover.kind) + ")");
    tables.emplace(o.name, std::move(e));
    return Status::Ok();
  }

  void drop_table(TableEntry& e) {
    e.owner->reset();  // releases every item's chunks
    e.owner->stop(ChannelClosed::table_dropped);
    for (auto& [fd, c] : clients) close_channel(c, e.id);
    table_ids.give(e.id);
    arena_ids.give(e.owner_arena_id);
    std::string name = e.name;  // e dies in erase
    log_info("table " + name + ": dropped");
    tables.erase(name);
  }

  TableEntry* find_table(const std::string& name) {
    auto it = tables.find(name);
    return it == tables.end() ? nullptr : &it->second;
  }
  TableEntry* find_table(uint32_t id) {
    for (auto& [n, e] : tables)
      if (e.id == id) return &e;
    return nullptr;
  }

  void close_channel(Client& c, uint32_t table_id) {
    auto it = c.channels.find(table_id);
    if (it == c.channels.end()) return;
    c.channels.erase(it);
  }

  // --- the control loop ---------------------------------------------------
  void control_loop() {
    std::vector<pollfd> fds;
    while (!stopping.load()) {
      fds.clear();
      fds.push_back({wake_fd, POLLIN, 0});
      fds.push_back({listen_fd, POLLIN, 0});
      for (auto& [fd, c] : clients) fds.push_back({fd, POLLIN, 0});
      int timeout = -1;
      if (ckpt_due_ns >= 0)
        timeout = static_cast<int>(std::clamp<int64_t>((ckpt_due_ns - monotonic_ns()) / 1'000'000 + 1, 0, 60'000));
      int r = ::poll(fds.data(), fds.size(), timeout);
      if (r < 0 && errno != EINTR) {
        log_error(std::string("poll: ") + std::strerror(errno));
        break;
      }
      if (fds[0].revents) {
        uint64_t v;
        (void)!::read(wake_fd, &v, sizeof v);
        apply_reload();
        answer_probes();
        reap_checkpoint();
      }
      periodic_checkpoint();
      if (fds[1].revents & POLLIN) accept_clients();
      for (size_t i = 2; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        auto it = clients.find(fds[i].fd);
        if (it == clients.end()) continue;
        if (!serve(it->second)) disconnect(it->second);
      }
    }
    shutdown();
  }

  void accept_clients() {
    for (;;) {
      // Non-blocking: a client that stops reading its replies must not be
      // able to stall this thread (and with it every other client's reclaim).
      int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
          log_warn(std::string("accept: ") + std::strerror(errno));
        return;
      }
      Client c;
      c.fd = fd;
      socklen_t len = sizeof c.cred;
      if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c.cred, &len) != 0) {
        log_warn(std::string("SO_PEERCRED: ") + std::strerror(errno) + "; refusing the connection");
        ::close(fd);
        continue;
      }
      clients.emplace(fd, std::move(c));
    }
  }

  // May this peer use the server? The owner (and root) always; others only
  // as members of the group.
  bool permitted(const ucred& cr) const {
    if (cr.uid == 0 || cr.uid == ::geteuid()) return true;
    if (cr.gid == group) return true;
    passwd* pw = ::getpwuid(cr.uid);
    if (!pw) return false;
    int n = 64;
    std::vector<gid_t> groups(static_cast<size_t>(n));
    if (::getgrouplist(pw->pw_name, pw->pw_gid, groups.data(), &n) < 0) {
      groups.resize(static_cast<size_t>(n));
      if (::getgrouplist(pw->pw_name, pw->pw_gid, groups.data(), &n) < 0) return false;
    }
    for (int i = 0; i < n; ++i)
      if (groups[static_cast<size_t>(i)] == group) return true;
    return false;
  }

  std::string who(const Client& c) const {
    return "client " + std::to_string(c.id) + " (pid " + std::to_string(c.cred.pid) + ", uid " +
           std::to_string(c.cred.uid) + ")";
  }

  template <typename T>
  static bool read_payload(const std::vector<char>& p, T* out) {
    if (p.size() != sizeof(T)) return false;
    std::memcpy(out, p.data(), sizeof(T));
    return true;
  }

  bool reply(Client& c, ControlType t, const Status& s, const void* payload = nullptr, size_t size = 0) {
    if (!s.ok()) return send_message(c.fd, t, static_cast<int32_t>(s.code()), s.message().data(), s.message().size()).ok();
    return send_message(c.fd, t, 0, payload, size).ok();
  }

  // Serves one message; false when the client is gone or must go.
  bool serve(Client& c) {
    ControlHeader h;
    std::vector<char> p;
    Status s = recv_message(c.fd, &h, &p, 0);
    if (s.code() == Errc::timeout) return true;
    if (!s.ok()) {
      if (s.message() != "peer hung up") log_warn(who(c) + ": " + s.message() + "; disconnecting it");
      return false;
    }
    auto type = static_cast<ControlType>(h.type);
    if (!c.attached && type != ControlType::hello) {
      reply(c, type, {Errc::invalid_argument, "say hello first"});
      return false;
    }
    switch (type) {
      case ControlType::hello: return hello(c, p);
      case ControlType::create_table: {
        TableSpec spec;
        if (!read_payload(p, &spec)) return reply(c, type, {Errc::invalid_argument, "malformed table spec"});
        spec.name[sizeof spec.name - 1] = '\0';
        TableOptions o = from_spec(spec);
        o.signature.resize(std::min<size_t>(spec.num_columns, kMaxColumns));
        if (spec.num_columns > kMaxColumns)
          return reply(c, type, {Errc::invalid_argument, "more than " + std::to_string(kMaxColumns) + " columns"});
        Status cs = create_table(o);
        if (cs.ok()) log_info(who(c) + " created table " + o.name);
        return reply(c, type, cs);
      }
      case ControlType::open_table: return open_table(c, p);
      case ControlType::close_table: {
        NameRequest n;
        if (!read_payload(p, &n)) return reply(c, type, {Errc::invalid_argument, "malformed request"});
        TableEntry* e = find_table(fixed_string(n.name, sizeof n.name));
        if (e && c.channels.count(e->id)) {
          e->owner->detach(c.id, ChannelClosed::table_dropped);
          close_channel(c, e->id);
        }
        return reply(c, type, Status::Ok());
      }
      case ControlType::drop_table:
      case ControlType::reset_table:
      case ControlType::table_info: {
        NameRequest n;
        if (!read_payload(p, &n)) return reply(c, type, {Errc::invalid_argument, "malformed request"});
        std::string name = fixed_string(n.name, sizeof n.name);
        TableEntry* e = find_table(name);
        if (!e) return reply(c, type, no_such_table(name));
        if (type == ControlType::drop_table) {
          log_info(who(c) + " drops table " + name);
          drop_table(*e);
          return reply(c, type, Status::Ok());
        }
        if (type == ControlType::reset_table) {
          e->owner->reset();
          log_info(who(c) + " reset table " + name);
          return reply(c, type, Status::Ok());
        }
        TableInfoWire w = e->owner->info();
        return reply(c, type, Status::Ok(), &w, sizeof w);
      }
      case ControlType::list_tables: {
        std::vector<TableInfoWire> all;
        for (auto& [n, e] : tables) all.push_back(e.owner->info());
        return reply(c, type, Status::Ok(), all.data(), all.size() * sizeof(TableInfoWire));
      }
      case ControlType::set_rate_limiter: {
        RateLimiterRequest rq;
        if (!read_payload(p, &rq)) return reply(c, type, {Errc::invalid_argument, "malformed request"});
        std::string name = fixed_string(rq.name, sizeof rq.name);
        TableEntry* e = find_table(name);
        if (!e) return reply(c, type, no_such_table(name));
        Status rs = e->owner->set_rate_limiter(rq.limiter);
        if (rs.ok()) log_info(who(c) + " changed the rate limiter of table " + name);
        return reply(c, type, rs);
      }
      case ControlType::status: {
        StatusReply st{};
        st.pid = static_cast<uint64_t>(::getpid());
        st.uptime_ms = static_cast<uint64_t>((monotonic_ns() - started_ns) / 1000000);
        st.clients = static_cast<uint32_t>(clients.size());
        st.tables = static_cast<uint32_t>(tables.size());
        st.arena_bytes = arena_seg.size();
        st.blocks_total = arena.total_blocks();
        for (uint32_t i = 0; i < arena.total_blocks(); ++i) {
          BlockKind k = arena.kind(i);
          (k == BlockKind::free ? st.blocks_free : k == BlockKind::reserved ? st.blocks_reserved : st.blocks_sealed)++;
        }
        std::strncpy(st.version, ENGRAM_VERSION_STRING, sizeof st.version - 1);
        return reply(c, type, Status::Ok(), &st, sizeof st);
      }
      case ControlType::checkpoint:
        request_checkpoint(c.fd);  // answered when written
        return true;
      case ControlType::grant_blocks: return grant_blocks(c, p);
      case ControlType::return_blocks: return return_blocks(c, p);
      case ControlType::goodbye: return false;
    }
    return reply(c, type, {Errc::invalid_argument, "unknown control message type " + std::to_string(h.type)});
  }

  // Blocks for a client's writers, reserved by it: taken here, with the
  // control thread's id, and handed over.
  bool grant_blocks(Client& c, const std::vector<char>& p) {
    GrantRequest rq;
    if (!read_payload(p, &rq)) return reply(c, ControlType::grant_blocks, {Errc::invalid_argument, "malformed request"});
    if (rq.size_class >= arena.num_classes() || rq.count == 0 || rq.count > kMaxBlockGrant)
      return reply(c, ControlType::grant_blocks,
                   {Errc::invalid_argument, "a grant is of 1 to " + std::to_string(kMaxBlockGrant) + " blocks of one of the " +
                                                std::to_string(arena.num_classes()) + " size classes"});
    std::vector<BlockRef> granted;
    granted.reserve(rq.count);
    Status why = Status::Ok();
    while (granted.size() < rq.count) {
      auto b = arena.alloc(kArenaDaemonClient, rq.size_class);
      if (!b.ok()) {
        why = b.status();
        break;
      }
      if (Status s = arena.hand_over(kArenaDaemonClient, c.id, *b); !s.ok()) {
        why = s;
        break;
      }
      granted.push_back(*b);
    }
    if (granted.empty()) return reply(c, ControlType::grant_blocks, why);
    if (!why.ok() && why.code() != Errc::out_of_memory) log_error("granting blocks to " + who(c) + ": " + why.message());
    return reply(c, ControlType::grant_blocks, Status::Ok(), granted.data(), granted.size() * sizeof(BlockRef));
  }

  // Blocks a client no longer needs. Only those it holds reserved come
  // back; any other (another's, sealed, free, a stale generation) is
  // refused and changes nothing.
  bool return_blocks(Client& c, const std::vector<char>& p) {
    size_t n = p.size() / sizeof(BlockRef);
    if (p.size() % sizeof(BlockRef) != 0 || n == 0 || n > kMaxBlockGrant)
      return reply(c, ControlType::return_blocks,
                   {Errc::invalid_argument, "a return is of 1 to " + std::to_string(kMaxBlockGrant) + " blocks"});
    std::vector<BlockRef> back(n);
    std::memcpy(back.data(), p.data(), p.size());
    size_t refused = 0;
    BlockRef first_refused{};
    std::vector<BlockRef> ours;
    for (BlockRef b : back) {
      if (b.index < arena.total_blocks() && arena.hand_over(c.id, kArenaDaemonClient, b).ok()) {
        ours.push_back(b);
      } else if (refused++ == 0) {
        first_refused = b;
      }
    }
    order_for_freeing(&ours);
    for (BlockRef b : ours)
      if (Status s = arena.free_reserved(kArenaDaemonClient, b); !s.ok()) log_error("returning a block: " + s.message());
    if (refused == 0) return reply(c, ControlType::return_blocks, Status::Ok());
    return reply(c, ControlType::return_blocks,
                 {Errc::invalid_argument, std::to_string(refused) + " of " + std::to_string(n) + " blocks (the first: block " +
                                              std::to_string(first_refused.index) + " generation " +
                                              std::to_string(first_refused.generation) +
                                              ") are not reserved by this client; the others came back"});
  }

  // A name from a request is quoted escaped: it may hold any byte.
  Status no_such_table(const std::string& name) const {
    return {Errc::not_found, "no table named \"" + escaped(name) + "\"" + table_list()};
  }

  std::string table_list() const {
    if (tables.empty()) return " (there are no tables)";
    std::string s = " (tables:";
    for (auto& [n, e] : tables) s += " " + n;
    return s + ")";
  }

  bool hello(Client& c, const std::vector<char>& p) {
    HelloRequest rq;
    if (c.attached) return reply(c, ControlType::hello, {Errc::invalid_argument, "hello sent twice"});
    if (!read_payload(p, &rq)) {
      reply(c, ControlType::hello, {Errc::layout_mismatch, "malformed hello"});
      return false;
    }
    if (!permitted(c.cred)) {
      log_warn("refused pid " + std::to_string(c.cred.pid) + " uid " + std::to_string(c.cred.uid) + " gid " +
               std::to_string(c.cred.gid) + ": not the server's user and not in group " +
               group_name);
      reply(c, ControlType::hello,
            {Errc::permission_denied,
             "uid " + std::to_string(c.cred.uid) + " may not use this server; clients must be in group " +
                 group_name + ": sudo usermod -aG " + group_name + " \"$USER\", then log in again"});
      return false;
    }
    if (rq.protocol_version != kProtocolVersion || rq.layout_version != kLayoutVersion ||
        rq.arena_hash != kArenaLayoutHash || rq.channel_hash != kChannelLayoutHash || rq.bells_hash != kBellsLayoutHash) {
      reply(c, ControlType::hello,
            {Errc::layout_mismatch, "client speaks protocol " + std::to_string(rq.protocol_version) + " with layout " +
                                        std::to_string(rq.layout_version) + ", server protocol " +
                                        std::to_string(kProtocolVersion) + " with layout " +
                                        std::to_string(kLayoutVersion) + " (or the same version built differently)"});
      return false;
    }
    auto id = arena_ids.take("client");
    if (!id.ok()) {
      reply(c, ControlType::hello, {Errc::full, "too many clients (" + std::to_string(kArenaMaxClients) + " at most)"});
      return false;
    }
    c.id = *id;
    c.attached = true;
    log_info(who(c) + " attached (gid " + std::to_string(c.cred.gid) + ")");
    HelloReply hr{};
    hr.client_id = c.id;
    hr.ring_records = config.ring_records;
    hr.max_batch = config.ring_records;
    hr.arena_size = arena_seg.size();
    hr.bells_size = bells_seg.size();
    hr.server_pid = static_cast<uint64_t>(::getpid());
    hr.num_classes = arena.num_classes();
    for (uint32_t k = 0; k < arena.num_classes(); ++k)
      hr.classes[k] = {arena.size_class(k).block_size, arena.size_class(k).count};
    int fds[2] = {arena_seg.fd(), bells_seg.fd()};
    return send_message(c.fd, ControlType::hello, 0, &hr, sizeof hr, fds, 2).ok();
  }

  bool open_table(Client& c, const std::vector<char>& p) {
    NameRequest n;
    if (!read_payload(p, &n)) return reply(c, ControlType::open_table, {Errc::invalid_argument, "malformed request"});
    std::string name = fixed_string(n.name, sizeof n.name);
    TableEntry* e = find_table(name);
    if (!e) return reply(c, ControlType::open_table, no_such_table(name));
    if (c.channels.count(e->id))
      return reply(c, ControlType::open_table,
                   {Errc::already_exists, "table " + name + " is already open on this connection; use that handle"});
    ClientChannel ch;
    auto seg = make_segment("channel" + std::to_string(c.id) + "." + std::to_string(e->id),
                            Channel::bytes_needed(config.ring_records), ShmSegment::Sealing::fixed_size);
    if (!seg.ok()) return reply(c, ControlType::open_table, seg.status());
    ch.segment = std::move(*seg);
    auto chan = Channel::format(ch.segment.data(), ch.segment.size(), e->id, config.ring_records);
    if (!chan.ok()) return reply(c, ControlType::open_table, chan.status());
    e->owner->attach(c.id, *chan);
    OpenReply r{};
    r.table_id = e->id;
    r.channel_size = ch.segment.size();
    r.spec = e->owner->info().spec;
    int fd = ch.segment.fd();
    bool sent = send_message(c.fd, ControlType::open_table, 0, &r, sizeof r, &fd, 1).ok();
    ch.segment.close_fd();  // the client holds it now; the mapping here stays
    c.channels.emplace(e->id, std::move(ch));
    return sent;
  }

  // Everything the client held comes back: its channels' pins and holds, its
  // reserved blocks, its pending free-list operation.
  void disconnect(Client& c) {
    int64_t t0 = monotonic_ns();
    for (auto& [tid, ch] : c.channels)
      if (TableEntry* e = find_table(tid)) e->owner->detach(c.id, ChannelClosed::protocol_error);
    if (c.attached) {
      auto freed = arena.reclaim(c.id);
      if (!freed.ok()) log_error(who(c) + ": reclaim failed: " + freed.status().message());
      arena_ids.give(c.id);
      log_info(who(c) + " detached; reclaimed " + std::to_string(freed.ok() ? *freed : 0) + " reserved blocks and " +
               std::to_string(c.channels.size()) + " channels in " + std::to_string((monotonic_ns() - t0) / 1000) + " us");
    }
    ::close(c.fd);
    clients.erase(c.fd);
  }

  void apply_reload() {
    std::unique_ptr<ServerConfig> next;
    {
      std::lock_guard<std::mutex> lk(reload_mu);
      next.swap(pending_reload);
    }
    if (!next) return;
    for (const TableOptions& o : next->tables) {
      TableEntry* e = find_table(o.name);
      if (!e) {
        log_warn("reload: table " + o.name + " is new; create it with engramctl create-table or restart");
        continue;
      }
      Status s = e->owner->set_rate_limiter(o.rate_limiter);
      log_line(s.ok() ? LogLevel::info : LogLevel::warn,
               "reload: table " + o.name + ": " + (s.ok() ? "rate limiter applied" : s.message()));
    }
  }

  void note_checkpoint(const std::string& path) {
    ckpt_last_path = path;
    ckpt_last_ns = monotonic_ns();
  }

  // The shutdown checkpoint runs on the control thread (whoever stop()s
  // waits for it); the periodic ones on the worker, out of anyone's way.
  bool on_control_thread() const { return !thread.joinable() || std::this_thread::get_id() == thread.get_id(); }

  // Each probe: this thread answers by taking it; every owner by running a
  // no-op. Owners are pinged together and waited for under one deadline.
  void answer_probes() {
    std::vector<std::shared_ptr<HealthProbe>> probes;
    {
      std::lock_guard<std::mutex> lk(reload_mu);
      probes.swap(pending_probes);
    }
    for (auto& p : probes) {
      struct Answers {
        std::mutex mu;
        std::condition_variable cv;
        std::vector<bool> answered;
      };
      auto a = std::make_shared<Answers>();
      a->answered.assign(tables.size(), false);
      std::vector<std::string> names;
      for (auto& [n, e] : tables) {
        size_t i = names.size();
        names.push_back(n);
        e.owner->ping([a, i] {
          std::lock_guard<std::mutex> lk(a->mu);
          a->answered[i] = true;
          a->cv.notify_all();
        });
      }
      Server::Health h;
      {
        std::unique_lock<std::mutex> lk(a->mu);
        auto all = [&] { return std::find(a->answered.begin(), a->answered.end(), false) == a->answered.end(); };
        a->cv.wait_for(lk, std::chrono::milliseconds(p->timeout_ms), all);
        h.answering = all();
        for (size_t i = 0; i < names.size() && !h.answering; ++i)
          if (!a->answered[i]) h.stuck = "the owner of table " + names[i];
      }
      h.tables = tables.size();
      h.clients = clients.size();
      h.last_checkpoint = ckpt_last_path;
      if (!ckpt_last_path.empty()) h.last_checkpoint_age_s = (monotonic_ns() - ckpt_last_ns) / 1'000'000'000;
      std::lock_guard<std::mutex> lk(p->mu);
      p->h = std::move(h);
      p->done = true;
      p->cv.notify_all();
    }
  }

  void shutdown() {
    ::close(listen_fd);
    listen_fd = -1;
    ::unlink(config.socket_path.c_str());
    if (ckpt_thread.joinable()) {
      ckpt_thread.join();
      finish_checkpoint_replies();
    }
    if (config.checkpoint.on_shutdown && !config.checkpoint.dir.empty()) {
      log_info("checkpoint on shutdown");
      auto snap = take_snapshot();
      if (snap.ok()) (void)write_snapshot(std::move(*snap), ++ckpt_seq);
      else log_error("checkpoint on shutdown failed: " + snap.status().message());
    }
    for (auto& [n, e] : tables) e.owner->stop(ChannelClosed::daemon_stopping);
    for (auto& [fd, c] : clients) {
      (void)send_message(fd, ControlType::goodbye, 0, nullptr, 0);
      ::close(fd);
    }
    clients.clear();
    tables.clear();
    log_info("stopped; socket removed");
  }

  void wake() {
    uint64_t one = 1;
    (void)!::write(wake_fd, &one, sizeof one);
  }
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { stop(); }

Result<std::unique_ptr<Server>> Server::start(const ServerConfig& config, Progress progress) {
  auto impl = std::make_unique<Impl>();
  impl->progress = std::move(progress);
  if (Status s = impl->init(config); !s.ok()) {
    // Undo what init made; nothing else was served yet.
    for (auto& [n, e] : impl->tables) e.owner->stop(ChannelClosed::daemon_stopping);
    if (impl->listen_fd >= 0) ::unlink(impl->config.socket_path.c_str());
    return s;
  }
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

void Server::stop() {
  if (!impl_ || impl_->stopped.exchange(true)) return;
  impl_->stopping.store(true);
  impl_->wake();
  if (impl_->thread.joinable()) impl_->thread.join();
}

void Server::reload(const ServerConfig& config) {
  {
    std::lock_guard<std::mutex> lk(impl_->reload_mu);
    impl_->pending_reload = std::make_unique<ServerConfig>(config);
  }
  impl_->wake();
}

Server::Health Server::health(int timeout_ms) {
  auto p = std::make_shared<Impl::HealthProbe>();
  p->timeout_ms = std::max(1, timeout_ms / 2);  // owners get half; the control thread the rest
  {
    std::lock_guard<std::mutex> lk(impl_->reload_mu);
    impl_->pending_probes.push_back(p);
  }
  impl_->wake();
  std::unique_lock<std::mutex> lk(p->mu);
  if (!p->cv.wait_for(lk, std::chrono::milliseconds(std::max(1, timeout_ms)), [&] { return p->done; })) {
    Health h;
    h.stuck = "the control thread";
    return h;
  }
  return p->h;
}

const std::string& Server::socket_path() const noexcept { return impl_->config.socket_path; }
const std::string& Server::shm_prefix() const noexcept { return impl_->prefix; }

}  // namespace engram
