#include "core/control_message.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "core/futex.hpp"

namespace engram {

HelloRequest hello_request() noexcept {
  return {kProtocolVersion, kLayoutVersion, kArenaLayoutHash, kChannelLayoutHash, kBellsLayoutHash};
}

TableSpec to_spec(const CheckedTableOptions& checked) {
  const TableOptions& o = *checked;
  TableSpec s{};
  std::strncpy(s.name, o.name.c_str(), sizeof s.name - 1);
  s.capacity = o.capacity;
  s.max_times_sampled = o.max_times_sampled;
  s.sampler = static_cast<uint32_t>(o.sampler.kind);
  s.remover = static_cast<uint32_t>(o.remover.kind);
  s.sampler_exponent = o.sampler.exponent;
  s.remover_exponent = o.remover.exponent;
  s.limiter = o.rate_limiter;
  s.num_columns = static_cast<uint32_t>(std::min(o.signature.size(), kMaxColumns));
  s.max_refs_per_item = o.max_refs_per_item;
  for (uint32_t i = 0; i < s.num_columns; ++i) s.columns[i] = o.signature[i];
  return s;
}

TableOptions from_spec(const TableSpec& s) {
  TableOptions o;
  o.name = fixed_string(s.name, sizeof s.name);
  o.capacity = s.capacity;
  o.max_times_sampled = s.max_times_sampled;
  o.sampler = {static_cast<SelectorKind>(s.sampler), s.sampler_exponent};
  o.remover = {static_cast<SelectorKind>(s.remover), s.remover_exponent};
  o.rate_limiter = s.limiter;
  o.max_refs_per_item = s.max_refs_per_item;
  o.signature.assign(s.columns, s.columns + std::min<size_t>(s.num_columns, kMaxColumns));
  return o;
}

std::string fixed_string(const char* s, size_t cap) { return std::string(s, strnlen(s, cap)); }

Status copy_fixed(char* dst, size_t cap, const std::string& s, const char* what) {
  if (s.size() >= cap)
    return {Errc::invalid_argument, std::string(what) + " \"" + s + "\" is " + std::to_string(s.size()) +
                                        " bytes long; at most " + std::to_string(cap - 1) + " are allowed"};
  std::memset(dst, 0, cap);
  std::memcpy(dst, s.data(), s.size());
  return Status::Ok();
}

int ReceivedFds::take(size_t i) noexcept {
  if (i >= fds_.size()) return -1;
  return std::exchange(fds_[i], -1);
}

void ReceivedFds::close_all() noexcept {
  for (int fd : fds_)
    if (fd >= 0) ::close(fd);
  fds_.clear();
}

Status send_datagram(int fd, const void* bytes, size_t n, const int* fds, size_t nfds) {
  iovec iov{const_cast<void*>(bytes), n};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  std::vector<char> control(CMSG_SPACE(sizeof(int) * nfds));
  if (nfds > 0) {
    m.msg_control = control.data();
    m.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
  }
  for (;;) {
    ssize_t sent = ::sendmsg(fd, &m, MSG_NOSIGNAL);
    if (sent == static_cast<ssize_t>(n)) return Status::Ok();
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EPIPE || errno == ECONNRESET)) return {Errc::system, "peer hung up"};
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return {Errc::full, "peer does not read its replies (its socket buffer is full)"};
    return {Errc::system, std::string("send on control socket: ") + (sent < 0 ? std::strerror(errno) : "short write")};
  }
}

Status send_message(int fd, ControlType type, int32_t status, const void* payload, size_t size, const int* fds,
                    size_t nfds) {
  if (size > kMaxControlPayload) return {Errc::invalid_argument, "control message too large"};
  if (nfds > kMaxControlFds) return {Errc::invalid_argument, "control message with too many descriptors"};
  std::vector<char> buf(sizeof(ControlHeader) + size);
  ControlHeader h{kControlMagic, static_cast<uint32_t>(type), status, static_cast<uint32_t>(size)};
  std::memcpy(buf.data(), &h, sizeof h);
  if (size) std::memcpy(buf.data() + sizeof h, payload, size);
  return send_datagram(fd, buf.data(), buf.size(), fds, nfds);
}

