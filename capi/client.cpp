// Errors, versions, connection and table management of libengram.
#include <grp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "capi/client.hpp"
#include "capi/writer.hpp"
#include "core/name.hpp"
#include "core/prefetch.hpp"
#include "core/rate_limiter.hpp"
#include "core/signature.hpp"

using namespace engram;

namespace engram {

int to_code(Errc e) noexcept {
  switch (e) {
    case Errc::ok: return ENGRAM_OK;
    case Errc::invalid_argument: return ENGRAM_E_INVALID;
    case Errc::invalid_priority: return ENGRAM_E_PRIORITY;
    case Errc::invalid_exponent:
    case Errc::invalid_rate_limiter: return ENGRAM_E_INVALID;
    case Errc::invalid_capacity: return ENGRAM_E_RANGE;
    case Errc::stale_key: return ENGRAM_E_STALE_KEY;
    case Errc::unknown_key: return ENGRAM_E_UNKNOWN_KEY;
    case Errc::rate_limited: return ENGRAM_E_RATE_LIMITED;
    case Errc::empty: return ENGRAM_E_RATE_LIMITED;
    case Errc::full: return ENGRAM_E_RANGE;
    case Errc::out_of_memory: return ENGRAM_E_NOMEM;
    case Errc::double_free:
    case Errc::stale_reference:
    case Errc::corrupt: return ENGRAM_E_CORRUPT;
    case Errc::layout_mismatch: return ENGRAM_E_VERSION;
    case Errc::system: return ENGRAM_E_SYSTEM;
    case Errc::timeout: return ENGRAM_E_TIMEOUT;
    case Errc::not_found: return ENGRAM_E_NOT_FOUND;
    case Errc::already_exists: return ENGRAM_E_EXISTS;
    case Errc::permission_denied: return ENGRAM_E_PERMISSION;
    case Errc::disconnected: return ENGRAM_E_DISCONNECTED;
    case Errc::signature_mismatch: return ENGRAM_E_SIGNATURE;
    case Errc::closed: return ENGRAM_E_CLOSED;
    case Errc::interrupted: return ENGRAM_E_INTERRUPTED;
  }
  return ENGRAM_E_INVALID;
}

namespace {
thread_local std::string t_last_error;
}

const char* last_error() noexcept { return t_last_error.c_str(); }

Status check_struct_size(size_t struct_size, size_t need, const char* type) {
  if (struct_size >= need) return Status::Ok();
  return {Errc::invalid_argument, std::string(type) + ".struct_size is " + std::to_string(struct_size) + ", less than the " +
                                      std::to_string(need) + " bytes this version reads; call " + type + "_init first"};
}

Status bounded_string(const char* s, size_t max_bytes, const char* what, std::string* out) {
  if (!s) return {Errc::invalid_argument, std::string(what) + " is NULL"};
  size_t n = strnlen(s, max_bytes + 1);
  if (n > max_bytes)
    return {Errc::invalid_capacity, std::string(what) + " is longer than " + std::to_string(max_bytes) +
                                        " bytes (or lacks its terminating NUL)"};
  out->assign(s, n);
  return Status::Ok();
}

int set_error(const Status& s) {
  if (s.ok()) return ENGRAM_OK;
  t_last_error = s.message().empty() ? errc_name(s.code()) : s.message();
  return to_code(s.code());
}

}  // namespace engram

