// The server's life: start-up (socket path, the shared segments, restore,
// the configured tables), the control loop, reload, health probes and the
// stop. What each control message does is control_protocol.cpp's.
#include "server/server.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <new>

#include "core/fnv.hpp"
#include "core/signature.hpp"
#include "server/log.hpp"
#include "server/server_impl.hpp"

namespace engram {
namespace {

Status sys_error(const std::string& what) { return {Errc::system, what + ": " + std::strerror(errno)}; }

// The settings of `wanted` (a table in the config) that `running` (the
// table as made, or as a checkpoint restored it) does not have, by their
// config keys, the rate limiter left out: a reload applies it, and
// an operator who edited max_size would otherwise see "rate limiter
// applied" and think the edit took; a restore keeps the checkpoint's.
std::string settings_kept(const TableOptions& running, const TableOptions& wanted, bool& limiter_differs) {
  std::string out;
  auto differs = [&](bool d, const char* key) {
    if (d) out += (out.empty() ? "" : ", ") + std::string(key);
  };
  differs(running.capacity != wanted.capacity, "max_size");
  differs(running.sampler.kind != wanted.sampler.kind, "sampler");
  differs(running.remover.kind != wanted.remover.kind, "remover");
  // An exponent means something to a prioritized sampler only (a
  // selector keeps none for the others: Selector::format).
  const bool prioritized = wanted.sampler.kind == SelectorKind::prioritized;
  differs(prioritized && running.sampler.exponent != wanted.sampler.exponent, "priority_exponent");
  differs(running.max_times_sampled != wanted.max_times_sampled, "max_times_sampled");
  differs(running.max_refs_per_item != wanted.max_refs_per_item, "max_chunks_per_item");
  differs(!same_signature(running.signature.data(), running.signature.size(), wanted.signature.data(),
                          wanted.signature.size()),
          "column");
  const RateLimiterConfig &a = running.rate_limiter, &b = wanted.rate_limiter;
  limiter_differs = a.samples_per_insert != b.samples_per_insert || a.min_size_to_sample != b.min_size_to_sample ||
                    a.min_diff != b.min_diff || a.max_diff != b.max_diff;
  return out;
}

}  // namespace

std::string shm_prefix_for(const ServerConfig& c) {
  if (!c.shm_prefix.empty()) return c.shm_prefix;
  uint64_t h = fnv1a(kFnvOffset, c.socket_path.data(), c.socket_path.size());
  char name[32];
  std::snprintf(name, sizeof name, "engram-%012llx", static_cast<unsigned long long>(h & 0xffffffffffffULL));
  return name;
}

Server::Impl::~Impl() {
  if (listen_fd >= 0) ::close(listen_fd);
  if (wake_fd >= 0) ::close(wake_fd);
  if (reserve_fd >= 0) ::close(reserve_fd);
}

// --- start-up --------------------------------------------------------------

Status Server::Impl::init(const ServerConfig& c) {
  config = c;
  if (Status s = validate_config(config); !s.ok()) return s;
  const ArenaPlan plan = plan_arena(config);
  config.arena = plan.start;
  prefix = shm_prefix_for(config);
  auto a = AccessControl::for_group(config.group);
  if (!a.ok()) return a.status();
  access = *a;
  if (Status s = claim_socket_path(); !s.ok()) return s;
  if (Status s = make_arena(plan); !s.ok()) return s;
  tables = std::make_unique<TableRegistry>(arena, bells, &arena_ids, prefix, config.ring_records);
  std::map<std::string, uint32_t> views;
  for (const RemoteConfig::View& v : config.remote.views) views[v.table] = static_cast<uint32_t>(v.shards.size());
  tables->set_views(std::move(views));
  auto ck_id = arena_ids.take("checkpointer");
  if (!ck_id.ok()) return ck_id.status();
  checkpoints = std::make_unique<CheckpointScheduler>(
      config.checkpoint, arena, *ck_id, tables.get(), progress, [this] { wake(); },
      [](int fd, const Status& s, const std::string& path) {
        if (s.ok()) (void)send_message(fd, ControlType::checkpoint, 0, path.data(), path.size());
        else (void)send_message(fd, ControlType::checkpoint, static_cast<int32_t>(s.code()), s.message().data(),
                                s.message().size());
      });
  if (Status s = checkpoints->restore_at_start(); !s.ok()) return s;
  auto export_id = arena_ids.take("exports");
  if (!export_id.ok()) return export_id.status();
  export_arena_id = *export_id;
  for (const CheckedTableOptions& checked : config.tables) {
    const TableOptions& o = *checked;
    if (TableEntry* e = tables->find(o.name)) {
      bool limiter = false;
      std::string kept = settings_kept(*e->owner->options(), o, limiter);
      if (limiter) kept += (kept.empty() ? "" : ", ") + std::string("rate_limiter");
      if (kept.empty())
        log_info("table " + o.name + ": restored from the checkpoint, as its [[table]] entry in the config says");
      else
        log_warn("table " + o.name + ": restored from the checkpoint, which keeps its own " + kept +
                 ": the [[table]] entry in the config differs and is not applied (engramd.toml(5), [[table]]). "
                 "To apply it, drop the table and create it again (its items go), or start without the checkpoint");
      continue;
    }
    if (Status s = tables->create(checked); !s.ok()) return {s.code(), "table \"" + o.name + "\": " + s.message()};
  }
  wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) return sys_error("eventfd");
  if (Status s = fit_descriptors(); !s.ok()) return s;
  if (Status s = listen_socket(); !s.ok()) return s;
  if (!ShmSegment::seal_note().empty()) log_warn(ShmSegment::seal_note());
  log_info("serving " + config.socket_path + " (arena " + std::to_string(plan.start_bytes >> 20) + " MiB" +
           (plan.grow_to > plan.start_bytes ? ", growing to " + std::to_string(plan.grow_to >> 20) + " MiB" : "") + ", " +
           std::to_string(tables->size()) + " tables)");
  thread = std::thread([this] { control_loop(); });
  return Status::Ok();
}

