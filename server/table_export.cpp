// Exports: one table's items at one moment, handed to a client page by
// page with their chunk references, the chunks pinned until the client
// has copied them out (control_message.hpp, ExportBeginReply). The table
// stands still only while its index is copied, as for a checkpoint; the
// server never reads a chunk's bytes for an export, and a client that
// stops asking loses its pins after kExportIdleMs.
#include <algorithm>
#include <cstring>
#include <latch>
#include <unordered_set>

#include "core/name.hpp"
#include "server/server_impl.hpp"

namespace engram {
namespace {

// Exports one user may hold at once: each pins a whole table's chunks,
// which a table that goes on evicting cannot reuse until it ends.
constexpr uint32_t kMaxExportsPerUid = 2;

Status no_export() {
  return {Errc::invalid_argument, "no export is open on this connection (export_begin first, or it ended)"};
}

}  // namespace

bool Server::Impl::export_begin(Client& c, const std::vector<char>& p) {
  constexpr ControlType kType = ControlType::export_begin;
  NameRequest rq;
  if (!read_payload(p, &rq)) return reply(c, kType, kMalformed);
  std::string name = fixed_string(rq.name, sizeof rq.name);
  if (c.table_export) return reply(c, kType, {Errc::invalid_argument, "an export is open on this connection; end it first"});
  uint32_t mine = 0;
  for (const auto& [fd, other] : clients)
    if (other.cred.uid == c.cred.uid && other.table_export && !other.table_export->lapsed) ++mine;
  if (mine >= kMaxExportsPerUid)
    return reply(c, kType, {Errc::limit, "uid " + std::to_string(c.cred.uid) + " has " + std::to_string(mine) +
                                             " exports open, the most one user may; wait for one to end"});
  TableEntry* e = tables->find(name);
  if (!e) return reply(c, kType, tables->no_such_table(name));

  // Read before the table stands still (a parked owner answers nothing);
  // only its rate limiter may change meanwhile, and the export's reader
  // wants the signature, which cannot.
  const TableSpec spec = e->owner->info().spec;
  // The table stands still while its index is copied and its chunks pinned.
  auto x = std::make_unique<TableExport>();
  auto parked = std::make_shared<std::latch>(1);
  auto go = std::make_shared<std::latch>(1);
  int64_t t0 = monotonic_ns();
  e->owner->park(parked, go);
  parked->wait();
  TableState st = e->owner->snapshot();
  std::unordered_set<uint64_t> seen;
  Status s;
  for (const ChunkRef& r : st.refs) {
    BlockRef b{r.block, r.generation};
    if (!seen.insert(pack_block(b)).second) continue;
    s = arena.acquire(b);
    if (!s.ok()) break;
    x->pinned.push_back(b);
  }
  go->count_down();
  if (!s.ok()) {
    release_export(*x);
    return reply(c, kType, {s.code(), "table " + name + ": pinning a chunk for the export: " + s.message()});
  }
  x->items = std::move(st.items);
  x->refs = std::move(st.refs);
  for (const ItemState& it : x->items)
    for (uint32_t k = 0; k < it.num_refs && it.first_ref + k < x->refs.size(); ++k)
      x->steps += x->refs[it.first_ref + k].length;
  x->last_ns = monotonic_ns();
  ExportBeginReply r{};
  r.spec = spec;
  r.items = x->items.size();
  r.refs = x->refs.size();
  r.steps = x->steps;
  r.idle_ms = kExportIdleMs;
  log_info(who(c) + " exports table " + name + ": " + std::to_string(r.items) + " items, " +
           std::to_string(x->pinned.size()) + " chunks pinned; the table stood still " +
           std::to_string((x->last_ns - t0) / 1000) + " us");
  c.table_export = std::move(x);
  return reply(c, kType, Status::Ok(), &r, sizeof r);
}

bool Server::Impl::export_items(Client& c, const std::vector<char>& p) {
  constexpr ControlType kType = ControlType::export_items;
  ExportItemsRequest rq;
  if (!read_payload(p, &rq)) return reply(c, kType, kMalformed);
  TableExport* x = c.table_export.get();
  if (!x) return reply(c, kType, no_export());
  if (x->lapsed)
    return reply(c, kType, {Errc::timeout, "the export lapsed: no request came for " + std::to_string(kExportIdleMs) +
                                               " ms, and its chunks were let go"});
  x->last_ns = monotonic_ns();
  if (rq.from > x->items.size())
    return reply(c, kType, {Errc::invalid_argument, "export_items from " + std::to_string(rq.from) + " of " +
                                                        std::to_string(x->items.size()) + " items"});
  ExportItemsReply h{};
  std::vector<char> out(sizeof h);
  std::vector<ChunkRef> refs;
  size_t room = kMaxControlPayload - sizeof h;
  for (uint64_t i = rq.from; i < x->items.size() && h.items < rq.max_items; ++i) {
    const ItemState& it = x->items[i];
    size_t need = sizeof(ExportedItem) + size_t{it.num_refs} * sizeof(ChunkRef);
    if (need > room) break;
    room -= need;
    ExportedItem w{it.key, it.priority, it.inserted_seq, it.times_sampled, it.num_refs};
    out.insert(out.end(), reinterpret_cast<const char*>(&w), reinterpret_cast<const char*>(&w + 1));
    refs.insert(refs.end(), x->refs.begin() + it.first_ref, x->refs.begin() + it.first_ref + it.num_refs);
    ++h.items;
  }
  h.refs = static_cast<uint32_t>(refs.size());
  std::memcpy(out.data(), &h, sizeof h);
  out.insert(out.end(), reinterpret_cast<const char*>(refs.data()), reinterpret_cast<const char*>(refs.data() + refs.size()));
  return reply(c, kType, Status::Ok(), out.data(), out.size());
}

bool Server::Impl::export_end(Client& c) {
  constexpr ControlType kType = ControlType::export_end;
  if (!c.table_export) return reply(c, kType, no_export());
  bool lapsed = c.table_export->lapsed;
  release_export(*c.table_export);
  c.table_export.reset();
  if (lapsed)
    return reply(c, kType, {Errc::timeout, "the export lapsed before it ended (no request for " +
                                               std::to_string(kExportIdleMs) + " ms): what was copied after that "
                                               "may not be the table's; export again"});
  return reply(c, kType, Status::Ok());
}

void Server::Impl::release_export(TableExport& x) {
  for (BlockRef b : x.pinned) (void)arena.release(export_arena_id, b);
  x.pinned.clear();
}

void Server::Impl::lapse_exports() {
  int64_t now = monotonic_ns();
  for (auto& [fd, c] : clients) {
    TableExport* x = c.table_export.get();
    if (!x || x->lapsed || now - x->last_ns < int64_t{kExportIdleMs} * 1'000'000) continue;
    release_export(*x);
    x->items.clear();
    x->refs.clear();
    x->lapsed = true;
    log_warn(who(c) + ": its export lapsed after " + std::to_string(kExportIdleMs) + " ms without a request; "
             "its chunks are let go");
  }
}

int Server::Impl::exports_poll_ms() const {
  int64_t next = -1, now = monotonic_ns();
  for (const auto& [fd, c] : clients) {
    const TableExport* x = c.table_export.get();
    if (!x || x->lapsed) continue;
    int64_t ms = (x->last_ns + int64_t{kExportIdleMs} * 1'000'000 - now) / 1'000'000 + 1;
    if (next < 0 || ms < next) next = std::max<int64_t>(ms, 0);
  }
  return static_cast<int>(next);
}

}  // namespace engram
