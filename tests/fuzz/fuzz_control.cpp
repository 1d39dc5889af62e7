// libFuzzer target: arbitrary control-socket traffic against a real
// server (the one engramd runs), over a real Unix socket. Whatever a peer
// sends, the server must answer, refuse or hang up on it, and go on
// serving: after each input a fresh client's status request must succeed.
//
// Nor may it keep a descriptor that a peer sent it.
//
// Input: a sequence of messages, each
//   u8 type | u8 flags | u16 length (little-endian) | length bytes
// sent on one connection, in order. flags bit 0: send the bytes raw, with
// no ControlHeader (so magic, type and size are whatever they say); bit 1:
// attach descriptors (a memfd, a pipe's end: bits 2-3 give how many, 0-3,
// and bit 4 asks for 6, more than a message may carry); bit 5: say a valid
// hello first on this connection; bit 6: hang up after this message;
// bit 7: wait for a reply (up to 5 ms) before the next message. Replies,
// and the descriptors some carry, are read and dropped.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/control_message.hpp"
#include "server/config.hpp"
#include "server/log.hpp"
#include "server/server.hpp"

using namespace engram;

namespace {

std::string g_socket;

Server* server() {
  static std::unique_ptr<Server> s = [] {
    set_log_level(LogLevel::off);
    char dir[] = "/tmp/engram-fuzz-control-XXXXXX";
    if (!mkdtemp(dir)) std::abort();
    g_socket = std::string(dir) + "/s.sock";
    std::string toml = "socket = \"" + g_socket +
                       "\"\n[arena]\nclasses = [ { block_size = \"4KiB\", count = 64 } ]\n"
                       "[client]\nring_records = 16\n"
                       "[[table]]\nname = \"t\"\nmax_size = 8\n[[table.column]]\nname = \"x\"\ndtype = \"float32\"\n";
    auto config = parse_config(toml, "fuzz");
    if (!config.ok()) {
      std::fprintf(stderr, "fuzz_control: %s\n", config.status().message().c_str());
      std::abort();
    }
    auto started = Server::start(*config);
    if (!started.ok()) {
      std::fprintf(stderr, "fuzz_control: %s\n", started.status().message().c_str());
      std::abort();
    }
    return std::move(*started);
  }();
  return s.get();
}

int connect_to_server() {
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, g_socket.c_str(), sizeof a.sun_path - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    std::fprintf(stderr, "fuzz_control: the server stopped accepting: %s\n", std::strerror(errno));
    std::abort();
  }
  return fd;
}

// Reads and drops what the server sent, waiting up to wait_ms for the first.
void drain(int fd, int wait_ms) {
  for (;;) {
    ControlHeader h;
    std::vector<char> p;
    ReceivedFds fds;  // closed when it goes
    if (!recv_message(fd, &h, &p, wait_ms, &fds).ok()) return;
    wait_ms = 0;
  }
}

// What /proc/self/fd says descriptor fd is ("pipe:[1234]", ...).
std::string link_of(int fd) {
  char link[64], target[256];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = ::readlink(link, target, sizeof target - 1);
  return n > 0 ? std::string(target, static_cast<size_t>(n)) : std::string();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  server();
  int fd = connect_to_server();
  // Descriptors a message may carry: whatever the server does with them,
  // it must not keep them (checked at the end).
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) std::abort();
  int mem = ::memfd_create("fuzz-peer", MFD_CLOEXEC);
  std::string pipe_name = link_of(pipe_fds[0]);
  int pool[6] = {mem, pipe_fds[0], pipe_fds[1], mem, pipe_fds[0], pipe_fds[1]};
  size_t at = 0;
  while (fd >= 0 && at + 4 <= size) {
    uint8_t type = data[at], flags = data[at + 1];
    size_t len = data[at + 2] | size_t{data[at + 3]} << 8;
    at += 4;
    len = std::min(len, size - at);
    const uint8_t* body = data + at;
    at += len;
    if (flags & 0x20) {
      HelloRequest h = hello_request();
      (void)send_message(fd, ControlType::hello, 0, &h, sizeof h);
      drain(fd, 5);
    }
    size_t nfds = (flags & 0x02) ? ((flags & 0x10) ? 6 : (flags >> 2) & 3) : 0;
    if (flags & 0x01) {
      (void)send_datagram(fd, body, len, pool, nfds);
    } else {
      std::vector<uint8_t> msg(sizeof(ControlHeader) + len);
      ControlHeader h{kControlMagic, type, 0, static_cast<uint32_t>(len)};
      std::memcpy(msg.data(), &h, sizeof h);
      if (len) std::memcpy(msg.data() + sizeof h, body, len);
      (void)send_datagram(fd, msg.data(), msg.size(), pool, nfds);
    }
    drain(fd, (flags & 0x80) ? 5 : 0);
    if (flags & 0x40) {
      ::close(fd);
      fd = -1;
    }
  }
  if (fd >= 0) ::close(fd);
  ::close(mem);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  // The server still serves a new client.
  int probe = connect_to_server();
  HelloRequest h = hello_request();
  std::vector<char> reply;
  ReceivedFds got;
  Status s = control_call(probe, ControlType::hello, &h, sizeof h, &reply, 5000, &got);
  if (s.ok()) s = control_call(probe, ControlType::status, nullptr, 0, &reply, 5000);
  if (!s.ok() || reply.size() < sizeof(StatusReply)) {
    std::fprintf(stderr, "fuzz_control: the server no longer answers: %s\n", s.message().c_str());
    std::abort();
  }
  ::close(probe);
  // Nothing the peers sent may stay open in the server, which runs in this
  // process: once the server has read and dropped it (it may still be
  // reaping the connections this input closed), no descriptor of the
  // memfd or the pipe is left here.
  for (int tries = 0;; ++tries) {
    int held = 0;
    DIR* dir = ::opendir("/proc/self/fd");
    while (dirent* e = dir ? ::readdir(dir) : nullptr) {
      if (e->d_name[0] == '.') continue;
      std::string target = link_of(std::atoi(e->d_name));
      if (target.rfind("/memfd:fuzz-peer", 0) == 0 || target == pipe_name) ++held;
    }
    if (dir) ::closedir(dir);
    if (held == 0) break;
    if (tries == 100) {
      std::fprintf(stderr, "fuzz_control: the server keeps %d descriptors that peers sent it\n", held);
      std::abort();
    }
    ::usleep(10000);
  }
  return 0;
}