Status Server::Impl::claim_socket_path() {
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
    return {Errc::already_exists,
            "another server is live on " + path + "; stop it first, or give this one another --socket"};
  ::unlink(path.c_str());
  log_warn("removed the stale socket " + path + " of a server that is gone");
  return Status::Ok();
}

// Sealed memfds: clients reach them only through the descriptors sent over
// the socket, and none can resize them (ShmSegment::Sealing).
Server::Impl::MetaMapping::~MetaMapping() {
  if (addr) ::munmap(addr, size);
}

// The segment is laid out for every class at its most (plan_arena), and
// only the blocks it starts with are reserved: the rest is a hole that
// the classes grow into (ChunkArena, "Growth"), mapped but costing no
// memory until then.
Status Server::Impl::make_arena(const ArenaPlan& plan) {
  size_t need = ArenaBlocks::bytes_needed(plan.layout);
  if (need == 0) {
    Status s = ArenaBlocks::validate(plan.layout);
    return {s.code(), "arena.classes: " + s.message()};
  }
  std::vector<std::pair<uint64_t, uint64_t>> reserved;
  std::vector<uint32_t> committed;
  uint64_t offset = 0;
  for (size_t k = 0; k < plan.layout.classes.size(); ++k) {
    const SizeClassConfig& most = plan.layout.classes[k];
    reserved.push_back({offset, most.block_size * plan.start.classes[k].count});
    committed.push_back(plan.start.classes[k].count);
    offset += most.block_size * most.count;
  }
  auto seg = ShmSegment::create_sealed(prefix + ".arena", need, ShmSegment::Sealing::fixed_size, reserved);
  if (!seg.ok()) return seg.status();
  arena_seg = std::move(*seg);
  size_t meta = align_up(ChunkArena::meta_bytes_needed(plan.layout), kCacheLine);
  void* m = ::mmap(nullptr, meta, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED)
    return {Errc::out_of_memory, "no memory for the arena's " + std::to_string(meta) + " bytes of block states"};
  arena_meta.addr = m;
  arena_meta.size = meta;
  auto a = ChunkArena::format(m, meta, arena_seg.data(), arena_seg.size(), plan.layout, committed);
  if (!a.ok()) return a.status();
  arena = *a;
  for (uint32_t k = 0; k < arena.num_classes(); ++k)
    arena.set_client_limit(k, client_block_limit(arena.committed(k), config.max_reserved_share));
  if (plan.grow_to > plan.start_bytes) {
    arena_growth.max_bytes = plan.grow_to;
    arena_growth.commit = [this](uint64_t off, uint64_t bytes) { return arena_seg.commit(off, bytes); };
    arena_growth.release = [this](uint64_t off, uint64_t bytes) { return arena_seg.release(off, bytes); };
    arena_growth.grown = [this](uint32_t k, uint32_t blocks) {
      arena.set_client_limit(k, std::max(arena.client_limit(k), client_block_limit(blocks, config.max_reserved_share)));
      log_info("arena: the class of " + size_text(arena.size_class(k).block_size) + " blocks grew to " +
               std::to_string(blocks) + " blocks ([arena] grow_to " + size_text(arena_growth.max_bytes) + ")");
    };
    arena.set_growth(&arena_growth);
  }
  auto b = ShmSegment::create_sealed(prefix + ".bells", sizeof(BellsHeader), ShmSegment::Sealing::fixed_size);
  if (!b.ok()) return b.status();
  bells_seg = std::move(*b);
  bells = new (bells_seg.data()) BellsHeader{};
  segment_begin_format(&bells->segment, SegmentKind::bells, kBellsLayoutHash, bells_seg.size());
  segment_publish(&bells->segment);
  return Status::Ok();
}