extern "C" {

unsigned engram_version(void) { return ENGRAM_VERSION_NUMBER; }

const char* engram_version_string(void) { return ENGRAM_VERSION_STRING; }

const char* engram_strerror(int code) {
  switch (code) {
    case ENGRAM_OK: return "success";
    case ENGRAM_E_INVALID: return "invalid argument";
    case ENGRAM_E_RANGE: return "value out of range";
    case ENGRAM_E_PRIORITY: return "invalid priority (NaN, infinite or negative)";
    case ENGRAM_E_NOT_FOUND: return "no such table";
    case ENGRAM_E_EXISTS: return "already exists";
    case ENGRAM_E_SIGNATURE: return "columns do not match the table's signature";
    case ENGRAM_E_TIMEOUT: return "timed out";
    case ENGRAM_E_RATE_LIMITED: return "rate limited";
    case ENGRAM_E_STALE_KEY: return "stale key (the item is gone)";
    case ENGRAM_E_UNKNOWN_KEY: return "unknown key";
    case ENGRAM_E_NOMEM: return "out of memory";
    case ENGRAM_E_DISCONNECTED: return "disconnected from the server";
    case ENGRAM_E_PERMISSION: return "permission denied";
    case ENGRAM_E_VERSION: return "client and server versions differ";
    case ENGRAM_E_CORRUPT: return "shared memory failed validation";
    case ENGRAM_E_CLOSED: return "table closed or dropped";
    case ENGRAM_E_INTERRUPTED: return "interrupted (engram_client_interrupt)";
    case ENGRAM_E_SYSTEM: return "system error";
  }
  return "unknown error code";
}

const char* engram_last_error(void) { return engram::last_error(); }

static int preset(engram_rate_limiter* out, Result<RateLimiterConfig> r) {
  if (!out) return fail(Errc::invalid_argument, "rate limiter output is NULL");
  if (!r.ok()) return set_error(r.status());
  out->samples_per_insert = r->samples_per_insert;
  out->min_size_to_sample = r->min_size_to_sample;
  out->min_diff = r->min_diff;
  out->max_diff = r->max_diff;
  return ENGRAM_OK;
}

int engram_rate_limiter_min_size(engram_rate_limiter* out, int64_t n) {
  ENGRAM_GUARD_BEGIN
  return preset(out, RateLimiterConfig::min_size(n));
  ENGRAM_GUARD_END
}

int engram_rate_limiter_sample_to_insert_ratio(engram_rate_limiter* out, double spi, int64_t min_size,
                                               double error_buffer) {
  ENGRAM_GUARD_BEGIN
  return preset(out, RateLimiterConfig::sample_to_insert_ratio(spi, min_size, error_buffer));
  ENGRAM_GUARD_END
}

int engram_rate_limiter_queue(engram_rate_limiter* out, int64_t size) {
  ENGRAM_GUARD_BEGIN
  return preset(out, RateLimiterConfig::queue(size));
  ENGRAM_GUARD_END
}

}  // extern "C"

// --- the client ---------------------------------------------------------------

Status engram_client::control(ControlType type, const void* payload, size_t size, std::vector<char>* reply,
                              int wait_ms, ReceivedFds* fds) {
  if (disconnected) return {Errc::disconnected, "the server went away; disconnect and connect again"};
  int wait = wait_ms == 0 ? timeout_ms : wait_ms;
  if (Status s = take_late_replies(wait); !s.ok()) return s;
  Status s = control_call(fd, type, payload, size, reply, wait, fds);
  if (s.code() == Errc::timeout && type != ControlType::checkpoint) ++late_replies;  // sent, not answered yet
  if (s.code() == Errc::disconnected) {
    disconnected = true;
    return {Errc::disconnected, s.message() + "; disconnect and connect again"};
  }
  return s;
}

Status engram_client::take_late_replies(int wait_ms) {
  // The server answers every request in order, so the next replies are
  // those of the requests that timed out: read and put them to use (a
  // grant's blocks are this client's now) before the next request's.
  while (late_replies > 0) {
    ControlHeader h{};
    std::vector<char> p;
    Status s = recv_message(fd, &h, &p, wait_ms);
    if (s.code() == Errc::timeout)
      return {Errc::timeout, "the server has not answered an earlier request within " + std::to_string(wait_ms) + " ms"};
    if (!s.ok() || h.type == static_cast<uint32_t>(ControlType::goodbye)) {
      disconnected = true;
      return {Errc::disconnected, "the server went away; disconnect and connect again"};
    }
    if (h.type == static_cast<uint32_t>(ControlType::checkpoint)) continue;  // a late checkpoint answer: not owed here
    --late_replies;
    if (h.type == static_cast<uint32_t>(ControlType::grant_blocks) && h.status == 0) (void)keep_granted(p);
  }
  return Status::Ok();
}

bool engram_client::alive() {
  if (disconnected) return false;
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  int r = ::poll(&p, 1, 0);
  if (r <= 0) return true;
  // Nothing is owed on the control socket between requests, so anything
  // readable is a goodbye or a hang-up.
  if (p.revents & (POLLIN | POLLHUP | POLLERR | POLLRDHUP)) disconnected = true;
  return !disconnected;
}

