// The control socket's connections: who is admitted (caps per uid and in
// all), how long one may stay without saying hello, and what happens when
// the process runs out of descriptors. Every connection costs the server
// one descriptor and one entry in the control loop's poll, so these bounds
// are what keep a flood of connections from taking the control plane down:
// a refused connection is answered (its hello gets the reason) and closed
// at once, a silent one is closed at its deadline, and accept(2) failing
// never turns the loop into a busy one.
#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "server/server_impl.hpp"

namespace engram {
namespace {

// Descriptors the server needs besides its connections: the listening
// socket, the wake eventfd, the reserve, stderr, the memfd of a table or
// channel being made, a checkpoint's files and ring, a restore's files.
constexpr uint32_t kDescriptorHeadroom = 64;

// How long accept(2) rests after an error it cannot answer (no descriptor
// even for the reserve, the kernel out of memory): a pending connection
// keeps the socket readable, and polling it again at once would spin.
constexpr int64_t kAcceptPauseNs = 100'000'000;

int open_reserve() { return ::open("/dev/null", O_RDONLY | O_CLOEXEC); }

}  // namespace

uint32_t Server::Impl::fds_open() {
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return 0;
  uint32_t n = 0;
  while (const dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n > 0 ? n - 1 : 0;  // less the directory's own
}

uint32_t Server::Impl::fds_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return UINT32_MAX;
  return static_cast<uint32_t>(std::min<rlim_t>(r.rlim_cur, UINT32_MAX));
}

Status Server::Impl::fit_descriptors() {
  uint32_t limit = fds_limit(), open = fds_open();
  uint64_t budget = limit > open + kDescriptorHeadroom ? limit - open - kDescriptorHeadroom : 0;
  if (budget == 0)
    return {Errc::system, "this process may open " + std::to_string(limit) + " descriptors and has " +
                              std::to_string(open) + " open: too few to serve any connection; raise the limit "
                              "(ulimit -n, or LimitNOFILE= in the unit)"};
  max_connections = static_cast<uint32_t>(std::min<uint64_t>(config.max_connections, budget));
  if (max_connections < config.max_connections)
    log_warn("[server] max_connections " + std::to_string(config.max_connections) + " lowered to " +
             std::to_string(max_connections) + ": this process may open " + std::to_string(limit) + " descriptors (" +
             std::to_string(open) + " open, " + std::to_string(kDescriptorHeadroom) +
             " kept for the server's own use); raise the limit (ulimit -n, or LimitNOFILE= in the unit) to allow more");
  reserve_fd = open_reserve();
  if (reserve_fd < 0) return {Errc::system, std::string("cannot open /dev/null: ") + std::strerror(errno)};
  return Status::Ok();
}

std::string Server::Impl::admission_refusal() const {
  if (clients.size() >= max_connections)
    return "the server holds " + std::to_string(clients.size()) + (clients.size() == 1 ? " connection" : " connections") +
           ", the most it allows (engramd.toml " +
           "[server] max_connections" + (max_connections < config.max_connections ? ", fitted to its descriptor limit" : "") +
           "); try again later, or raise the limit";
  return "";
}

std::string Server::Impl::uid_refusal(uid_t uid) const {
  uint32_t per_uid = std::min(config.max_connections_per_uid, max_connections);
  auto it = connections_by_uid.find(uid);
  if (it != connections_by_uid.end() && it->second >= per_uid)
    return "too many connections from uid " + std::to_string(uid) + " (" + std::to_string(it->second) +
           " open; the limit is engramd.toml [server] max_connections_per_uid = " + std::to_string(per_uid) +
           "); close some, or raise the limit";
  return "";
}

void Server::Impl::make_room_for_startup() {
  if (startups < config.max_startups) return;
  Client* oldest = nullptr;
  for (auto& [fd, c] : clients)
    if (!c.attached && (!oldest || c.hello_deadline_ns < oldest->hello_deadline_ns)) oldest = &c;
  if (!oldest) return;
  silences.note("closed the oldest connection that had not said hello yet, to admit a new one: " +
                std::to_string(config.max_startups) + " were waiting (engramd.toml [server] max_startups)");
  ++refused;
  disconnect(*oldest);
}

void Server::Impl::refuse(int fd, Errc code, const std::string& why) {
  // What the client sent first is read and dropped: a socket closed with
  // unread data resets its peer, which would then never read the reason.
  for (int i = 0; i < 4; ++i) {
    ControlHeader h;
    std::vector<char> p;
    if (!recv_message(fd, &h, &p, 0).ok()) break;
  }
  (void)send_message(fd, ControlType::hello, static_cast<int32_t>(code), why.data(), why.size());
  ::close(fd);
  ++refused;
}

void Server::Impl::accept_clients() {
  for (;;) {
    // Non-blocking: a client that stops reading its replies must not be
    // able to stall this thread (and with it every other client's reclaim).
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      int e = errno;
      if (e == EAGAIN || e == EWOULDBLOCK || e == EINTR) return;
      if (e == ECONNABORTED) continue;
      accept_errors.note(std::string("accept: ") + std::strerror(e) + " (this process may open " +
                         std::to_string(fds_limit()) + " descriptors)");
      // Out of descriptors: the reserve makes room to tell one client why
      // and let it go, and the loop takes the next one the same way until
      // the queue is empty. Only when that fails too does accept rest.
      if ((e == EMFILE || e == ENFILE) && reserve_fd >= 0) {
        ::close(reserve_fd);
        int late = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        bool drained = late < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
        if (late >= 0)
          refuse(late, Errc::limit,
                 "the server is out of descriptors; try again later (its operator: raise LimitNOFILE= or lower "
                 "engramd.toml [server] max_connections)");
        reserve_fd = open_reserve();
        if (drained) return;
        if (late >= 0 && reserve_fd >= 0) continue;
      }
      accept_paused_until_ns = monotonic_ns() + kAcceptPauseNs;
      return;
    }
    Client c;
    c.fd = fd;
    socklen_t len = sizeof c.cred;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c.cred, &len) != 0) {
      accept_errors.note(std::string("SO_PEERCRED: ") + std::strerror(errno) + "; refusing the connection");
      ::close(fd);
      continue;
    }
    if (std::string why = admission_refusal(); !why.empty()) {
      refusals.note("refused connections: " + why);
      refuse(fd, Errc::limit, why);
      continue;
    }
    make_room_for_startup();
    c.hello_deadline_ns = monotonic_ns() + int64_t{config.hello_timeout_ms} * 1'000'000;
    ++startups;
    clients.emplace(fd, std::move(c));
  }
}