Status Server::Impl::listen_socket() {
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
  if (access.gid() != ::getegid() && ::chown(config.socket_path.c_str(), static_cast<uid_t>(-1), access.gid()) != 0)
    return sys_error("cannot give " + config.socket_path + " to group " + access.group_name());
  if (::listen(listen_fd, 64) != 0) return sys_error("listen");
  return Status::Ok();
}

// --- the control loop ---------------------------------------------------------

void Server::Impl::control_loop() {
  std::vector<pollfd> fds;
  while (!stopping.load()) {
    fds.clear();
    fds.push_back({wake_fd, POLLIN, 0});
    // Not while accept rests (a negative descriptor is skipped by poll).
    fds.push_back({monotonic_ns() < accept_paused_until_ns ? -1 : listen_fd, POLLIN, 0});
    for (auto& [fd, c] : clients) fds.push_back({fd, POLLIN, 0});
    int timeout = checkpoints->poll_timeout_ms();
    for (int t : {connections_poll_ms(), exports_poll_ms(), trim_poll_ms()})
      if (timeout < 0 || (t >= 0 && t < timeout)) timeout = t;
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
      checkpoints->reap();
    }
    checkpoints->tick();
    if (fds[1].revents & POLLIN) accept_clients();
    for (size_t i = 2; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      auto it = clients.find(fds[i].fd);
      if (it == clients.end()) continue;
      if (!serve(it->second)) disconnect(it->second);
    }
    close_silent();
    lapse_exports();
    trim_arena();
  }
  shutdown();
}

// How often the arena's holes are trimmed (ChunkArena::trim_holes): a
// client's touch of a hole costs memory until then, and a trim that finds
// nothing frees no page (bench/NOTES.md, "Growth on demand").
constexpr int64_t kTrimHolesNs = 1'000'000'000;

int Server::Impl::trim_poll_ms() const {
  if (arena_growth.max_bytes == 0) return -1;
  return static_cast<int>(std::max<int64_t>(0, (next_trim_ns - monotonic_ns()) / 1'000'000 + 1));
}

void Server::Impl::trim_arena() {
  if (arena_growth.max_bytes == 0 || monotonic_ns() < next_trim_ns) return;
  next_trim_ns = monotonic_ns() + kTrimHolesNs;
  if (Status s = arena.trim_holes(); !s.ok()) trim_failures.note("arena: " + s.message());
}

