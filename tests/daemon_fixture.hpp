// Helpers for tests that run engramd and client processes: a daemon in its
// own temporary directory, child processes with logs, and a raw control
// connection for what the C API does not show (arena block counts).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/control_message.hpp"
#include "core/futex.hpp"
#include "core/shm.hpp"
#include "engram/engram.h"

namespace engram::test {

// A client of the server on `socket` with default options; nullptr (and a
// test failure naming the error) when it cannot connect.
inline engram_client* connect_c(const std::string& socket) {
  engram_connect_options o;
  engram_connect_options_init(&o);
  o.socket_path = socket.c_str();
  engram_client* c = nullptr;
  EXPECT_EQ(engram_connect(&o, &c), ENGRAM_OK) << engram_last_error();
  return c;
}

inline std::string make_temp_dir() {
  char tmpl[] = "/tmp/engram-test-XXXXXX";
  const char* d = ::mkdtemp(tmpl);
  return d ? d : "";
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Starts a child with stdout and stderr appended to `log`; `in_child`, if
// given, runs in the child just before the exec (drop privileges, set
// limits) and may _exit on failure.
inline pid_t spawn(const std::vector<std::string>& args, const std::string& log,
                   const std::function<void()>& in_child = {}) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    if (in_child) in_child();
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

// The child's exit code, -signal if a signal ended it, or 1000 after killing
// it when it did not end within timeout_ms.
inline int wait_exit(pid_t pid, int timeout_ms) {
  int64_t deadline = monotonic_ns() + int64_t{timeout_ms} * 1000000;
  for (;;) {
    int st = 0;
    pid_t r = ::waitpid(pid, &st, WNOHANG);
    if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
    if (monotonic_ns() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &st, 0);
      return 1000;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// A raw control connection, as a client would open one.
class Control {
 public:
  explicit Control(const std::string& socket) {
    ok_ = connect_control(socket, 10000, &fd_, &hello_, &hello_fds_).ok() && hello_fds_.size() == 2;
  }
  ~Control() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return ok_; }
  const HelloReply& hello() const { return hello_; }
  int fd() const { return fd_; }
  // The arena and the bells, mapped from the descriptors of the hello (once each).
  ShmSegment map_arena() { return map(0, hello_.arena_size, "arena", ShmSegment::Populate::none); }
  // Whether block b of `a` (this connection's arena) was committed when it
  // said hello: a scan of the arena reads only those; the rest is a hole
  // the arena may grow into, and reading it allocates it (until the
  // server trims it back).
  bool committed_at_hello(const ArenaBlocks& a, uint32_t b) const {
    const uint32_t k = a.class_of(b);
    return b - a.size_class(k).first_block < hello_.committed[k];
  }
  ShmSegment map_bells() { return map(1, hello_.bells_size, "bells"); }
  ArenaConfig arena_config() const {
    ArenaConfig c;
    c.classes.assign(hello_.classes, hello_.classes + std::min<uint32_t>(hello_.num_classes, kArenaMaxClasses));
    return c;
  }

  Status call(ControlType t, const void* p, size_t n, std::vector<char>* reply, ReceivedFds* fds = nullptr) {
    return control_call(fd_, t, p, n, reply, 10000, fds);
  }
  // Up to n blocks of class k, reserved by this client (grant_blocks);
  // the server's refusal, if it refused.
  Result<std::vector<BlockRef>> grant(uint32_t k, uint32_t n) {
    GrantRequest rq{k, n};
    std::vector<char> r;
    if (Status s = call(ControlType::grant_blocks, &rq, sizeof rq, &r); !s.ok()) return s;
    std::vector<BlockRef> blocks(r.size() / sizeof(BlockRef));
    std::memcpy(blocks.data(), r.data(), blocks.size() * sizeof(BlockRef));
    return blocks;
  }
  Result<BlockRef> grant_one(uint32_t k) {
    auto g = grant(k, 1);
    if (!g.ok()) return g.status();
    if (g->size() != 1) return Status{Errc::corrupt, "a grant of one block brought " + std::to_string(g->size())};
    return g->front();
  }
  // Gives blocks back (return_blocks).
  Status give_back(const std::vector<BlockRef>& blocks) {
    return call(ControlType::return_blocks, blocks.data(), blocks.size() * sizeof(BlockRef), nullptr);
  }
  StatusReply status() {
    std::vector<char> r;
    StatusReply s{};
    if (call(ControlType::status, nullptr, 0, &r).ok() && r.size() >= sizeof s) std::memcpy(&s, r.data(), sizeof s);
    return s;
  }

 private:
  ShmSegment map(size_t i, size_t size, const char* what, ShmSegment::Populate p = ShmSegment::Populate::whole) {
    auto seg = ShmSegment::map_fd(hello_fds_.take(i), size, ShmSegment::Access::read_write, what, p);
    EXPECT_TRUE(seg.ok()) << seg.status().message();
    return seg.ok() ? std::move(*seg) : ShmSegment{};
  }

  int fd_ = -1;
  bool ok_ = false;
  HelloReply hello_{};
  ReceivedFds hello_fds_;
};

// engramd in a temporary directory, with `body` appended to its config;
// `in_child` runs in engramd's process before the exec (see spawn).
class Daemon {
 public:
  explicit Daemon(const std::string& body, std::function<void()> in_child = {}) : in_child_(std::move(in_child)) {
    dir_ = make_temp_dir();
    socket_ = dir_ + "/engram.sock";
    config_ = dir_ + "/engramd.toml";
    std::ofstream(config_) << "socket = \"" << socket_ << "\"\n" << body;
    start();
  }
  // A daemon still running at the end of a test must stop cleanly on
  // SIGTERM: a shutdown that hangs (wait_exit's 1000: killed after 10 s)
  // or crashes fails the test that left it.
  ~Daemon() {
    if (pid_ > 0) {
      ::kill(pid_, SIGCONT);  // should a test have ended with it frozen
      ::kill(pid_, SIGTERM);
      if (int rc = wait_exit(pid_, 10000); rc != 0)
        ADD_FAILURE() << "engramd exited with " << rc << " on SIGTERM at the end of the test; its log:\n"
                      << read_file(log());
    }
    std::string cmd = "rm -rf " + dir_;
    if (std::system(cmd.c_str()) != 0) {
    }
  }
  void start() {
    pid_ = spawn({ENGRAMD_PATH, "--config", config_}, log(), in_child_);
    for (int i = 0; i < 500; ++i) {
      if (Control(socket_).ok()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "engramd did not come up; its log:\n" << read_file(log());
  }
  void kill9() {
    ::kill(pid_, SIGKILL);
    wait_exit(pid_, 10000);
    pid_ = -1;
  }
  int terminate() {
    ::kill(pid_, SIGTERM);
    int rc = wait_exit(pid_, 10000);
    pid_ = -1;
    return rc;
  }
  // SIGSTOP, then waits until every thread of engramd has stopped: the
  // signal takes effect on each thread when it is next interrupted, and an
  // owner still running would apply what the test sends next, rightly.
  // Returns false if they had not all stopped within a second.
  bool freeze() {
    if (::kill(pid_, SIGSTOP) != 0) return false;
    std::string tasks = "/proc/" + std::to_string(pid_) + "/task";
    for (int i = 0; i < 1000; ++i) {
      bool all = true;
      for (const auto& t : std::filesystem::directory_iterator(tasks)) {
        std::string stat = read_file(t.path().string() + "/stat");
        size_t p = stat.rfind(')');
        if (p == std::string::npos || p + 2 >= stat.size() || stat[p + 2] != 'T') all = false;
      }
      if (all) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  }
  void thaw() { ::kill(pid_, SIGCONT); }
  const std::string& socket() const { return socket_; }
  const std::string& dir() const { return dir_; }
  std::string log() const { return dir_ + "/engramd.log"; }
  std::string file(const std::string& name) const { return dir_ + "/" + name; }
  pid_t pid() const { return pid_; }

 private:
  std::string dir_, socket_, config_;
  std::function<void()> in_child_;
  pid_t pid_ = -1;
};

// The columns engram_proc writes (tests/capi/engram_proc_data.h), as TOML.
inline const char* kProcColumns =
    "[[table.column]]\nname = \"obs\"\ndtype = \"uint8\"\nshape = [10, 30]\n"
    "[[table.column]]\nname = \"meta\"\ndtype = \"int64\"\nshape = [2]\n";

// The lines of `text` that hold `needle` (a log's lines of one kind).
inline size_t count_lines(const std::string& text, const std::string& needle) {
  size_t n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

inline std::string table_toml(const std::string& name, const std::string& body) {
  return "[[table]]\nname = \"" + name + "\"\n" + body + "\n" + kProcColumns;
}

struct WrittenItem {
  uint64_t key;
  uint32_t last_step;
  double priority;
};

inline std::vector<WrittenItem> read_keys(const std::string& path) {
  std::vector<WrittenItem> v;
  std::ifstream in(path);
  WrittenItem w{};
  while (in >> w.key >> w.last_step >> w.priority) v.push_back(w);
  return v;
}

inline std::vector<uint64_t> read_sampled(const std::string& path) {
  std::vector<uint64_t> v;
  std::ifstream in(path);
  uint64_t k;
  while (in >> k) v.push_back(k);
  return v;
}

}  // namespace engram::test
