// The control socket's messages (core/control_message.hpp), one handler
// each, on the control thread. Every payload is untrusted: sizes are
// checked before it is read, names are read with a bound and quoted
// escaped, and a malformed message gets an error reply, never a crash. A
// client must say hello (versions, layout hashes, credentials) before
// anything else.
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "core/name.hpp"
#include "server/log.hpp"
#include "server/server_impl.hpp"

#ifndef ENGRAM_VERSION_STRING
#define ENGRAM_VERSION_STRING "0.0.0"
#endif

namespace engram {
std::string Server::Impl::who(const Client& c) const {
  return "client " + std::to_string(c.id) + " (pid " + std::to_string(c.cred.pid) + ", uid " +
         std::to_string(c.cred.uid) + ")";
}

bool Server::Impl::reply(Client& c, ControlType t, const Status& s, const void* payload, size_t size) {
  if (!s.ok()) return send_message(c.fd, t, static_cast<int32_t>(s.code()), s.message().data(), s.message().size()).ok();
  return send_message(c.fd, t, 0, payload, size).ok();
}

bool Server::Impl::serve(Client& c) {
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
    case ControlType::create_table: return create_table(c, p);
    case ControlType::open_table: return open_table(c, p);
    case ControlType::close_table: return close_table(c, p);
    case ControlType::drop_table:
    case ControlType::reset_table:
    case ControlType::table_info: return named_table_request(c, type, p);
    case ControlType::list_tables: {
      std::vector<TableInfoWire> all;
      for (auto& [n, e] : tables->all()) all.push_back(e.owner->info());
      return reply(c, type, Status::Ok(), all.data(), all.size() * sizeof(TableInfoWire));
    }
    case ControlType::list_items: return list_items(c, p);
    case ControlType::set_rate_limiter: return set_rate_limiter(c, p);
    case ControlType::status: return status(c);
    case ControlType::remote_status: return remote_status(c, p);
    case ControlType::checkpoint:
      checkpoints->request(c.fd);  // answered when written
      return true;
    case ControlType::grant_blocks: return grant_blocks(c, p);
    case ControlType::return_blocks: return return_blocks(c, p);
    case ControlType::export_begin: return export_begin(c, p);
    case ControlType::export_items: return export_items(c, p);
    case ControlType::export_end: return export_end(c);
    case ControlType::goodbye: return false;
  }
  return reply(c, type, {Errc::invalid_argument, "unknown control message type " + std::to_string(h.type)});
}