void Server::Impl::apply_reload() {
  std::unique_ptr<ServerConfig> next;
  {
    std::lock_guard<std::mutex> lk(requests_mu);
    next.swap(pending_reload);
  }
  if (!next) return;
  for (const CheckedTableOptions& checked : next->tables) {
    const TableOptions& o = *checked;
    TableEntry* e = tables->find(o.name);
    if (!e) {
      log_warn("reload: table " + o.name + " is new; create it with engramctl create-table or restart");
      continue;
    }
    bool limiter = false;
    std::string kept = settings_kept(*e->owner->options(), o, limiter);
    if (!kept.empty())
      log_warn("reload: table " + o.name + ": " + kept + " in the config differ from the running table and are not "
               "applied: a reload changes rate limiters only (drop the table and create it again to change them)");
    Status s = e->owner->set_rate_limiter(o.rate_limiter);
    log_line(s.ok() ? LogLevel::info : LogLevel::warn,
             "reload: table " + o.name + ": " + (s.ok() ? "rate limiter applied" : s.message()));
  }
}

// Each probe: this thread answers by taking it; every owner by running a
// no-op. Owners are pinged together and waited for under one deadline.
void Server::Impl::answer_probes() {
  std::vector<std::shared_ptr<HealthProbe>> probes;
  {
    std::lock_guard<std::mutex> lk(requests_mu);
    probes.swap(pending_probes);
  }
  for (auto& p : probes) {
    struct Answers {
      std::mutex mu;
      std::condition_variable cv;
      std::vector<bool> answered;
    };
    auto a = std::make_shared<Answers>();
    a->answered.assign(tables->size(), false);
    std::vector<std::string> names;
    for (auto& [n, e] : tables->all()) {
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
    h.tables = tables->size();
    h.clients = clients.size();
    h.last_checkpoint = checkpoints->last_path();
    if (!h.last_checkpoint.empty()) h.last_checkpoint_age_s = (monotonic_ns() - checkpoints->last_ns()) / 1'000'000'000;
    std::lock_guard<std::mutex> lk(p->mu);
    p->h = std::move(h);
    p->done = true;
    p->cv.notify_all();
  }
}

void Server::Impl::shutdown() {
  ::close(listen_fd);
  listen_fd = -1;
  ::unlink(config.socket_path.c_str());
  checkpoints->shutdown();
  tables->stop_all(ChannelClosed::daemon_stopping);
  for (auto& [fd, c] : clients) {
    (void)send_message(fd, ControlType::goodbye, 0, nullptr, 0);
    ::close(fd);
  }
  clients.clear();
  log_info("stopped; socket removed");
}

void Server::Impl::wake() {
  uint64_t one = 1;
  (void)!::write(wake_fd, &one, sizeof one);
}

// --- Server ---------------------------------------------------------------------

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { stop(); }

Result<std::unique_ptr<Server>> Server::start(const ServerConfig& config, Progress progress) {
  auto impl = std::make_unique<Impl>();
  impl->progress = std::move(progress);
  if (Status s = impl->init(config); !s.ok()) {
    // Undo what init made; nothing else was served yet.
    if (impl->tables) impl->tables->stop_all(ChannelClosed::daemon_stopping);
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
    std::lock_guard<std::mutex> lk(impl_->requests_mu);
    impl_->pending_reload = std::make_unique<ServerConfig>(config);
  }
  impl_->wake();
}

Server::Health Server::health(int timeout_ms) {
  auto p = std::make_shared<Impl::HealthProbe>();
  p->timeout_ms = std::max(1, timeout_ms / 2);  // owners get half; the control thread the rest
  {
    std::lock_guard<std::mutex> lk(impl_->requests_mu);
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

void Server::set_remote_status(RemoteStatus f) {
  std::lock_guard lock(impl_->requests_mu);
  impl_->remote_view = std::move(f);
}

const std::string& Server::socket_path() const noexcept { return impl_->config.socket_path; }
const std::string& Server::shm_prefix() const noexcept { return impl_->prefix; }

}  // namespace engram
