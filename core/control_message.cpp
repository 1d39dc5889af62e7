#include "core/control_message.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <algorithm>
#include <cstring>

namespace engram {

HelloRequest hello_request() noexcept {
  return {kProtocolVersion, kLayoutVersion, kArenaLayoutHash, kChannelLayoutHash, kBellsLayoutHash};
}

TableSpec to_spec(const TableOptions& o) {
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

Status send_message(int fd, ControlType type, int32_t status, const void* payload, size_t size) {
  if (size > kMaxControlPayload) return {Errc::invalid_argument, "control message too large"};
  std::vector<char> buf(sizeof(ControlHeader) + size);
  ControlHeader h{kControlMagic, static_cast<uint32_t>(type), status, static_cast<uint32_t>(size)};
  std::memcpy(buf.data(), &h, sizeof h);
  if (size) std::memcpy(buf.data() + sizeof h, payload, size);
  for (;;) {
    ssize_t n = ::send(fd, buf.data(), buf.size(), MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(buf.size())) return Status::Ok();
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) return {Errc::system, "peer hung up"};
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return {Errc::full, "peer does not read its replies (its socket buffer is full)"};
    return {Errc::system, std::string("send on control socket: ") + (n < 0 ? std::strerror(errno) : "short write")};
  }
}

Status recv_message(int fd, ControlHeader* h, std::vector<char>* payload, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  for (;;) {
    int r = ::poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return {Errc::system, std::string("poll on control socket: ") + std::strerror(errno)};
    if (r == 0) return {Errc::timeout, "no reply on the control socket within " + std::to_string(timeout_ms) + " ms"};
    break;
  }
  std::vector<char> buf(sizeof(ControlHeader) + kMaxControlPayload);
  ssize_t n;
  do n = ::recv(fd, buf.data(), buf.size(), 0);
  while (n < 0 && errno == EINTR);
  if (n == 0 || (n < 0 && errno == ECONNRESET)) return {Errc::system, "peer hung up"};
  if (n < 0) return {Errc::system, std::string("recv on control socket: ") + std::strerror(errno)};
  if (static_cast<size_t>(n) < sizeof(ControlHeader)) return {Errc::corrupt, "control message shorter than its header"};
  std::memcpy(h, buf.data(), sizeof *h);
  if (h->magic != kControlMagic) return {Errc::corrupt, "control message with a bad magic number"};
  if (h->size != static_cast<size_t>(n) - sizeof(ControlHeader))
    return {Errc::corrupt, "control message size field does not match its length"};
  payload->assign(buf.begin() + sizeof(ControlHeader), buf.begin() + n);
  return Status::Ok();
}

Status control_call(int fd, ControlType type, const void* payload, size_t size, std::vector<char>* reply,
                    int timeout_ms) {
  Status s = send_message(fd, type, 0, payload, size);
  ControlHeader h{};
  std::vector<char> p;
  if (s.ok()) s = recv_message(fd, &h, &p, timeout_ms);
  // A checkpoint is answered when written; a caller that stopped waiting
  // for it finds the late answer here and skips it.
  while (s.ok() && type != ControlType::checkpoint && h.type == static_cast<uint32_t>(ControlType::checkpoint))
    s = recv_message(fd, &h, &p, timeout_ms);
  if (s.ok() && h.type == static_cast<uint32_t>(ControlType::goodbye)) s = {Errc::disconnected, "the server is stopping"};
  if (!s.ok()) {
    if (s.code() == Errc::system) return {Errc::disconnected, "lost the server: " + s.message()};
    return s;
  }
  if (h.type != static_cast<uint32_t>(type)) return {Errc::corrupt, "the server answered another request"};
  if (h.status != 0) return {static_cast<Errc>(h.status), std::string(p.begin(), p.end())};
  if (reply) *reply = std::move(p);
  return Status::Ok();
}

}  // namespace engram