namespace {
// Spares kept per class. They are how far a writer can run ahead of its
// acks (each ack brings a block back): a rate limiter that holds inserts,
// or an owner that fell behind, stops it after this many chunks, and a
// spare that does not fit goes back to the server in a round trip. A 64th
// of the class kept a writer of 40 KB items into a queue 25% below what it
// did when clients took blocks themselves; a 16th brought it back
// (bench/NOTES.md, "Blocks only from the daemon"). At most a 16th, so that
// one client cannot hold the blocks others need, and 256; at least 16.
size_t spare_limit(const SizeClass& k) { return std::clamp<size_t>(k.count / 16, 16, 256); }

// A spare is fetched for writing when it comes within this many chunks of
// its turn, not when it arrives: acks come ten to a record, and fetching
// ten blocks at once (eight lines each at 400 B) filled the core's
// outstanding-miss slots, so that each fetch waited for earlier ones (19%
// of a 400 B writer's samples in prefetch_block, Intel VM). Three chunks
// give each block the time of about three items to arrive (2 to 4 ran
// alike in trials; 12 was slower, 6 in between).
constexpr size_t kSpareFetchAhead = 3;
}  // namespace

void engram_client::fetch_spare(uint32_t k, BlockRef b) {
  if (k < class_streamed.size() && class_streamed[k]) prefetch_for_write(arena.data(b));
  else arena.prefetch_block(b.index, /*for_write=*/true);
}

void engram_client::keep_spare(BlockRef b) {
  // Trusted: the server reserved it for us. Reading its state word here
  // would pull that line to this core only for the server to pull it back
  // when it seals the chunk.
  if (b.index >= arena.total_blocks()) return;
  uint32_t k = arena.class_of(b.index);
  if (spares.size() < arena.num_classes()) spares.resize(arena.num_classes());
  std::deque<BlockRef>& s = spares[k];
  // Past the limit, or late acks of a closed writer: nobody would use it.
  if (s.size() >= spare_limit(arena.size_class(k)) || writers.empty()) {
    return_block(b);
    return;
  }
  s.push_back(b);
  if (s.size() <= kSpareFetchAhead) fetch_spare(k, b);
}

bool engram_client::wants_spare(uint32_t k, uint32_t coming) const {
  size_t have = (k < spares.size() ? spares[k].size() : 0) + coming;
  return have < spare_limit(arena.size_class(k));
}

Status engram_client::grant(uint32_t k, int wait_ms, uint32_t coming) {
  if (spares.size() < arena.num_classes()) spares.resize(arena.num_classes());
  // Enough for the spares to last a while: a grant is a round trip through
  // the control thread (a millisecond and more when every core is busy), a
  // spare a pop from a deque. A writer out of spares with as many on their
  // way is that far ahead of its acks (a rate limiter holds its inserts):
  // a quarter of the limit more lets it run on, and its inserts ask for no
  // spares until it is back under the limit (wants_spare), so that none
  // come back as surplus to return.
  size_t have = spares[k].size() + coming, limit = spare_limit(arena.size_class(k));
  if (!spares[k].empty() && have >= limit) return Status::Ok();
  size_t n = have < limit ? limit - have : std::max<size_t>(1, limit / 4);
  GrantRequest rq{k, static_cast<uint32_t>(std::min<size_t>(n, kMaxBlockGrant))};
  std::vector<char> reply;
  if (Status s = control(ControlType::grant_blocks, &rq, sizeof rq, &reply, wait_ms); !s.ok()) {
    if (s.code() == Errc::timeout)
      return {Errc::timeout, "the server did not grant a block within " + std::to_string(wait_ms == 0 ? timeout_ms : wait_ms) +
                                 " ms; is engramd stopped or overloaded?"};
    return s;
  }
  return keep_granted(reply);
}

Status engram_client::keep_granted(const std::vector<char>& reply) {
  size_t n = reply.size() / sizeof(BlockRef);
  if (n == 0 || n > kMaxBlockGrant || reply.size() % sizeof(BlockRef) != 0)
    return {Errc::corrupt, "the server answered a grant of blocks with " + std::to_string(reply.size()) + " bytes"};
  if (spares.size() < arena.num_classes()) spares.resize(arena.num_classes());
  for (size_t i = 0; i < n; ++i) {
    BlockRef g;
    std::memcpy(&g, reply.data() + i * sizeof g, sizeof g);
    if (g.index >= arena.total_blocks())
      return {Errc::corrupt, "the server granted block " + std::to_string(g.index) + ", outside the arena"};
    uint32_t k = arena.class_of(g.index);
    spares[k].push_back(g);
    if (spares[k].size() <= kSpareFetchAhead) fetch_spare(k, g);
  }
  return Status::Ok();
}