Status recv_message(int fd, ControlHeader* h, std::vector<char>* payload, int timeout_ms, ReceivedFds* fds) {
  pollfd p{fd, POLLIN, 0};
  for (;;) {
    int r = ::poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return {Errc::system, std::string("poll on control socket: ") + std::strerror(errno)};
    if (r == 0) return {Errc::timeout, "no reply on the control socket within " + std::to_string(timeout_ms) + " ms"};
    break;
  }
  std::vector<char> buf(sizeof(ControlHeader) + kMaxControlPayload);
  iovec iov{buf.data(), buf.size()};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  // Room for more than a message may carry: a peer that sends more is
  // refused, not cut short silently (the kernel would close the rest).
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * (kMaxControlFds + 1)) + CMSG_SPACE(sizeof(ucred))];
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  ssize_t n;
  do n = ::recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n < 0 && errno == ECONNRESET) return {Errc::system, "peer hung up"};
  if (n < 0) return {Errc::system, std::string("recv on control socket: ") + std::strerror(errno)};
  // Descriptors first, so that every path below closes them (a message of
  // no bytes can still carry some, and reads like a hang-up).
  ReceivedFds got;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0)) continue;
    size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k; ++i) {
      int d;
      std::memcpy(&d, CMSG_DATA(c) + i * sizeof(int), sizeof d);
      got.add(d);
    }
  }
  if (n == 0) return {Errc::system, "peer hung up"};
  if (m.msg_flags & MSG_CTRUNC) return {Errc::corrupt, "control message with more ancillary data than allowed"};
  if (got.size() > kMaxControlFds) return {Errc::corrupt, "control message with too many descriptors"};
  if (static_cast<size_t>(n) < sizeof(ControlHeader)) return {Errc::corrupt, "control message shorter than its header"};
  if (m.msg_flags & MSG_TRUNC) return {Errc::corrupt, "control message longer than allowed"};
  std::memcpy(h, buf.data(), sizeof *h);
  if (h->magic != kControlMagic) return {Errc::corrupt, "control message with a bad magic number"};
  if (h->size != static_cast<size_t>(n) - sizeof(ControlHeader))
    return {Errc::corrupt, "control message size field does not match its length"};
  payload->assign(buf.begin() + sizeof(ControlHeader), buf.begin() + n);
  if (fds)
    for (size_t i = 0; i < got.size(); ++i) fds->add(got.take(i));
  return Status::Ok();
}

Status control_call(int fd, ControlType type, const void* payload, size_t size, std::vector<char>* reply,
                    int timeout_ms, ReceivedFds* fds) {
  Status s = send_message(fd, type, 0, payload, size);
  ControlHeader h{};
  std::vector<char> p;
  ReceivedFds got;
  if (s.ok()) s = recv_message(fd, &h, &p, timeout_ms, &got);
  // A checkpoint is answered when written; a caller that stopped waiting
  // for it finds the late answer here and skips it.
  while (s.ok() && type != ControlType::checkpoint && h.type == static_cast<uint32_t>(ControlType::checkpoint)) {
    got.close_all();
    s = recv_message(fd, &h, &p, timeout_ms, &got);
  }
  if (s.ok() && h.type == static_cast<uint32_t>(ControlType::goodbye)) s = {Errc::disconnected, "the server is stopping"};
  if (!s.ok()) {
    if (s.code() == Errc::system) return {Errc::disconnected, "lost the server: " + s.message()};
    return s;
  }
  if (h.type != static_cast<uint32_t>(type)) return {Errc::corrupt, "the server answered another request"};
  if (h.status != 0) return {static_cast<Errc>(h.status), std::string(p.begin(), p.end())};
  if (reply) *reply = std::move(p);
  if (fds)
    for (size_t i = 0; i < got.size(); ++i) fds->add(got.take(i));
  return Status::Ok();
}

