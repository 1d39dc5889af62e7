// The connection: engram_connect (socket, hello, the arena and bells
// mapped from the descriptors the server sends), control calls and their
// late replies, interrupt and disconnect.
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "capi/client.hpp"

#include <algorithm>
#include "core/name.hpp"

using namespace engram;

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

engram_table* engram_client::table_by_id(uint32_t id) {
  for (engram_table* t : tables)
    if (t->id == id) return t;
  return nullptr;
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
  ReceivedFds fds;
  if (Status s = connect_control(path, c->timeout_ms, &c->fd, &c->hello, &fds); !s.ok()) return s;
  if (fds.size() != 2) return {Errc::layout_mismatch, "the server's hello came without the arena and bells"};
  // Both segments are client-writable: nothing of them is read back to
  // check them, a hostile client could have written it. The layouts were
  // agreed in the hello; the arena's geometry comes with the reply.
  if (c->hello.num_classes == 0 || c->hello.num_classes > kArenaMaxClasses || c->hello.bells_size != sizeof(BellsHeader))
    return {Errc::corrupt, "the server's hello describes the arena or the bells out of range"};
  auto arena_seg = ShmSegment::map_fd(fds.take(0), c->hello.arena_size, ShmSegment::Access::read_write, "arena",
                                      ShmSegment::Populate::none);
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
  // Only the blocks committed now: the rest of each class is a hole the
  // server may grow it into, and touching it here would allocate it.
  for (uint32_t k = 0; k < c->arena.num_classes(); ++k) {
    const SizeClass& sc = c->arena.size_class(k);
    c->arena_seg.populate(sc.data_offset, sc.block_size * std::min(c->hello.committed[k], sc.count));
  }
  c->bells = static_cast<BellsHeader*>(c->bells_seg.data());
  return Status::Ok();
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

}  // extern "C"