Status engram_client::take_block(uint32_t k, BlockRef* b, int wait_ms, uint32_t coming) {
  if (spares.size() < arena.num_classes()) spares.resize(arena.num_classes());
  std::deque<BlockRef>& s = spares[k];
  if (s.empty())
    if (Status g = grant(k, wait_ms, coming); !g.ok()) return g;
  if (s.empty()) return {Errc::out_of_memory, "the server granted no block of size class " + std::to_string(k)};
  *b = s.front();
  s.pop_front();
  if (s.size() >= kSpareFetchAhead) fetch_spare(k, s[kSpareFetchAhead - 1]);
  return Status::Ok();
}

// Blocks to return are sent once this many gather, and when a writer
// flushes or closes: what a client holds beyond its spares stays small
// next to a class of large blocks, and returns stay rare (they come from
// inserts that failed, writers that closed, and evictions that freed more
// blocks than the writer asked for).
constexpr size_t kReturnBatch = 16;

void engram_client::return_block(BlockRef b) {
  returning.push_back(b);
  if (returning.size() >= kReturnBatch) (void)flush_returns();
}

Status engram_client::flush_returns() {
  Status first = Status::Ok();
  for (size_t i = 0; i < returning.size(); i += kMaxBlockGrant) {
    size_t n = std::min<size_t>(kMaxBlockGrant, returning.size() - i);
    // Blocks that are no longer ours are refused and change nothing: that
    // refusal is expected here (see return_block), not an error to report.
    Status s = control(ControlType::return_blocks, returning.data() + i, n * sizeof(BlockRef), nullptr);
    if (s.code() == Errc::disconnected) {
      first = s;
      break;
    }
  }
  returning.clear();
  return first;
}

void engram_client::free_spares() {
  for (auto& s : spares) returning.insert(returning.end(), s.begin(), s.end());
  spares.clear();
  (void)flush_returns();
}

engram_table* engram_client::table_by_id(uint32_t id) {
  for (engram_table* t : tables)
    if (t->id == id) return t;
  return nullptr;
}

// The socket's group and mode are the access control: a refused connect
// says which group admits and how to join it.
static std::string refused_message(const std::string& path, int err) {
  std::string name = "GROUP";  // when the path is out of this user's sight
  struct stat st;
  char buf[1024];
  struct group g, *found = nullptr;
  if (::stat(path.c_str(), &st) == 0 && ::getgrgid_r(st.st_gid, &g, buf, sizeof buf, &found) == 0 && found)
    name = found->gr_name;
  return "cannot connect to " + path + ": " + std::strerror(err) + "; clients must be in the socket's group" +
         (name == "GROUP" ? "" : " (" + name + ")") + ": sudo usermod -aG " + name +
         " \"$USER\", then log in again (or run newgrp " + name + ")";
}