namespace {

// Milliseconds left until deadline_ns (-1: none), at least 1 while any is.
int ms_left(int64_t deadline_ns) {
  if (deadline_ns < 0) return -1;
  int64_t left = (deadline_ns - monotonic_ns() + 999'999) / 1'000'000;
  return static_cast<int>(std::clamp<int64_t>(left, 0, INT32_MAX));
}

// The socket's group and mode are the access control: a refused connect
// says which group admits and how to join it.
std::string refused_message(const std::string& path, int err) {
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

Status connect_socket(int fd, const std::string& path, int timeout_ms, int64_t deadline_ns) {
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof addr.sun_path)
    return {Errc::invalid_argument, "socket path \"" + path + "\" is empty or longer than " +
                                        std::to_string(sizeof addr.sun_path - 1) + " bytes (a Unix socket limit)"};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  // A Unix socket's connect on a full backlog fails with EAGAIN when
  // non-blocking (it never says EINPROGRESS), and blocks for as long as
  // the server does not accept otherwise: retry until the deadline.
  for (int64_t pause_us = 500;; pause_us = std::min<int64_t>(pause_us * 2, 50'000)) {
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return Status::Ok();
    int e = errno;
    if (e == EINTR) continue;
    if (e == EACCES || e == EPERM) return {Errc::permission_denied, refused_message(path, e)};
    if (e != EAGAIN)
      return {Errc::disconnected, "no engram server listens on " + path + " (" + std::strerror(e) +
                                      "); start engramd, or point ENGRAM_SOCKET (or --socket) at its socket"};
    int left = ms_left(deadline_ns);
    if (left == 0)
      return {Errc::timeout, "connecting to " + path + ": the server's backlog stayed full for " +
                                 std::to_string(timeout_ms) + " ms (is the server stopped, or flooded with connections?)"};
    int64_t nap_us = left < 0 ? pause_us : std::min<int64_t>(pause_us, int64_t{left} * 1000);
    std::this_thread::sleep_for(std::chrono::microseconds(nap_us));
  }
}

}  // namespace

Status connect_control(const std::string& path, int timeout_ms, int* fd, HelloReply* hello, ReceivedFds* fds) {
  int64_t deadline = timeout_ms < 0 ? -1 : monotonic_ns() + int64_t{timeout_ms} * 1'000'000;
  *fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (*fd < 0) return {Errc::system, std::string("socket: ") + std::strerror(errno)};
  auto failed = [&](Status s) {
    ::close(*fd);
    *fd = -1;
    return s;
  };
  if (Status s = connect_socket(*fd, path, timeout_ms, deadline); !s.ok()) return failed(s);
  // Blocking from here on, as every control call expects; the waits for
  // replies are bounded by poll.
  if (::fcntl(*fd, F_SETFL, ::fcntl(*fd, F_GETFL) & ~O_NONBLOCK) != 0)
    return failed({Errc::system, std::string("fcntl: ") + std::strerror(errno)});
  HelloRequest rq = hello_request();
  Status sent = send_message(*fd, ControlType::hello, 0, &rq, sizeof rq);
  // A server that refused the connection at once (a limit) has said why
  // and hung up, perhaps before the hello went out: read its answer anyway.
  ControlHeader h{};
  std::vector<char> p;
  Status got = recv_message(*fd, &h, &p, sent.ok() ? ms_left(deadline) : 0, fds);
  if (got.code() == Errc::timeout && sent.ok())
    return failed({Errc::timeout, "connected to " + path + ", but the server did not answer the hello within " +
                                      std::to_string(timeout_ms) + " ms (is it stopped, or overloaded?)"});
  if (!got.ok() || h.type == static_cast<uint32_t>(ControlType::goodbye))
    return failed({Errc::disconnected, "the server on " + path + " hung up before it answered the hello" +
                                           (got.ok() ? " (it is stopping)" : "")});
  if (h.type != static_cast<uint32_t>(ControlType::hello))
    return failed({Errc::corrupt, "the server on " + path + " answered the hello with another message"});
  if (h.status != 0) return failed({static_cast<Errc>(h.status), std::string(p.begin(), p.end())});
  if (p.size() != sizeof(HelloReply))
    return failed({Errc::layout_mismatch, "the server's hello reply has " + std::to_string(p.size()) + " bytes, not " +
                                              std::to_string(sizeof(HelloReply)) + " (another version?)"});
  std::memcpy(hello, p.data(), sizeof *hello);
  return Status::Ok();
}

}  // namespace engram