void Server::Impl::close_silent() {
  int64_t now = monotonic_ns();
  for (auto it = clients.begin(); it != clients.end();) {
    Client& c = it->second;
    ++it;  // disconnect erases c
    if (c.attached || now < c.hello_deadline_ns) continue;
    silences.note("closed connections that sent no hello within " + std::to_string(config.hello_timeout_ms) +
                  " ms (engramd.toml [server] hello_timeout_ms)");
    ++refused;
    disconnect(c);
  }
  accept_errors.tick();
  refusals.tick();
  silences.tick();
  arena_waits.tick();
}

int Server::Impl::connections_poll_ms() const {
  int64_t now = monotonic_ns(), next = -1;
  auto sooner = [&](int64_t at) {
    if (at >= 0 && (next < 0 || at < next)) next = at;
  };
  for (const auto& [fd, c] : clients)
    if (!c.attached) sooner(c.hello_deadline_ns);
  if (accept_paused_until_ns > now) sooner(accept_paused_until_ns);
  for (const RepeatedLog* l : {&accept_errors, &refusals, &silences, &arena_waits})
    if (int64_t d = l->due_in_ns(); d >= 0) sooner(now + d);
  if (next < 0) return -1;
  return static_cast<int>(std::clamp<int64_t>((next - now + 999'999) / 1'000'000, 0, INT32_MAX));
}

}  // namespace engram