static Status connect_client(const engram_connect_options* o, engram_client* c) {
  sockaddr_un addr{};
  std::string path;
  if (o && o->socket_path)
    if (Status s = bounded_string(o->socket_path, sizeof addr.sun_path - 1, "socket_path", &path); !s.ok()) return s;
  if (path.empty())
    if (const char* env = std::getenv("ENGRAM_SOCKET"); env && *env) path = env;
  if (path.empty()) path = "/run/engram/engram.sock";
  if (o && o->timeout_ms > 0) c->timeout_ms = o->timeout_ms;
  if (path.size() >= sizeof addr.sun_path)
    return {Errc::invalid_capacity, "socket path " + escaped(path) + " is longer than " +
                                        std::to_string(sizeof addr.sun_path - 1) + " bytes (a Unix socket limit)"};
  c->fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (c->fd < 0) return {Errc::system, std::string("socket: ") + std::strerror(errno)};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (::connect(c->fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int e = errno;
    if (e == EACCES || e == EPERM) return {Errc::permission_denied, refused_message(path, e)};
    return {Errc::disconnected, "no engram server on " + path + " (" + std::strerror(e) +
                                    "); start engramd, or set ENGRAM_SOCKET"};
  }
  HelloRequest hr = hello_request();
  std::vector<char> reply;
  ReceivedFds fds;
  if (Status s = c->control(ControlType::hello, &hr, sizeof hr, &reply, 0, &fds); !s.ok()) return s;
  if (reply.size() != sizeof(HelloReply)) return {Errc::layout_mismatch, "the server's hello has another size"};
  std::memcpy(&c->hello, reply.data(), sizeof c->hello);
  if (fds.size() != 2) return {Errc::layout_mismatch, "the server's hello came without the arena and bells"};
  // Both segments are client-writable: nothing of them is read back to
  // check them, a hostile client could have written it. The layouts were
  // agreed in the hello; the arena's geometry comes with the reply.
  if (c->hello.num_classes == 0 || c->hello.num_classes > kArenaMaxClasses || c->hello.bells_size != sizeof(BellsHeader))
    return {Errc::corrupt, "the server's hello describes the arena or the bells out of range"};
  auto arena_seg = ShmSegment::map_fd(fds.take(0), c->hello.arena_size, ShmSegment::Access::read_write, "arena");
  if (!arena_seg.ok()) return arena_seg.status();
  c->arena_seg = std::move(*arena_seg);
  auto bells_seg = ShmSegment::map_fd(fds.take(1), c->hello.bells_size, ShmSegment::Access::read_write, "bells");
  if (!bells_seg.ok()) return bells_seg.status();
  c->bells_seg = std::move(*bells_seg);
  ArenaConfig config;
  config.classes.assign(c->hello.classes, c->hello.classes + c->hello.num_classes);
  auto arena = ArenaBlocks::attach(c->arena_seg.data(), c->arena_seg.size(), config);
  if (!arena.ok()) return arena.status();
  c->arena = *arena;
  c->bells = static_cast<BellsHeader*>(c->bells_seg.data());
  return Status::Ok();
}

static Status to_columns(const engram_column* cols, uint32_t n, const engram_compression* comp, std::vector<Column>* out) {
  if (n == 0 || n > kMaxColumns)
    return {Errc::invalid_capacity, "num_columns is " + std::to_string(n) + "; allowed 1.." + std::to_string(kMaxColumns)};
  if (!cols) return {Errc::invalid_argument, "columns is NULL"};
  out->clear();
  for (uint32_t i = 0; i < n; ++i) {
    const engram_column& c = cols[i];
    std::string name;
    if (Status s = bounded_string(c.name, kMaxColumnName - 1, ("column " + std::to_string(i) + "'s name").c_str(), &name);
        !s.ok())
      return s;
    if (c.rank > kMaxRank)
      return {Errc::invalid_argument, "column " + escaped(name) + " has rank " + std::to_string(c.rank) +
                                          "; at most " + std::to_string(kMaxRank)};
    Codec codec = comp ? static_cast<Codec>(comp[i].codec) : Codec::none;
    out->push_back(make_column(name, static_cast<DType>(c.dtype), std::vector<uint32_t>(c.shape, c.shape + c.rank),
                               codec, comp ? comp[i].level : 0));
  }
  return validate_signature(out->data(), out->size());
}

namespace engram {
Status columns_from_c(const engram_column* cols, uint32_t n, const engram_compression* comp, std::vector<Column>* out) {
  return to_columns(cols, n, comp, out);
}
}  // namespace engram

// A table name for the wire: read with a bound, and checked against the
// rule for names here, so that the message comes without a round trip.
static Status name_request(const char* name, NameRequest* r) {
  std::string n;
  if (Status s = bounded_string(name, kMaxTableName - 1, "table name", &n); !s.ok()) return s;
  if (Status s = validate_name(n, kMaxTableName - 1, "table name"); !s.ok()) return s;
  return copy_fixed(r->name, sizeof r->name, n, "table name");
}

extern "C" {

void engram_connect_options_init(engram_connect_options* o) {
  if (!o) return;
  std::memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->timeout_ms = 10000;
}

int engram_connect(const engram_connect_options* o, engram_client** out) {
  ENGRAM_GUARD_BEGIN
  if (!out) return fail(Errc::invalid_argument, "out is NULL");
  *out = nullptr;
  if (o)
    if (Status s = check_struct_size(o->struct_size, ENGRAM_END_OF(engram_connect_options, timeout_ms), "engram_connect_options");
        !s.ok())
      return set_error(s);
  auto* c = new engram_client;
  if (Status s = connect_client(o, c); !s.ok()) {
    engram_disconnect(c);
    return set_error(s);
  }
  *out = c;
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

void engram_client_interrupt(engram_client* c) {
  if (c) c->interrupt_pending.store(1, std::memory_order_release);
}

void engram_disconnect(engram_client* c) {
  if (!c) return;
  try {
    while (!c->batches.empty()) engram_batch_release(c->batches.back());
    while (!c->writers.empty()) engram_writer_close(c->writers.back());
    while (!c->tables.empty()) engram_table_close(c->tables.back());
    if (!c->disconnected) c->free_spares();  // else the server is gone, and the arena with it
  } catch (...) {
  }
  if (c->fd >= 0) ::close(c->fd);  // the server reclaims whatever is left
  delete c;
}

void engram_table_options_init(engram_table_options* o) {
  if (!o) return;
  std::memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->sampler = ENGRAM_UNIFORM;
  o->remover = ENGRAM_FIFO;
  o->priority_exponent = 1.0;
  o->max_chunks_per_item = kRecordRefs;
  engram_rate_limiter_min_size(&o->rate_limiter, 1);
}

int engram_table_create(engram_client* c, const engram_table_options* o) {
  ENGRAM_GUARD_BEGIN
  if (!c || !o) return fail(Errc::invalid_argument, "client or options is NULL");
  if (Status s = check_struct_size(o->struct_size, ENGRAM_END_OF(engram_table_options, num_columns), "engram_table_options");
      !s.ok())
    return set_error(s);
  NameRequest n;
  if (Status s = name_request(o->name, &n); !s.ok()) return set_error(s);
  if (o->max_size == 0 || o->max_size > (1u << 30))
    return fail(Errc::invalid_capacity, "max_size is " + std::to_string(o->max_size) + "; allowed 1..2^30");
  TableOptions t;
  t.name = o->name;
  t.capacity = static_cast<uint32_t>(o->max_size);
  t.sampler = {static_cast<SelectorKind>(o->sampler), o->priority_exponent};
  t.remover = {static_cast<SelectorKind>(o->remover), o->priority_exponent};
  t.max_times_sampled = o->max_times_sampled;
  t.max_refs_per_item = o->max_chunks_per_item ? o->max_chunks_per_item : kRecordRefs;
  t.rate_limiter = {o->rate_limiter.samples_per_insert, o->rate_limiter.min_size_to_sample, o->rate_limiter.min_diff,
                    o->rate_limiter.max_diff};
  const engram_compression* comp = ENGRAM_HAS_FIELD(o, engram_table_options, compression) ? o->compression : nullptr;
  if (Status s = to_columns(o->columns, o->num_columns, comp, &t.signature); !s.ok()) return set_error(s);
  TableSpec spec = to_spec(t);
  return set_error(c->control(ControlType::create_table, &spec, sizeof spec, nullptr));
  ENGRAM_GUARD_END
}

int engram_table_open(engram_client* c, const char* name, engram_table** out) {
  ENGRAM_GUARD_BEGIN
  if (!c || !out) return fail(Errc::invalid_argument, "client or out is NULL");
  *out = nullptr;
  NameRequest n;
  if (Status s = name_request(name, &n); !s.ok()) return set_error(s);
  std::vector<char> reply;
  ReceivedFds fds;
  if (Status s = c->control(ControlType::open_table, &n, sizeof n, &reply, 0, &fds); !s.ok()) return set_error(s);
  if (reply.size() != sizeof(OpenReply) || fds.size() != 1)
    return fail(Errc::layout_mismatch, "open reply has another size, or came without its channel");
  OpenReply r;
  std::memcpy(&r, reply.data(), sizeof r);
  if (r.table_id >= kMaxTables || r.spec.num_columns == 0 || r.spec.num_columns > kMaxColumns)
    return fail(Errc::corrupt, "the server described table " + std::string(name) + " out of range");
  auto t = std::make_unique<engram_table>();
  t->client = c;
  t->id = r.table_id;
  t->name = name;
  t->spec = r.spec;
  for (uint32_t i = 0; i < r.spec.num_columns; ++i)
    t->column_names.push_back(fixed_string(r.spec.columns[i].name, kMaxColumnName));
  t->sig_hash = signature_hash(r.spec.columns, r.spec.num_columns);
  t->decoded.resize(r.spec.num_columns);
  auto seg = ShmSegment::map_fd(fds.take(0), r.channel_size, ShmSegment::Access::read_write, "channel of " + t->name);
  if (!seg.ok()) return set_error(seg.status());
  t->segment = std::move(*seg);
  auto ch = Channel::attach(t->segment.data(), t->segment.size());
  if (!ch.ok()) return set_error(ch.status());
  t->channel = *ch;
  t->bell = &c->bells->slots[r.table_id].bell;
  c->tables.push_back(t.get());
  *out = t.release();
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

void engram_table_close(engram_table* t) {
  if (!t) return;
  try {
    engram_client* c = t->client;
    std::vector<engram_batch*> mine;
    for (engram_batch* b : c->batches)
      if (engram_batch_table(b) == t) mine.push_back(b);
    for (engram_batch* b : mine) engram_batch_release(b);
    // Writers' items for this table that still wait for their chunk go now;
    // the writers keep no other pointer to the table, only its id, and
    // their holds on this channel go back with it.
    if (!c->disconnected && t->usable().ok()) {
      for (engram_writer* w : c->writers)
        if (std::any_of(w->pending.begin(), w->pending.end(), [t](const auto& p) { return p.table == t; }))
          (void)w->send_pending(true);
      (void)t->flush_drops();
      ResponseRecord ignore;
      (void)t->pump(0, &ignore, [t] { return t->owed.empty(); }, monotonic_ns() + 1'000'000'000LL);
    }
    NameRequest n{};
    std::strncpy(n.name, t->name.c_str(), sizeof n.name - 1);
    (void)c->control(ControlType::close_table, &n, sizeof n, nullptr);
    c->tables.erase(std::remove(c->tables.begin(), c->tables.end(), t), c->tables.end());
  } catch (...) {
  }
  delete t;
}

static int name_call(engram_client* c, const char* name, ControlType type) {
  if (!c) return fail(Errc::invalid_argument, "client is NULL");
  NameRequest n;
  if (Status s = name_request(name, &n); !s.ok()) return set_error(s);
  return set_error(c->control(type, &n, sizeof n, nullptr));
}

int engram_checkpoint(engram_client* c, int32_t timeout_ms, char* path, size_t cap) {
  ENGRAM_GUARD_BEGIN
  if (!c || (cap && !path)) return fail(Errc::invalid_argument, "client or path is NULL");
  if (cap) path[0] = '\0';
  std::vector<char> reply;
  Status s = c->control(ControlType::checkpoint, nullptr, 0, &reply, timeout_ms < 0 ? -1 : timeout_ms == 0 ? 1 : timeout_ms);
  if (!s.ok()) return set_error(s);
  std::string p(reply.begin(), reply.end());
  if (cap) {
    if (p.size() >= cap)
      return fail(Errc::invalid_capacity, "the checkpoint was written to " + p + ", which needs " +
                                              std::to_string(p.size() + 1) + " bytes; path has " + std::to_string(cap));
    std::memcpy(path, p.c_str(), p.size() + 1);
  }
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

int engram_table_drop(engram_client* c, const char* name) {
  ENGRAM_GUARD_BEGIN
  return name_call(c, name, ControlType::drop_table);
  ENGRAM_GUARD_END
}

int engram_table_reset(engram_client* c, const char* name) {
  ENGRAM_GUARD_BEGIN
  return name_call(c, name, ControlType::reset_table);
  ENGRAM_GUARD_END
}

int engram_table_set_rate_limiter(engram_client* c, const char* name, const engram_rate_limiter* r) {
  ENGRAM_GUARD_BEGIN
  if (!c || !r) return fail(Errc::invalid_argument, "client or rate limiter is NULL");
  RateLimiterRequest rq{};
  NameRequest n;
  if (Status s = name_request(name, &n); !s.ok()) return set_error(s);
  std::memcpy(rq.name, n.name, sizeof rq.name);
  rq.limiter = {r->samples_per_insert, r->min_size_to_sample, r->min_diff, r->max_diff};
  if (Status s = rq.limiter.validate(); !s.ok()) return set_error(s);
  return set_error(c->control(ControlType::set_rate_limiter, &rq, sizeof rq, nullptr));
  ENGRAM_GUARD_END
}

void engram_table_info_init(engram_table_info* i) {
  if (!i) return;
  std::memset(i, 0, sizeof *i);
  i->struct_size = sizeof *i;
}

int engram_table_info_get(engram_client* c, const char* name, engram_table_info* out) {
  ENGRAM_GUARD_BEGIN
  if (!c || !out) return fail(Errc::invalid_argument, "client or out is NULL");
  // Version 0.1 readers need at least the counters; newer fields are optional.
  if (Status s = check_struct_size(out->struct_size, offsetof(engram_table_info, can_sample), "engram_table_info"); !s.ok())
    return set_error(s);
  NameRequest n;
  if (Status s = name_request(name, &n); !s.ok()) return set_error(s);
  std::vector<char> reply;
  if (Status s = c->control(ControlType::table_info, &n, sizeof n, &reply); !s.ok()) return set_error(s);
  if (reply.size() != sizeof(TableInfoWire)) return fail(Errc::layout_mismatch, "table info has another size");
  TableInfoWire w;
  std::memcpy(&w, reply.data(), sizeof w);
  engram_table_info i;
  engram_table_info_init(&i);
  std::memcpy(i.name, w.spec.name, std::min(sizeof i.name, sizeof w.spec.name));
  i.name[sizeof i.name - 1] = '\0';
  i.max_size = w.spec.capacity;
  i.size = w.size;
  i.inserts = static_cast<uint64_t>(w.counters.inserts);
  i.samples = static_cast<uint64_t>(w.counters.samples);
  i.deletes = static_cast<uint64_t>(w.counters.deletes);
  i.updates = w.stats.updates;
  i.evictions = w.stats.evictions;
  i.expirations = w.stats.expirations;
  i.stale_requests = w.stats.stale;
  i.rate_limited = w.stats.rate_limited;
  i.sampler = static_cast<int32_t>(w.spec.sampler);
  i.remover = static_cast<int32_t>(w.spec.remover);
  i.max_times_sampled = w.spec.max_times_sampled;
  i.num_columns = w.spec.num_columns;
  i.can_sample = static_cast<int32_t>(w.can_sample);
  i.can_insert = static_cast<int32_t>(w.can_insert);
  i.clients = w.clients;
  i.rate_limiter = {w.spec.limiter.samples_per_insert, w.spec.limiter.min_size_to_sample, w.spec.limiter.min_diff,
                    w.spec.limiter.max_diff};
  i.bytes_raw = w.stats.bytes_raw;
  i.bytes_stored = w.stats.bytes_stored;
  size_t keep = out->struct_size;
  std::memcpy(out, &i, std::min(keep, sizeof i));
  out->struct_size = keep;
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

int engram_table_columns(const engram_table* t, engram_column* out, uint32_t cap, uint32_t* count) {
  ENGRAM_GUARD_BEGIN
  if (!t || !count || (cap && !out)) return fail(Errc::invalid_argument, "table, out or count is NULL");
  *count = t->spec.num_columns;
  for (uint32_t i = 0; i < std::min(cap, t->spec.num_columns); ++i) {
    const Column& c = t->spec.columns[i];
    out[i].name = t->column_names[i].c_str();
    out[i].dtype = static_cast<int32_t>(c.dtype);
    out[i].rank = c.rank;
    std::memcpy(out[i].shape, c.shape, sizeof out[i].shape);
  }
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

int engram_table_compression(const engram_table* t, engram_compression* out, uint32_t cap, uint32_t* count) {
  ENGRAM_GUARD_BEGIN
  if (!t || !count || (cap && !out)) return fail(Errc::invalid_argument, "table, out or count is NULL");
  *count = t->spec.num_columns;
  for (uint32_t i = 0; i < std::min(cap, t->spec.num_columns); ++i)
    out[i] = {static_cast<int32_t>(t->spec.columns[i].codec), t->spec.columns[i].level};
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

}  // extern "C"