bool Server::Impl::hello(Client& c, const std::vector<char>& p) {
  HelloRequest rq;
  if (c.attached) return reply(c, ControlType::hello, {Errc::invalid_argument, "hello sent twice"});
  if (!read_payload(p, &rq)) {
    reply(c, ControlType::hello, {Errc::layout_mismatch, "malformed hello"});
    return false;
  }
  if (!access.permits(c.cred)) {
    log_warn("refused pid " + std::to_string(c.cred.pid) + " uid " + std::to_string(c.cred.uid) + " gid " +
             std::to_string(c.cred.gid) + ": not the server's user and not in group " + access.group_name());
    reply(c, ControlType::hello, {Errc::permission_denied, access.refusal(c.cred)});
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
  if (std::string why = uid_refusal(c.cred.uid); !why.empty()) {
    refusals.note("refused connections: " + why);
    ++refused;
    reply(c, ControlType::hello, {Errc::limit, why});
    return false;
  }
  auto id = arena_ids.take("client");
  if (!id.ok()) {
    reply(c, ControlType::hello, {Errc::full, "too many clients (" + std::to_string(kArenaMaxClients) + " at most)"});
    return false;
  }
  c.id = *id;
  c.attached = true;
  --startups;
  ++connections_by_uid[c.cred.uid];
  log_info(who(c) + " attached (gid " + std::to_string(c.cred.gid) + ")");
  HelloReply hr{};
  hr.client_id = c.id;
  hr.ring_records = config.ring_records;
  hr.max_batch = config.ring_records;
  hr.arena_size = arena_seg.size();
  hr.bells_size = bells_seg.size();
  hr.server_pid = static_cast<uint64_t>(::getpid());
  hr.num_classes = arena.num_classes();
  for (uint32_t k = 0; k < arena.num_classes(); ++k) {
    hr.classes[k] = {arena.size_class(k).block_size, arena.size_class(k).count};
    hr.client_limit[k] = arena.client_limit(k);
    hr.committed[k] = arena.committed(k);
  }
  int fds[2] = {arena_seg.fd(), bells_seg.fd()};
  return send_message(c.fd, ControlType::hello, 0, &hr, sizeof hr, fds, 2).ok();
}

bool Server::Impl::create_table(Client& c, const std::vector<char>& p) {
  TableSpec spec;
  if (!read_payload(p, &spec)) return reply(c, ControlType::create_table, {Errc::invalid_argument, "malformed table spec"});
  spec.name[sizeof spec.name - 1] = '\0';
  if (spec.num_columns > kMaxColumns)  // the array's bound: from_spec reads no further
    return reply(c, ControlType::create_table,
                 {Errc::invalid_argument, "more than " + std::to_string(kMaxColumns) + " columns"});
  auto checked = Table::check(from_spec(spec));
  if (!checked.ok()) return reply(c, ControlType::create_table, checked.status());
  Status s = tables->create(*checked);
  if (s.ok()) log_info(who(c) + " created table " + (*checked)->name);
  return reply(c, ControlType::create_table, s);
}

bool Server::Impl::open_table(Client& c, const std::vector<char>& p) {
  NameRequest n;
  if (!read_payload(p, &n)) return reply(c, ControlType::open_table, kMalformed);
  std::string name = fixed_string(n.name, sizeof n.name);
  TableEntry* e = tables->find(name);
  if (!e) return reply(c, ControlType::open_table, tables->no_such_table(name));
  if (c.channels.count(e->id))
    return reply(c, ControlType::open_table,
                 {Errc::already_exists, "table " + name + " is already open on this connection; use that handle"});
  auto seg = ShmSegment::create_sealed(prefix + ".channel" + std::to_string(c.id) + "." + std::to_string(e->id),
                                       Channel::bytes_needed(config.ring_records), ShmSegment::Sealing::fixed_size);
  if (!seg.ok()) return reply(c, ControlType::open_table, seg.status());
  auto chan = Channel::format(seg->data(), seg->size(), e->id, config.ring_records);
  if (!chan.ok()) return reply(c, ControlType::open_table, chan.status());
  e->owner->attach(c.id, *chan);
  OpenReply r{};
  r.table_id = e->id;
  r.channel_size = seg->size();
  r.spec = e->owner->info().spec;
  int fd = seg->fd();
  bool sent = send_message(c.fd, ControlType::open_table, 0, &r, sizeof r, &fd, 1).ok();
  seg->close_fd();  // the client holds it now; the mapping here stays
  c.channels.emplace(e->id, std::move(*seg));
  return sent;
}

bool Server::Impl::close_table(Client& c, const std::vector<char>& p) {
  NameRequest n;
  if (!read_payload(p, &n)) return reply(c, ControlType::close_table, kMalformed);
  TableEntry* e = tables->find(fixed_string(n.name, sizeof n.name));
  if (e && c.channels.count(e->id)) {
    e->owner->detach(c.id, ChannelClosed::table_dropped);
    c.channels.erase(e->id);
  }
  return reply(c, ControlType::close_table, Status::Ok());
}

// drop_table, reset_table, table_info: a table by name.
bool Server::Impl::named_table_request(Client& c, ControlType type, const std::vector<char>& p) {
  NameRequest n;
  if (!read_payload(p, &n)) return reply(c, type, kMalformed);
  std::string name = fixed_string(n.name, sizeof n.name);
  TableEntry* e = tables->find(name);
  if (!e) return reply(c, type, tables->no_such_table(name));
  if (type == ControlType::drop_table) {
    log_info(who(c) + " drops table " + name);
    drop_table(name);
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

bool Server::Impl::list_items(Client& c, const std::vector<char>& p) {
  ItemsRequest rq;
  if (!read_payload(p, &rq)) return reply(c, ControlType::list_items, kMalformed);
  std::string name = fixed_string(rq.name, sizeof rq.name);
  TableEntry* e = tables->find(name);
  if (!e) return reply(c, ControlType::list_items, tables->no_such_table(name));
  if (rq.max_items == 0 || rq.max_items > kMaxListedItems)
    return reply(c, ControlType::list_items,
                 {Errc::invalid_argument, "list_items asks for " + std::to_string(rq.max_items) +
                                              " items; allowed 1.." + std::to_string(kMaxListedItems)});
  std::vector<char> out(sizeof(ItemsReply));
  std::vector<ListedItem> items;
  ItemsReply h{};
  h.next_slot = e->owner->list(rq.from_slot, rq.max_items, &items, &h.capacity);
  h.count = static_cast<uint32_t>(items.size());
  std::memcpy(out.data(), &h, sizeof h);
  out.insert(out.end(), reinterpret_cast<const char*>(items.data()),
             reinterpret_cast<const char*>(items.data() + items.size()));
  return reply(c, ControlType::list_items, Status::Ok(), out.data(), out.size());
}

void Server::Impl::drop_table(const std::string& name) {
  TableEntry* e = tables->find(name);
  if (!e) return;
  uint32_t id = e->id;
  tables->drop(name);
  for (auto& [fd, c] : clients) c.channels.erase(id);
}

bool Server::Impl::set_rate_limiter(Client& c, const std::vector<char>& p) {
  RateLimiterRequest rq;
  if (!read_payload(p, &rq)) return reply(c, ControlType::set_rate_limiter, kMalformed);
  std::string name = fixed_string(rq.name, sizeof rq.name);
  TableEntry* e = tables->find(name);
  if (!e) return reply(c, ControlType::set_rate_limiter, tables->no_such_table(name));
  Status s = e->owner->set_rate_limiter(rq.limiter);
  if (s.ok()) log_info(who(c) + " changed the rate limiter of table " + name);
  return reply(c, ControlType::set_rate_limiter, s);
}

bool Server::Impl::status(Client& c) {
  StatusReply st{};
  st.pid = static_cast<uint64_t>(::getpid());
  st.uptime_ms = static_cast<uint64_t>((monotonic_ns() - started_ns) / 1000000);
  std::vector<ClientStatus> each;
  for (const auto& [fd, k] : clients) {
    if (!k.attached) continue;
    ClientStatus cs{k.id, static_cast<uint32_t>(k.cred.pid), k.cred.uid, static_cast<uint32_t>(k.channels.size()), 0};
    for (uint32_t sc = 0; sc < arena.num_classes(); ++sc) cs.reserved_blocks += arena.reserved_by(k.id, sc);
    each.push_back(cs);
  }
  st.clients = static_cast<uint32_t>(each.size());
  st.connections = static_cast<uint32_t>(clients.size());
  st.max_connections = max_connections;
  st.max_connections_per_uid = std::min(config.max_connections_per_uid, max_connections);
  st.fds_open = fds_open();
  st.fds_limit = fds_limit();
  st.refused = refused;
  for (const auto& [id, w] : waiting_for_blocks) {
    if (monotonic_ns() - w.last_ns > kWaitingForBlocksNs) continue;
    uint64_t size = arena.size_class(w.size_class).block_size;
    ++st.waiting_for_blocks;
    if (st.waiting_block_size == 0 || size < st.waiting_block_size) st.waiting_block_size = size;
  }
  st.tables = static_cast<uint32_t>(tables->size());
  st.num_classes = arena.num_classes();
  for (uint32_t sc = 0; sc < arena.num_classes(); ++sc) {
    auto& out = st.classes[sc];
    const SizeClass& k = arena.size_class(sc);
    out.block_size = k.block_size;
    out.total = arena.committed(sc);
    out.most = arena.most_blocks(sc);
    st.arena_bytes += k.block_size * out.total;
    st.blocks_total += out.total;
    for (uint32_t i = k.first_block; i < k.first_block + out.total; ++i) {
      BlockKind b = arena.kind(i);
      (b == BlockKind::free ? out.free : b == BlockKind::reserved ? out.reserved : out.sealed)++;
    }
    st.blocks_free += out.free;
    st.blocks_reserved += out.reserved;
    st.blocks_sealed += out.sealed;
  }
  st.arena_grow_to = std::max<uint64_t>(st.arena_bytes, arena_growth.max_bytes);
  std::strncpy(st.version, ENGRAM_VERSION_STRING, sizeof st.version - 1);
  // kMaxConnections clients would not fit one message; those attached are
  // fewer than the arena's client ids, which do.
  static_assert(sizeof(StatusReply) + sizeof(ClientStatus) * kArenaMaxClients <= kMaxControlPayload);
  std::vector<char> out(sizeof st + each.size() * sizeof(ClientStatus));
  std::memcpy(out.data(), &st, sizeof st);
  if (!each.empty()) std::memcpy(out.data() + sizeof st, each.data(), each.size() * sizeof(ClientStatus));
  return reply(c, ControlType::status, Status::Ok(), out.data(), out.size());
}

bool Server::Impl::remote_status(Client& c, const std::vector<char>& p) {
  uint32_t json = 0;
  if (!read_payload(p, &json) || json > 1)
    return reply(c, ControlType::remote_status, {Errc::invalid_argument, "remote_status takes one word, 0 or 1"});
  std::string text;
  {
    std::lock_guard lock(requests_mu);
    if (remote_view) text = remote_view(json != 0);
  }
  if (text.size() > kMaxControlPayload) text.resize(kMaxControlPayload);
  return reply(c, ControlType::remote_status, Status::Ok(), text.data(), text.size());
}

// Blocks for a client's writers, reserved by it: taken here, with the
// control thread's id, and handed over.
bool Server::Impl::grant_blocks(Client& c, const std::vector<char>& p) {
  GrantRequest rq;
  if (!read_payload(p, &rq)) return reply(c, ControlType::grant_blocks, kMalformed);
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
      (void)arena.free_reserved(kArenaDaemonClient, *b);
      why = s;
      break;
    }
    granted.push_back(*b);
  }
  if (why.code() == Errc::limit)
    why = {Errc::limit, why.message() + "; its share is engramd.toml [client] max_reserved_share = " +
                            number_text(config.max_reserved_share) +
                            ": keep fewer writers or chunks in flight, or raise it"};
  if (granted.empty() && why.code() == Errc::out_of_memory) {
    const SizeClass& k = arena.size_class(rq.size_class);
    std::string bound = arena.growth_refusal();
    arena_waits.note("writers wait for arena blocks of " + std::to_string(k.block_size) + " bytes: all " +
                     std::to_string(arena.committed(rq.size_class)) +
                     " of that class hold chunks of items or are being written" +
                     (bound.empty() ? std::string() : ", and it cannot grow: " + bound) +
                     "; they wait until items leave "
                     "(evicted at max_size, sampled out, deleted); give [arena] more blocks of that size or a larger "
                     "grow_to, write several steps a chunk (chunk_length), or keep fewer items (max_size)");
    if (Status end = wait_without_end(c, rq.size_class); !end.ok()) {
      log_error(who(c) + ": " + end.message());
      waiting_for_blocks.erase(c.id);
      return reply(c, ControlType::grant_blocks, end);
    }
  } else if (!granted.empty()) {
    waiting_for_blocks.erase(c.id);
  }
  if (granted.empty()) return reply(c, ControlType::grant_blocks, why);
  if (!why.ok() && why.code() != Errc::out_of_memory && why.code() != Errc::limit)
    log_error("granting blocks to " + who(c) + ": " + why.message());
  return reply(c, ControlType::grant_blocks, Status::Ok(), granted.data(), granted.size() * sizeof(BlockRef));
}

// How long a writer waits for blocks, with none of its class freed or
// taken and no table able to remove an item by itself, before the wait is
// called hopeless: long enough for what frees blocks a moment late (a
// batch released, a peer's held chunks forgotten, a checkpoint's pins),
// short next to a wait for ever.
constexpr int64_t kHopelessWaitNs = 2'000'000'000;

// A wait for class k's blocks ends when one is freed: an item leaves (a
// full table evicts on insert, a max_times_sampled table on sample, a
// client deletes, resets or drops) or a client gives a block back or dies.
// When no block of the class came or went for kHopelessWaitNs and no table
// is full or expires what it samples, only a client's delete could end it:
// with no timeout the writer would wait for ever, so it is told instead.
Status Server::Impl::wait_without_end(Client& c, uint32_t k) {
  const int64_t now = monotonic_ns();
  const uint64_t word = arena.free_list_word(k);
  auto [it, fresh] = waiting_for_blocks.try_emplace(c.id, BlockWait{now, now, k, word});
  BlockWait& w = it->second;
  w.last_ns = now;
  if (fresh || w.size_class != k || w.list_word != word) {
    w = BlockWait{now, now, k, word};
    return Status::Ok();
  }
  if (now - w.since_ns < kHopelessWaitNs) return Status::Ok();
  w.since_ns = now;  // what follows asks every owner: at most once a wait
  std::string held;
  for (auto& [name, e] : tables->all()) {
    TableInfoWire i = e.owner->info();
    if (i.spec.max_times_sampled > 0 || i.size >= i.spec.capacity) return Status::Ok();
    if (held.size() < 200)
      held += (held.empty() ? "" : ", ") + name + " (" + std::to_string(i.size) + " of " +
              std::to_string(i.spec.capacity) + ")";
  }
  const SizeClass& sc = arena.size_class(k);
  const std::string bound = arena.growth_refusal();
  return {Errc::arena_exhausted,
          "the arena's " + std::to_string(arena.committed(k)) + " blocks of " + std::to_string(sc.block_size) +
              " bytes all hold chunks of items, and no table will let one go: none is full (so none evicts) and "
              "none has max_times_sampled (so samples keep them); tables: " +
              held + (bound.empty() ? std::string() : "; and " + bound) +
              ". Give [arena] more blocks of that size (engramd.toml(5)), write several steps a chunk "
              "(chunk_length), lower max_size, or delete items"};
}

// Blocks a client no longer needs. Only those it holds reserved come
// back; any other (another's, sealed, free, a stale generation) is
// refused and changes nothing.
bool Server::Impl::return_blocks(Client& c, const std::vector<char>& p) {
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

void Server::Impl::disconnect(Client& c) {
  int64_t t0 = monotonic_ns();
  for (auto& [tid, ch] : c.channels)
    if (TableEntry* e = tables->find(tid)) e->owner->detach(c.id, ChannelClosed::protocol_error);
  if (c.attached) {
    auto freed = arena.reclaim(c.id);
    if (!freed.ok()) log_error(who(c) + ": reclaim failed: " + freed.status().message());
    arena_ids.give(c.id);
    log_info(who(c) + " detached; reclaimed " + std::to_string(freed.ok() ? *freed : 0) + " reserved blocks and " +
             std::to_string(c.channels.size()) + " channels in " + std::to_string((monotonic_ns() - t0) / 1000) + " us");
  }
  if (c.table_export) release_export(*c.table_export);
  checkpoints->forget(c.fd);  // before its descriptor number can be another client's
  waiting_for_blocks.erase(c.id);
  if (!c.attached) --startups;
  else if (auto it = connections_by_uid.find(c.cred.uid); it != connections_by_uid.end() && --it->second == 0)
    connections_by_uid.erase(it);
  ::close(c.fd);
  clients.erase(c.fd);
}

}  // namespace engram
