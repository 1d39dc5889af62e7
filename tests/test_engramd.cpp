// engramd as a program: flags, readiness, refusals at start-up, SIGHUP,
// and engramctl against it.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <csignal>
#include <filesystem>
#include <memory>
#include <regex>
#include <set>
#include <thread>

#include "daemon_fixture.hpp"
#include "engram/server.h"

namespace engram::test {
namespace {

// Runs a program to completion; returns its exit code and its output.
int run(const std::vector<std::string>& args, std::string* out, const std::string& dir) {
  std::string log = dir + "/run.out";
  ::unlink(log.c_str());
  int rc = wait_exit(spawn(args, log), 30000);
  *out = read_file(log);
  return rc;
}

TEST(Engramd, HelpVersionAndCheckConfig) {
  std::string dir = make_temp_dir(), out;
  EXPECT_EQ(run({ENGRAMD_PATH, "--help"}, &out, dir), 0);
  EXPECT_NE(out.find("--check-config"), std::string::npos);
  EXPECT_EQ(run({ENGRAMD_PATH, "--version"}, &out, dir), 0);
  EXPECT_NE(out.find("engramd 0.5.0"), std::string::npos);
  std::ofstream(dir + "/good.toml") << table_toml("t", "max_size = 10");
  EXPECT_EQ(run({ENGRAMD_PATH, "--check-config", "--config", dir + "/good.toml"}, &out, dir), 0) << out;
  std::ofstream(dir + "/bad.toml") << table_toml("t", "max_size = 10\nmax_times_sampled = -2");
  EXPECT_EQ(run({ENGRAMD_PATH, "--check-config", "--config", dir + "/bad.toml"}, &out, dir), 1);
  EXPECT_NE(out.find("table[0].max_times_sampled"), std::string::npos) << out;
  EXPECT_EQ(run({ENGRAMD_PATH, "--bogus"}, &out, dir), 2);
  EXPECT_EQ(run({ENGRAMD_PATH, "--check-config", "--config", ENGRAM_SOURCE_DIR "/dist/engramd.toml"}, &out, dir), 0)
      << "the sample config must stay valid: " << out;
  std::ofstream(dir + "/group.toml") << "group = \"no-such-group-here\"\n";
  EXPECT_EQ(run({ENGRAMD_PATH, "--check-config", "--config", dir + "/group.toml"}, &out, dir), 1);
  EXPECT_NE(out.find("groupadd"), std::string::npos) << out;
  EXPECT_EQ(run({ENGRAMD_PATH, "--check-config", "--config", dir + "/missing.toml"}, &out, dir), 1);
  EXPECT_NE(out.find("missing.toml"), std::string::npos) << out;
}

// One precedence for the socket, in engramd and the embedded server alike
// (issue 59.2): the caller's own (--socket, socket_path), else the
// config's `socket`, else $ENGRAM_SOCKET, else /run/engram/engram.sock.
// engramd used to rank $ENGRAM_SOCKET above the config, and the embedded
// server ignored it under any config.
TEST(Engramd, OneSocketPrecedenceForEngramdAndTheEmbeddedServer) {
  std::string dir = make_temp_dir(), out;
  const std::string env = dir + "/env.sock", named = dir + "/named.sock", flag = dir + "/flag.sock";
  const std::string naming = "socket = \"" + named + "\"\n";
  std::ofstream(dir + "/naming.toml") << naming;
  std::ofstream(dir + "/silent.toml") << "group = \"\"\n";
  auto check = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {ENGRAMD_PATH, "--check-config"});
    std::string log = dir + "/run.out";
    ::unlink(log.c_str());
    int rc = wait_exit(spawn(args, log, [&] { ::setenv("ENGRAM_SOCKET", env.c_str(), 1); }), 30000);
    std::string text = read_file(log);
    EXPECT_EQ(rc, 0) << text;
    return text;
  };
  EXPECT_NE(check({"--config", dir + "/naming.toml"}).find("socket " + named + ")"), std::string::npos);
  EXPECT_NE(check({"--config", dir + "/silent.toml"}).find("socket " + env + ")"), std::string::npos);
  EXPECT_NE(check({}).find("socket " + env + ")"), std::string::npos);
  EXPECT_NE(check({"--config", dir + "/naming.toml", "--socket", flag}).find("socket " + flag + ")"), std::string::npos);

  // The embedded server, from a config's text: where its socket appears.
  ASSERT_EQ(::setenv("ENGRAM_SOCKET", env.c_str(), 1), 0);
  auto bound = [&](const char* toml, const char* socket) {
    engram_server_options so;
    engram_server_options_init(&so);
    so.config_toml = toml;
    so.socket_path = socket;
    so.quiet = 1;
    engram_server* server = nullptr;
    EXPECT_EQ(engram_server_start(&so, &server), ENGRAM_OK) << engram_last_error();
    std::string where;
    for (const std::string& p : {env, named, flag})
      if (std::filesystem::exists(p)) where = p;
    engram_server_stop(server);
    return where;
  };
  EXPECT_EQ(bound(naming.c_str(), nullptr), named);
  EXPECT_EQ(bound("group = \"\"\n", nullptr), env);
  EXPECT_EQ(bound(nullptr, nullptr), env);
  EXPECT_EQ(bound(naming.c_str(), flag.c_str()), flag);
  // "" is not NULL: a mistake, said so.
  engram_server_options so;
  engram_server_options_init(&so);
  so.socket_path = "";
  engram_server* server = nullptr;
  EXPECT_EQ(engram_server_start(&so, &server), ENGRAM_E_INVALID);
  EXPECT_NE(std::string(engram_last_error()).find("socket_path"), std::string::npos) << engram_last_error();
  ::unsetenv("ENGRAM_SOCKET");
}

// systemd's notify protocol, as a service manager hears it (sd_notify(3)).
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    bound_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~NotifySocket() { ::close(fd_); }
  bool bound() const { return bound_; }
  // The next message that contains `what`, skipping others; "" after timeout_ms.
  std::string next_with(const std::string& what, int timeout_ms) {
    int64_t deadline = monotonic_ns() + int64_t{timeout_ms} * 1'000'000;
    for (;;) {
      int left = static_cast<int>((deadline - monotonic_ns()) / 1'000'000);
      pollfd p{fd_, POLLIN, 0};
      if (left <= 0 || ::poll(&p, 1, left) != 1) return "";
      char buf[1024] = {};
      ssize_t n = ::recv(fd_, buf, sizeof buf - 1, 0);
      if (n <= 0) return "";
      seen_ += std::string(buf, static_cast<size_t>(n)) + "\n--\n";
      if (std::string(buf).find(what) != std::string::npos) return buf;
    }
  }
  const std::string& seen() const { return seen_; }

 private:
  std::string path_, seen_;
  int fd_ = -1;
  bool bound_ = false;
};

TEST(Engramd, SpeaksSystemdsNotifyProtocol) {
  std::string dir = make_temp_dir();
  NotifySocket notify(dir + "/notify");
  ASSERT_TRUE(notify.bound());
  std::string sock = dir + "/engram.sock";
  std::ofstream(dir + "/c.toml") << "socket = \"" << sock << "\"\n"
                                 << table_toml("t", "max_size = 100") << "[checkpoint]\ndir = \"" << dir
                                 << "/ck\"\non_shutdown = true\n";
  ::setenv("NOTIFY_SOCKET", (dir + "/notify").c_str(), 1);
  ::setenv("WATCHDOG_USEC", "600000", 1);  // engramd asks every 200 ms
  pid_t pid = spawn({ENGRAMD_PATH, "--config", dir + "/c.toml"}, dir + "/log");
  ::unsetenv("NOTIFY_SOCKET");
  ::unsetenv("WATCHDOG_USEC");
  std::string ready = notify.next_with("READY=1", 10000);
  ASSERT_NE(ready, "") << read_file(dir + "/log");
  EXPECT_NE(ready.find("STATUS=1 table, 0 clients; no checkpoint yet"), std::string::npos) << ready;
  // Ready means usable: the socket answers and the table exists.
  Control ctl(sock);
  ASSERT_TRUE(ctl.ok());
  NameRequest n{};
  std::strcpy(n.name, "t");
  EXPECT_TRUE(ctl.call(ControlType::table_info, &n, sizeof n, nullptr).ok());
  // The watchdog is fed while the server answers, with the status line.
  std::string fed = notify.next_with("WATCHDOG=1", 2000);
  EXPECT_NE(fed.find("STATUS=1 table, 1 client;"), std::string::npos) << notify.seen();
  // A reload is bracketed.
  ::kill(pid, SIGHUP);
  EXPECT_NE(notify.next_with("RELOADING=1", 2000), "") << notify.seen();
  EXPECT_NE(notify.next_with("READY=1", 2000), "") << notify.seen();
  // Something to save, then the shutdown checkpoint extends the stop timeout.
  ASSERT_EQ(wait_exit(spawn({ENGRAM_PROC_PATH, "writer", sock, "t", "0", "40", dir + "/k"}, dir + "/p"), 30000), 0)
      << read_file(dir + "/p");
  ::kill(pid, SIGTERM);
  EXPECT_NE(notify.next_with("STOPPING=1", 5000), "") << notify.seen();
  std::string ext = notify.next_with("EXTEND_TIMEOUT_USEC=", 10000);
  EXPECT_NE(ext.find("STATUS=checkpointing:"), std::string::npos) << notify.seen();
  EXPECT_EQ(wait_exit(pid, 10000), 0);
  std::string cmd = "rm -rf " + dir;
  EXPECT_EQ(std::system(cmd.c_str()), 0);
}

// Issue 41, point 2: engram(7) says no one but the server can write its
// indexes. A process of engramd's own uid (not root; this kernel has no
// Yama) could, through /proc/<pid>/mem, process_vm_writev or ptrace, and
// on 737aa57 killed it with SIGSEGV that way. engramd is non-dumpable now,
// which closes all three to every process but root's.
TEST(Engramd, AProcessOfItsOwnUidCannotReachItsMemory) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to run engramd and the intruder as nobody";
  const uid_t nobody = 65534;
  std::string dir = make_temp_dir();
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  auto become_nobody = [nobody] {
    if (::setgroups(0, nullptr) != 0 || ::setgid(nobody) != 0 || ::setuid(nobody) != 0) ::_exit(126);
  };
  std::string socket = dir + "/engram.sock", log = dir + "/engramd.log";
  pid_t engramd = spawn({ENGRAMD_PATH, "--socket", socket}, log, become_nobody);
  bool up = false;
  for (int i = 0; i < 500 && !up; ++i) {
    up = Control(socket).ok();
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(up) << read_file(log);
  // The intruder reports each way in as one bit of its exit code.
  pid_t intruder = ::fork();
  if (intruder == 0) {
    become_nobody();
    int ways = 0;
    int mem = ::open(("/proc/" + std::to_string(engramd) + "/mem").c_str(), O_RDWR | O_CLOEXEC);
    if (mem >= 0) ways |= 1;
    if (::ptrace(PTRACE_SEIZE, engramd, nullptr, nullptr) == 0) ways |= 2;
    // An address nobody maps: EFAULT means the kernel let us in, EPERM not.
    char byte = 0;
    iovec local{&byte, 1}, remote{reinterpret_cast<void*>(0x1000), 1};
    if (::process_vm_writev(engramd, &local, 1, &remote, 1, 0) >= 0 || errno != EPERM) ways |= 4;
    ::_exit(ways);
  }
  int ways = wait_exit(intruder, 10000);
  EXPECT_EQ(ways & 1, 0) << "/proc/<engramd>/mem opened for writing by a process of its uid";
  EXPECT_EQ(ways & 2, 0) << "ptrace attached to engramd from a process of its uid";
  EXPECT_EQ(ways & 4, 0) << "process_vm_writev reached engramd from a process of its uid";
  EXPECT_LT(ways, 8) << "the intruder did not run";
  EXPECT_TRUE(Control(socket).ok()) << "engramd died: " << read_file(log);
  ::kill(engramd, SIGTERM);
  EXPECT_EQ(wait_exit(engramd, 10000), 0) << read_file(log);
  EXPECT_EQ(std::system(("rm -rf " + dir).c_str()), 0);
}

TEST(Engramd, RefusesASecondServerAndReplacesAStaleOne) {
  Daemon d(table_toml("t", "max_size = 10"));
  std::string out;
  EXPECT_EQ(run({ENGRAMD_PATH, "--socket", d.socket()}, &out, d.dir()), 1);
  EXPECT_NE(out.find("another server is live"), std::string::npos) << out;
  d.kill9();
  d.start();
  EXPECT_NE(read_file(d.log()).find("removed the stale socket"), std::string::npos) << read_file(d.log());
}

// Segments are memfds, whose pages come from no mount with a size: an
// arena larger than the memory left is refused at start, naming the limit,
// before a page is reserved (else the OOM killer would have the last word).
TEST(Engramd, RefusesAnArenaThatMemoryCannotHold) {
  std::string dir = make_temp_dir(), out;
  std::ofstream(dir + "/big.toml") << "socket = \"" << dir << "/s.sock\"\n"
                                   << "[arena]\nclasses = [ { block_size = \"1GiB\", count = 100000 } ]\n";
  EXPECT_EQ(run({ENGRAMD_PATH, "--config", dir + "/big.toml"}, &out, dir), 1);
  EXPECT_NE(out.find("needs 100000.00 GiB"), std::string::npos) << out;
  EXPECT_NE(out.find("MemAvailable"), std::string::npos) << out;
  EXPECT_NE(out.find("configure a smaller [arena]"), std::string::npos) << out;
  EXPECT_NE(::access((dir + "/s.sock").c_str(), F_OK), 0) << "nothing is left behind";
}

// The same within a memory cgroup's limit (cgroup v1 here; v2 reads
// memory.max), where the machine itself has room: engramd runs in a
// cgroup of 64 MiB and is asked for a 256 MiB arena.
TEST(Engramd, RefusesAnArenaThatItsMemoryCgroupCannotHold) {
  std::string own;
  {
    std::ifstream in("/proc/self/cgroup");
    for (std::string line; std::getline(in, line);)
      if (line.find(":memory:") != std::string::npos) own = line.substr(line.find(":memory:") + 8);
  }
  std::string cg = "/sys/fs/cgroup/memory" + (own == "/" ? "" : own) + "/engram-test-" + std::to_string(getpid());
  if (own.empty() || ::mkdir(cg.c_str(), 0755) != 0)
    GTEST_SKIP() << "no cgroup v1 memory controller to make a child group in (" << std::strerror(errno)
                 << "); nothing was checked";
  std::ofstream(cg + "/memory.limit_in_bytes") << (64 << 20);
  std::string dir = make_temp_dir(), out;
  std::ofstream(dir + "/c.toml") << "socket = \"" << dir << "/s.sock\"\n"
                                 << "[arena]\nclasses = [ { block_size = \"1MiB\", count = 256 } ]\n";
  std::string script = "echo $$ > " + cg + "/cgroup.procs && exec " + ENGRAMD_PATH + " --config " + dir + "/c.toml";
  EXPECT_EQ(run({"/bin/sh", "-c", script}, &out, dir), 1);
  EXPECT_NE(out.find("left under the memory limit of cgroup"), std::string::npos) << out;
  EXPECT_NE(out.find("configure a smaller [arena]"), std::string::npos) << out;
  ::rmdir(cg.c_str());
}

TEST(Engramd, SighupReloadsRateLimiters) {
  Daemon d(table_toml("t", "max_size = 10"));
  std::string cfg = d.dir() + "/engramd.toml";
  std::ofstream(cfg) << "socket = \"" << d.socket() << "\"\n"
                     << table_toml("t", "max_size = 10\nrate_limiter = { kind = \"min_size\", min_size = 7 }");
  ::kill(d.pid(), SIGHUP);
  Control ctl(d.socket());
  NameRequest n{};
  std::strcpy(n.name, "t");
  TableInfoWire w{};
  for (int i = 0; i < 500 && w.spec.limiter.min_size_to_sample != 7; ++i) {
    std::vector<char> r;
    ASSERT_TRUE(ctl.call(ControlType::table_info, &n, sizeof n, &r).ok());
    std::memcpy(&w, r.data(), sizeof w);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(w.spec.limiter.min_size_to_sample, 7);
  EXPECT_NE(read_file(d.log()).find("rate limiter applied"), std::string::npos);
  EXPECT_EQ(read_file(d.log()).find("differ from the running table"), std::string::npos) << read_file(d.log());
  // What a reload cannot change is named, not passed over in silence: the
  // log said only "rate limiter applied" for an edited max_size.
  std::ofstream(cfg) << "socket = \"" << d.socket() << "\"\n"
                     << table_toml("t", "max_size = 20\nsampler = \"lifo\"\n"
                                        "rate_limiter = { kind = \"min_size\", min_size = 7 }");
  ::kill(d.pid(), SIGHUP);
  const std::string want = "reload: table t: max_size, sampler in the config differ from the running table";
  for (int i = 0; i < 500 && read_file(d.log()).find(want) == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_NE(read_file(d.log()).find(want), std::string::npos) << read_file(d.log());
}

TEST(Engramd, CheckpointsOnRequestAndShutdownAndRestoresThem) {
  Daemon d(table_toml("replay", "max_size = 500"));
  std::string ckpt = d.dir() + "/ckpt";
  std::ofstream(d.dir() + "/engramd.toml") << "socket = \"" << d.socket() << "\"\n[checkpoint]\ndir = \"" << ckpt
                                            << "\"\non_shutdown = true\nkeep = 10\n"
                                            << table_toml("replay", "max_size = 500");
  EXPECT_EQ(d.terminate(), 0) << read_file(d.log());
  d.start();
  std::string out;
  const std::string ctl = ENGRAMCTL_PATH, s = "--socket";
  ASSERT_EQ(wait_exit(spawn({ENGRAM_PROC_PATH, "writer", d.socket(), "replay", "0", "100", d.file("k")}, d.file("p")),
                      30000),
            0);
  EXPECT_EQ(run({ctl, s, d.socket(), "checkpoint"}, &out, d.dir()), 0) << out;
  EXPECT_NE(out.find(ckpt + "/ckpt-"), std::string::npos) << out;
  std::string first = out.substr(out.find(ckpt));
  first = first.substr(0, first.find('\n'));
  ASSERT_EQ(wait_exit(spawn({ENGRAM_PROC_PATH, "writer", d.socket(), "replay", "1", "50", d.file("k2")}, d.file("p")),
                      30000),
            0);
  EXPECT_EQ(d.terminate(), 0);  // writes the on-shutdown checkpoint
  EXPECT_NE(read_file(d.log()).find("checkpoint on shutdown"), std::string::npos) << read_file(d.log());
  d.start();  // restores the newest: 48 + 24 items (engram_proc makes one per two steps)
  EXPECT_NE(read_file(d.log()).find("restored checkpoint"), std::string::npos) << read_file(d.log());
  EXPECT_EQ(run({ctl, s, d.socket(), "info", "replay", "--json"}, &out, d.dir()), 0) << out;
  EXPECT_NE(out.find("\"size\": 72,"), std::string::npos) << out;
  EXPECT_EQ(d.terminate(), 0);

  // --restore names one checkpoint: the first, with 48 items...
  std::string log = d.dir() + "/restore.out";
  pid_t pid = spawn({ENGRAMD_PATH, "--config", d.dir() + "/engramd.toml", "--restore", first}, log);
  for (int i = 0; i < 500 && !Control(d.socket()).ok(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(run({ctl, s, d.socket(), "info", "replay", "--json"}, &out, d.dir()), 0) << out;
  EXPECT_NE(out.find("\"size\": 48,"), std::string::npos) << out;
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid, 10000), 0);
  // ...and when it does not check out, engramd refuses to start, naming the file.
  std::ofstream(first + "/chunks.zst", std::ios::app) << "x";
  EXPECT_EQ(run({ENGRAMD_PATH, "--config", d.dir() + "/engramd.toml", "--restore", first}, &out, d.dir()), 1);
  EXPECT_NE(out.find("chunks.zst"), std::string::npos) << out;
  d.start();  // keeps the daemon's destructor happy
}

// Options for a table of ten items of one float32 scalar, the rest default.
engram_table_options scalar_table(const char* name) {
  static const engram_column col = {"x", ENGRAM_FLOAT32, 0, {}};
  engram_table_options o;
  engram_table_options_init(&o);
  o.name = name;
  o.max_size = 10;
  o.columns = &col;
  o.num_columns = 1;
  return o;
}

// A table name is logged when it is created: one with a newline and a
// syslog priority would forge a journal line of its own. Such names are
// refused with the rule; what a client sends through the raw protocol is
// refused the same way, and nothing of it starts a line of the log.
TEST(Engramd, NamesThatWouldForgeLogLinesAreRefusedAndNothingIsLoggedRaw) {
  Daemon d("");
  engram_client* c = connect_c(d.socket());
  ASSERT_NE(c, nullptr);
  engram_table_options o = scalar_table("evil\n<2>engramd: forged critical line");
  EXPECT_EQ(engram_table_create(c, &o), ENGRAM_E_INVALID);
  EXPECT_NE(std::string(engram_last_error()).find("letters, digits"), std::string::npos) << engram_last_error();
  engram_disconnect(c);
  Control ctl(d.socket());
  ASSERT_TRUE(ctl.ok());
  TableSpec spec{};  // made by hand: to_spec takes checked options only
  std::strncpy(spec.name, "raw\n<2>forged through the protocol", sizeof spec.name - 1);
  spec.capacity = 10;
  spec.num_columns = 1;
  spec.columns[0] = make_column("x", DType::f32, {});
  spec.max_refs_per_item = kMaxItemChunks;
  Status s = ctl.call(ControlType::create_table, &spec, sizeof spec, nullptr);
  EXPECT_EQ(s.code(), Errc::invalid_argument) << s.message();
  NameRequest n{};
  std::memcpy(n.name, "a\nb\x01", 5);
  s = ctl.call(ControlType::drop_table, &n, sizeof n, nullptr);
  EXPECT_EQ(s.code(), Errc::not_found);
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << "the reply quotes the name raw: " << s.message();
  std::string log = read_file(d.log());
  EXPECT_EQ(log.find("\n<2>"), std::string::npos) << log;
  EXPECT_EQ(log.find("forged"), std::string::npos) << "a refused name was logged: " << log;
}

// Every segment is a sealed memfd: nothing under /dev/shm to open, no
// descriptor a client holds (or root opens through /proc/<pid>/map_files)
// can resize one, and a table's index takes no writable
// mapping or write but the daemon's own. On c15b268 a client truncated
// /dev/shm/<prefix>.arena and engramd died of SIGBUS (status 135), and the
// index /dev/shm/<prefix>.t0 took any write of the daemon's uid.
TEST(Engramd, NoSegmentCanBeResizedOrItsIndexWritten) {
  Daemon d(table_toml("t", "max_size = 10"));
  // Servers named their segments engram-<12 hex digits of the socket's hash>.<what>.
  const std::regex server_segment("engram-[0-9a-f]{12}\\..*");
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm"))
    EXPECT_FALSE(std::regex_match(e.path().filename().string(), server_segment)) << e.path() << ": a named segment";
  Control ctl(d.socket());
  ASSERT_TRUE(ctl.ok());
  NameRequest n{};
  std::strncpy(n.name, "t", sizeof n.name - 1);
  std::vector<char> r;
  ReceivedFds chan;
  ASSERT_TRUE(ctl.call(ControlType::open_table, &n, sizeof n, &r, &chan).ok());
  ASSERT_EQ(chan.size(), 1u);
  int fd = chan.take(0);
  EXPECT_NE(::ftruncate(fd, 0), 0) << "a client truncated its channel";
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(::ftruncate(fd, 1 << 30), 0) << "a client grew its channel";
  EXPECT_NE(::fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), 0) << "seals are sealed";
  ::close(fd);
  // Everything engramd has mapped, as root reaches it (/proc/<pid>/map_files;
  // engramd keeps no descriptor of an index, which no one is handed).
  std::string maps = "/proc/" + std::to_string(d.pid()) + "/map_files";
  std::set<std::string> seen;
  int memfds = 0, indexes = 0;
  for (const auto& e : std::filesystem::directory_iterator(maps)) {
    std::error_code ec;
    std::string target = std::filesystem::read_symlink(e.path(), ec).string();
    if (target.find("/memfd:engram-") != 0 || !seen.insert(target).second) continue;
    ++memfds;
    int m = ::open(e.path().c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(m, 0) << target << ": " << std::strerror(errno);
    EXPECT_NE(::ftruncate(m, 0), 0) << target << " was truncated";
    if (target.find(".index0") != std::string::npos) {
      ++indexes;
      char junk[64] = {1};
      EXPECT_LT(::pwrite(m, junk, sizeof junk, 0), 0) << "the index took a write";
      void* w = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, m, 0);
      EXPECT_EQ(w, MAP_FAILED) << "the index took a writable mapping";
      if (w != MAP_FAILED) ::munmap(w, 4096);
    }
    ::close(m);
  }
  EXPECT_GE(memfds, 4) << "arena, bells, index, channel";
  EXPECT_EQ(indexes, 1);
  EXPECT_EQ(ctl.status().tables, 1u) << "engramd died";
  EXPECT_EQ(d.terminate(), 0);
  d.start();
}

// A client may write the doorbells (it must, to ring them), so it can zero
// them: the sleeper counts a waker reads, and the segment's header. On
// c15b268, zeroing them while a table's owner slept and then closing the
// table left the control thread waiting for ever on an owner that was
// never woken: status unanswered, new clients timed out, SIGTERM ignored;
// zeroing the header made every later connect fail. Now the daemon wakes
// its own owners whatever the bells say, and no client reads the header.
TEST(Engramd, ZeroedDoorbellsWedgeNothing) {
  Daemon d(table_toml("t", "max_size = 10"));
  {
    Control hostile(d.socket());
    ASSERT_TRUE(hostile.ok());
    ShmSegment bells = hostile.map_bells();
    NameRequest n{};
    std::strncpy(n.name, "t", sizeof n.name - 1);
    std::vector<char> r;
    ASSERT_TRUE(hostile.call(ControlType::open_table, &n, sizeof n, &r).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the owner is asleep on its bell
    std::memset(bells.data(), 0, bells.size());
    auto t0 = std::chrono::steady_clock::now();
    Status s = hostile.call(ControlType::close_table, &n, sizeof n, nullptr);
    EXPECT_TRUE(s.ok()) << s.message();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2)) << "close_table waited on the owner";
  }
  Control ctl(d.socket());
  ASSERT_TRUE(ctl.ok()) << "a new client could not connect";
  EXPECT_EQ(ctl.status().tables, 1u);
  engram_client* c = connect_c(d.socket());
  ASSERT_NE(c, nullptr) << "the C API could not connect after the bells' header was zeroed";
  engram_table* t = nullptr;
  ASSERT_EQ(engram_table_open(c, "t", &t), ENGRAM_OK) << engram_last_error();
  engram_column col = {"obs", ENGRAM_UINT8, 2, {10, 30}};
  engram_column meta = {"meta", ENGRAM_INT64, 1, {2}};
  engram_column cols[2] = {col, meta};
  engram_writer_options wo;
  engram_writer_options_init(&wo);
  wo.columns = cols;
  wo.num_columns = 2;
  engram_writer* w = nullptr;
  ASSERT_EQ(engram_writer_open(c, &wo, &w), ENGRAM_OK) << engram_last_error();
  std::vector<uint8_t> obs(300, 1);
  int64_t m[2] = {1, 2};
  const void* data[2] = {obs.data(), m};
  ASSERT_EQ(engram_writer_append(w, data), ENGRAM_OK) << engram_last_error();
  ASSERT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_OK) << engram_last_error();
  EXPECT_EQ(engram_writer_flush(w, 2000), ENGRAM_OK) << engram_last_error();
  engram_disconnect(c);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(d.terminate(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3)) << "SIGTERM took too long";
  d.start();
}

// engramd stopped (SIGSTOP: any stall of the owner, a paused VM, CPU
// throttling) for longer than a caller's timeout.
class StalledDaemon : public ::testing::Test {
 protected:
  void SetUp() override {
    d_ = std::make_unique<Daemon>(
        "[[table]]\nname = \"q\"\nmax_size = 10\nsampler = \"fifo\"\nmax_times_sampled = 1\n"
        "rate_limiter = { kind = \"queue\", size = 10 }\n[[table.column]]\nname = \"x\"\ndtype = \"float32\"\n");
    for (engram_client** c : {&consumer_, &producer_}) {
      *c = connect_c(d_->socket());
      ASSERT_NE(*c, nullptr);
    }
    // The producer's channel first: the owner then services its insert
    // before the consumer's sample when it runs again.
    ASSERT_EQ(engram_table_open(producer_, "q", &pq_), ENGRAM_OK) << engram_last_error();
    ASSERT_EQ(engram_table_open(consumer_, "q", &cq_), ENGRAM_OK) << engram_last_error();
  }
  void TearDown() override {
    ::kill(d_->pid(), SIGCONT);
    engram_disconnect(consumer_);
    engram_disconnect(producer_);
  }
  void stop_daemon() { ASSERT_TRUE(d_->freeze()) << "engramd did not stop within a second of SIGSTOP"; }
  engram_writer* writer(int32_t insert_timeout_ms) {
    engram_column col = {"x", ENGRAM_FLOAT32, 0, {}};
    engram_writer_options o;
    engram_writer_options_init(&o);
    o.columns = &col;
    o.num_columns = 1;
    o.insert_timeout_ms = insert_timeout_ms;
    o.keep_keys = 1;
    engram_writer* w = nullptr;
    EXPECT_EQ(engram_writer_open(producer_, &o, &w), ENGRAM_OK) << engram_last_error();
    return w;
  }
  void put(engram_writer* w, float v) {
    const void* cols[1] = {&v};
    ASSERT_EQ(engram_writer_append(w, cols), ENGRAM_OK) << engram_last_error();
    ASSERT_EQ(engram_writer_create_item(w, pq_, 1, 1.0), ENGRAM_OK) << engram_last_error();
  }
  engram_table_info info() {
    engram_table_info i;
    engram_table_info_init(&i);
    EXPECT_EQ(engram_table_info_get(producer_, "q", &i), ENGRAM_OK) << engram_last_error();
    return i;
  }
  int sample(int32_t timeout_ms, float* out, uint32_t* n) {
    engram_sample_options so;
    engram_sample_options_init(&so);
    so.timeout_ms = timeout_ms;
    void* bufs[1] = {out};
    return engram_sample(cq_, &so, bufs, nullptr, n);
  }
  static double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  std::unique_ptr<Daemon> d_;
  engram_client *consumer_ = nullptr, *producer_ = nullptr;
  engram_table *cq_ = nullptr, *pq_ = nullptr;
};

// A sample that timed out is never applied later: the item that arrived
// while the daemon stood still stays in the queue for the next sample.
// On c15b268 the consumer got ENGRAM_E_TIMEOUT after 1.3 s, and the table
// then showed samples 1, size 0: the item was lost.
TEST_F(StalledDaemon, ATimedOutSampleIsNeverAppliedAndTheItemStays) {
  engram_writer* w = writer(-1);
  stop_daemon();
  std::thread producer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    put(w, 42.0f);  // into the ring; applied once the daemon runs again
  });
  float x = 0;
  uint32_t n = 9;
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(sample(300, &x, &n), ENGRAM_E_TIMEOUT) << engram_last_error();
  double waited = seconds_since(t0);
  EXPECT_GE(waited, 0.3);
  EXPECT_LT(waited, 1.0) << "the caller waited past its timeout for a stopped daemon";
  EXPECT_EQ(n, 0u);
  producer.join();
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));
  ASSERT_EQ(::kill(d_->pid(), SIGCONT), 0);
  ASSERT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK) << engram_last_error();
  engram_table_info i = info();
  EXPECT_EQ(i.samples, 0u) << "the timed-out sample was applied after its caller gave up";
  EXPECT_EQ(i.size, 1u) << "the item was lost";
  ASSERT_EQ(sample(2000, &x, &n), ENGRAM_OK) << engram_last_error();
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(x, 42.0f);
  engram_writer_close(w);
}

// An insert that reaches the owner after its deadline is refused, not
// applied, and the writer hears that verdict: a flush while the daemon
// stands still times out with the item in flight, and the next flush
// reports the item's own timeout. On c15b268 the late insert was applied.
TEST_F(StalledDaemon, AnInsertPastItsDeadlineIsRefusedAndTheWriterHearsIt) {
  engram_writer* w = writer(200);
  stop_daemon();
  put(w, 7.0f);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(engram_writer_flush(w, 300), ENGRAM_E_TIMEOUT) << engram_last_error();
  double waited = seconds_since(t0);
  EXPECT_GE(waited, 0.3);
  EXPECT_LT(waited, 1.0) << "flush waited past its timeout";
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  ASSERT_EQ(::kill(d_->pid(), SIGCONT), 0);
  EXPECT_EQ(engram_writer_flush(w, 5000), ENGRAM_E_TIMEOUT) << "the item's verdict: " << engram_last_error();
  EXPECT_NE(std::string(engram_last_error()).find("after its deadline"), std::string::npos) << engram_last_error();
  uint64_t keys[4];
  size_t nk = 9;
  ASSERT_EQ(engram_writer_take_keys(w, keys, 4, &nk), ENGRAM_OK);
  EXPECT_EQ(nk, 0u) << "a key for an item that was refused";
  EXPECT_EQ(info().size, 0u) << "the late insert was applied";
  EXPECT_EQ(info().inserts, 0u);
  // The writer goes on: the next item is applied.
  put(w, 8.0f);
  EXPECT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK) << engram_last_error();
  EXPECT_EQ(info().size, 1u);
  engram_writer_close(w);
}

TEST(Engramctl, CommandsAgainstTheDaemon) {
  Daemon d(table_toml("replay", "max_size = 50\nsampler = \"prioritized\"\npriority_exponent = 0.6"));
  std::string out;
  const std::string ctl = ENGRAMCTL_PATH, s = "--socket";
  EXPECT_EQ(run({ctl, s, d.socket(), "status"}, &out, d.dir()), 0) << out;
  EXPECT_NE(out.find("tables       1"), std::string::npos) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("descriptors  [0-9]+ open of [0-9]+"))) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("\\n +[0-9]+ +[0-9]+ +0 +0 +0\\n"))) << "engramctl itself, a client: " << out;
  EXPECT_EQ(run({ctl, s, d.socket(), "status", "--json"}, &out, d.dir()), 0) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("\"descriptors\": \\{\"open\": [1-9][0-9]*, \"limit\": [1-9]"))) << out;
  EXPECT_NE(out.find("\"reserved_blocks\": 0}]}"), std::string::npos) << out;
  EXPECT_EQ(run({ctl, s, d.socket(), "info", "replay"}, &out, d.dir()), 0) << out;
  EXPECT_NE(out.find("prioritized (exponent 0.6)"), std::string::npos) << out;
  EXPECT_NE(out.find("uint8    [10, 30]"), std::string::npos) << out;
  EXPECT_EQ(run({ctl, s, d.socket(), "info", "replay", "--json"}, &out, d.dir()), 0) << out;
  EXPECT_EQ(out.rfind("{\"name\": \"replay\", \"max_size\": 50, \"size\": 0,", 0), 0u) << out;
  std::ofstream(d.dir() + "/q.toml") << "name = \"q\"\nmax_size = 5\nsampler = \"fifo\"\n[[column]]\nname = \"x\"\n"
                                        "dtype = \"float32\"\nshape = [3]\n";
  EXPECT_EQ(run({ctl, s, d.socket(), "create-table", d.dir() + "/q.toml"}, &out, d.dir()), 0) << out;
  EXPECT_EQ(run({ctl, s, d.socket(), "create-table", d.dir() + "/q.toml"}, &out, d.dir()), 1) << out;
  EXPECT_NE(out.find("exists"), std::string::npos) << out;
  EXPECT_EQ(run({ctl, s, d.socket(), "tables"}, &out, d.dir()), 0) << out;
  EXPECT_NE(out.find("q "), std::string::npos);
  EXPECT_NE(out.find("replay "), std::string::npos);
  ASSERT_EQ(wait_exit(spawn({ENGRAM_PROC_PATH, "writer", d.socket(), "replay", "0", "100", d.file("k")}, d.file("p")),
                      30000),
            0);
  // items: the 48 the writer made (3-step items at the odd steps of two
  // episodes of 50), each once, oldest first.
  auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(run({ctl, s, d.socket(), "items", "replay", "--json"}, &out, d.dir()), 0) << out;
  EXPECT_EQ(count(out, "\"key\": "), 48u) << out;
  EXPECT_EQ(count(out, "\"steps\": 3}"), 48u) << out;
  std::vector<unsigned long long> inserted;
  std::regex seq("\"inserted\": ([0-9]+)");
  for (auto m = std::sregex_iterator(out.begin(), out.end(), seq); m != std::sregex_iterator(); ++m)
    inserted.push_back(std::stoull((*m)[1]));
  ASSERT_EQ(inserted.size(), 48u);
  EXPECT_TRUE(std::is_sorted(inserted.begin(), inserted.end())) << "oldest first: " << out;
  EXPECT_EQ(run({ctl, s, d.socket(), "items", "replay", "--by", "priority", "--limit", "3"}, &out, d.dir()), 0) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("KEY +PRIORITY +TIMES_SAMPLED +INSERTED +STEPS\\n"))) << out;
  EXPECT_EQ(count(out, " 3\n"), 3u) << "three rows: " << out;
  EXPECT_NE(out.find("3 of 48 items shown (--limit)"), std::string::npos) << out;
  EXPECT_EQ(run({ctl, s, d.socket(), "items", "replay", "--by", "age"}, &out, d.dir()), 2);
  EXPECT_NE(out.find("--by takes insertion or priority, not 'age'"), std::string::npos) << out;
  EXPECT_EQ(run({ctl, s, d.socket(), "items", "replay", "--limit", "0"}, &out, d.dir()), 2);
  EXPECT_NE(out.find("--limit takes a count of items >= 1, not '0'"), std::string::npos) << out;
  EXPECT_EQ(run({ctl, s, d.socket(), "items", "nope"}, &out, d.dir()), 1);
  EXPECT_NE(out.find("no table named \"nope\""), std::string::npos) << out;
  // export, reset, import: the same 48 items back.
  std::string npz = d.dir() + "/replay.npz";
  EXPECT_EQ(run({ctl, s, d.socket(), "export", "replay", npz}, &out, d.dir()), 0) << out;
  EXPECT_NE(out.find("exported 48 items of table replay to " + npz), std::string::npos) << out;
  EXPECT_EQ(run({ctl, s, d.socket(), "export", "replay"}, &out, d.dir()), 2) << out;
  EXPECT_NE(out.find("export takes two arguments"), std::string::npos) << out;
  EXPECT_EQ(run({ctl, s, d.socket(), "reset", "replay"}, &out, d.dir()), 0) << out;
  EXPECT_EQ(run({ctl, s, d.socket(), "info", "replay", "--json"}, &out, d.dir()), 0) << out;
  EXPECT_NE(out.find("\"size\": 0,"), std::string::npos) << out;
  EXPECT_EQ(run({ctl, s, d.socket(), "import", d.dir() + "/q.toml", "replay"}, &out, d.dir()), 1) << out;
  EXPECT_NE(out.find("q.toml is not a .npz file"), std::string::npos) << out;
  EXPECT_EQ(run({ctl, s, d.socket(), "import", npz, "q"}, &out, d.dir()), 1) << out;
  EXPECT_NE(out.find("has no steps of column x, which table q has (the file's columns: "), std::string::npos) << out;
  EXPECT_EQ(run({ctl, s, d.socket(), "import", npz, "replay", "--timeout-ms", "soon"}, &out, d.dir()), 2) << out;
  EXPECT_EQ(run({ctl, s, d.socket(), "import", npz, "replay", "--timeout-ms", "5000"}, &out, d.dir()), 0) << out;
  EXPECT_NE(out.find("imported 48 items from " + npz + " into table replay"), std::string::npos) << out;
  EXPECT_EQ(run({ctl, s, d.socket(), "info", "replay", "--json"}, &out, d.dir()), 0) << out;
  EXPECT_NE(out.find("\"size\": 48,"), std::string::npos) << out;
  EXPECT_EQ(run({ctl, s, d.socket(), "reset", "replay"}, &out, d.dir()), 0) << out;
  EXPECT_EQ(run({ctl, s, d.socket(), "info", "nope"}, &out, d.dir()), 1);
  EXPECT_NE(out.find("no table named \"nope\""), std::string::npos) << out;
  // JSON has no infinity: an unbounded limiter's differences, which the C
  // API allows, print as strings (they printed as bare inf, which no JSON
  // parser takes).
  engram_client* c = connect_c(d.socket());
  engram_table_options o = scalar_table("unbounded");
  o.rate_limiter.min_diff = -INFINITY;
  o.rate_limiter.max_diff = INFINITY;
  ASSERT_EQ(engram_table_create(c, &o), ENGRAM_OK) << engram_last_error();
  engram_disconnect(c);
  EXPECT_EQ(run({ctl, s, d.socket(), "info", "unbounded", "--json"}, &out, d.dir()), 0) << out;
  EXPECT_NE(out.find("\"min_diff\": \"-inf\", \"max_diff\": \"inf\""), std::string::npos) << out;
  EXPECT_EQ(out.find(": inf"), std::string::npos) << out;
  EXPECT_EQ(run({ctl, s, d.socket(), "frobnicate"}, &out, d.dir()), 2);
  EXPECT_EQ(run({ctl, s, d.dir() + "/none.sock", "status"}, &out, d.dir()), 1);
  EXPECT_NE(out.find("no engram server listens on " + d.dir() + "/none.sock"), std::string::npos) << out;
}

// A table's options are checked in one place (Table::check), so a bad one
// gets the same words through each way a table is made: engramd.toml,
// engramctl create-table and the C API. (Each kept bounds of its own
// before, each with its own message; 2^32 and more were refused by the C
// API's narrowing check and by the config's range alone.)
TEST(Engramctl, ABadTableIsRefusedInTheSameWordsWhereverItComesFrom) {
  Daemon d(table_toml("replay", "max_size = 50"));
  const std::string ctl = ENGRAMCTL_PATH, s = "--socket";
  engram_client* c = connect_c(d.socket());
  ASSERT_NE(c, nullptr);
  struct Case {
    std::string toml;
    std::function<void(engram_table_options*)> in_c;
    std::string words;
    int code;  // the C API's
  };
  // A limiter that cannot do what it promises on its table (issue 64.3):
  // a queue larger than max_size evicted instead of holding writers, and
  // a min_size above it held every sample for ever; both were accepted.
  const Case cases[] = {
      {"max_size = 2147483648", [](engram_table_options* o) { o->max_size = 1ull << 31; },
       "capacity (max_size) 2147483648 is more than 2^30", ENGRAM_E_RANGE},
      {"max_size = 8589934592", [](engram_table_options* o) { o->max_size = 1ull << 33; },
       "capacity (max_size) 8589934592 is more than 2^30", ENGRAM_E_RANGE},
      {"max_size = 0", [](engram_table_options* o) { o->max_size = 0; }, "capacity (max_size) must be at least 1",
       ENGRAM_E_RANGE},
      // -5 said "allowed 0 or more", and 0 was then refused (issue 64.5).
      {"max_size = -5", [](engram_table_options* o) { o->max_size = 0; }, "capacity (max_size) must be at least 1",
       ENGRAM_E_RANGE},
      {"max_size = 5\nmax_chunks_per_item = 9", [](engram_table_options* o) { o->max_chunks_per_item = 9; },
       "max_chunks_per_item 9 is not in 1..8", ENGRAM_E_INVALID},
      {"max_size = 5\nrate_limiter = { kind = \"queue\", size = 100 }",
       [](engram_table_options* o) { ASSERT_EQ(engram_rate_limiter_queue(&o->rate_limiter, 100), ENGRAM_OK); },
       "rate_limiter: a queue of size 100 on a table of max_size 5 would evict items nobody sampled instead of "
       "holding the writers",
       ENGRAM_E_INVALID},
      {"max_size = 5\nrate_limiter = { kind = \"min_size\", min_size = 6 }",
       [](engram_table_options* o) { ASSERT_EQ(engram_rate_limiter_min_size(&o->rate_limiter, 6), ENGRAM_OK); },
       "rate_limiter min_size 6 is more than max_size 5: the table can never hold that many items", ENGRAM_E_INVALID},
  };
  std::string out;
  for (const Case& k : cases) {
    SCOPED_TRACE(k.toml);
    std::ofstream(d.file("bad.toml")) << table_toml("t", k.toml);
    EXPECT_EQ(run({ENGRAMD_PATH, "--check-config", "--config", d.file("bad.toml")}, &out, d.dir()), 1);
    EXPECT_NE(out.find("table[0]: table 't': " + k.words), std::string::npos) << out;
    std::ofstream(d.file("snippet.toml")) << "name = \"t\"\n" << k.toml << "\n[[column]]\nname = \"x\"\ndtype = \"float32\"\n";
    EXPECT_EQ(run({ctl, s, d.socket(), "create-table", d.file("snippet.toml")}, &out, d.dir()), 1);
    EXPECT_NE(out.find("table 't': " + k.words), std::string::npos) << out;
    engram_table_options o = scalar_table("t");
    o.max_size = 5;
    k.in_c(&o);
    EXPECT_EQ(engram_table_create(c, &o), k.code);
    EXPECT_NE(std::string(engram_last_error()).find("table 't': " + k.words), std::string::npos) << engram_last_error();
  }
  engram_disconnect(c);
}

// A name or a column count past the wire form's room is refused by
// engramctl create-table as by the config, never cut to fit (issue 58.5:
// a 70-byte name made a table of its first 63 bytes, 40 columns one of 32,
// and both exited 0).
TEST(Engramctl, CreateTableRefusesWhatTheWireFormWouldCut) {
  Daemon d(table_toml("replay", "max_size = 50"));
  const std::string ctl = ENGRAMCTL_PATH, s = "--socket";
  // n float32 columns, as [[column]] (a snippet) or [[table.column]] (a config) entries.
  auto columns = [](const std::string& key, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += "[[" + key + "]]\nname = \"c" + std::to_string(i) + "\"\ndtype = \"float32\"\n";
    return out;
  };
  struct Case {
    std::string name;
    int columns;
    std::string words;
  };
  const Case cases[] = {
      {std::string(70, 'n'), 1, "is 70 bytes long"},
      {"wide", 40, "40 columns"},
  };
  std::string out;
  for (const Case& k : cases) {
    SCOPED_TRACE(k.words);
    std::ofstream(d.file("snippet.toml")) << "name = \"" << k.name << "\"\nmax_size = 5\n" << columns("column", k.columns);
    EXPECT_EQ(run({ctl, s, d.socket(), "create-table", d.file("snippet.toml")}, &out, d.dir()), 1) << out;
    EXPECT_NE(out.find(k.words), std::string::npos) << out;
    std::ofstream(d.file("bad.toml")) << "[[table]]\nname = \"" << k.name << "\"\nmax_size = 5\n"
                                      << columns("table.column", k.columns);
    std::string config_out;
    EXPECT_EQ(run({ENGRAMD_PATH, "--check-config", "--config", d.file("bad.toml")}, &config_out, d.dir()), 1);
    EXPECT_NE(config_out.find(k.words), std::string::npos) << config_out;
  }
  EXPECT_EQ(run({ctl, s, d.socket(), "tables"}, &out, d.dir()), 0) << out;
  EXPECT_EQ(out.find("wide"), std::string::npos) << out;
  EXPECT_EQ(out.find(std::string(63, 'n')), std::string::npos) << out;
}

// A table whose one step fits no arena block is refused where it is made,
// naming the largest block; one whose one-step chunks would need more
// blocks than their class has is warned about when made; a writer that
// waits for blocks is said in the log once and shown by engramctl status;
// and a wait that nothing but a client's delete could end (no table full,
// none that expires what it samples) is an error after a moment, not a
// wait for the writer's whole timeout, or for ever without one. Before,
// --check-config passed the first, and the writer of the last waited for
// ever without a word (with this test's 20 s timeout: ENGRAM_E_TIMEOUT
// after 20 s).
Status write_one_step_items(engram_client* c, engram_table* t, const engram_column& col, size_t step_bytes, int n,
                            int timeout_ms, int* written) {
  engram_writer_options wo;
  engram_writer_options_init(&wo);
  wo.columns = &col;
  wo.num_columns = 1;
  wo.insert_timeout_ms = timeout_ms;
  engram_writer* w = nullptr;
  if (int rc = engram_writer_open(c, &wo, &w); rc != ENGRAM_OK) return {Errc::invalid_argument, engram_last_error()};
  std::vector<uint8_t> x(step_bytes);
  int rc = ENGRAM_OK;
  for (*written = 0; *written < n; ++*written) {
    x[0] = static_cast<uint8_t>(*written);
    const void* step[1] = {x.data()};
    rc = engram_writer_append(w, step);
    if (rc == ENGRAM_OK) rc = engram_writer_create_item(w, t, 1, 1.0);
    if (rc != ENGRAM_OK) break;
  }
  std::string why = rc == ENGRAM_OK ? "" : engram_last_error();
  if (rc == ENGRAM_OK) rc = engram_writer_flush(w, timeout_ms);
  engram_writer_close(w);
  return rc == ENGRAM_OK ? Status::Ok() : Status{rc == ENGRAM_E_NOMEM ? Errc::out_of_memory : Errc::timeout, why};
}

// Writes n one-step items of 400 B into `table` (a uint8 [400] column)
// and expects all of them in it.
void expect_holds_one_step_items(engram_client* c, const char* table, int n) {
  engram_table* t = nullptr;
  ASSERT_EQ(engram_table_open(c, table, &t), ENGRAM_OK) << engram_last_error();
  engram_column col = {"x", ENGRAM_UINT8, 1, {400}};
  int written = 0;
  Status s = write_one_step_items(c, t, col, 400, n, 30000, &written);
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(written, n);
  engram_table_info info;
  engram_table_info_init(&info);
  ASSERT_EQ(engram_table_info_get(c, table, &info), ENGRAM_OK) << engram_last_error();
  EXPECT_EQ(info.size, static_cast<uint64_t>(n));
  engram_table_close(t);
}

TEST(Engramd, ATableItsArenaCannotHoldIsRefusedOrSaid) {
  std::string dir = make_temp_dir(), out;
  const std::string arena = "[arena]\nclasses = [ { block_size = \"4KiB\", count = 16 } ]\n";
  std::ofstream(dir + "/big.toml") << arena << "[[table]]\nname = \"big\"\nmax_size = 10\n"
                                   << "[[table.column]]\nname = \"x\"\ndtype = \"uint8\"\nshape = [8192]\n";
  EXPECT_EQ(run({ENGRAMD_PATH, "--check-config", "--config", dir + "/big.toml"}, &out, dir), 1) << out;
  EXPECT_NE(out.find("more than the arena's largest block (4096 bytes)"), std::string::npos) << out;

  Daemon d(arena + "[[table]]\nname = \"t\"\nmax_size = 100\n[[table.column]]\nname = \"x\"\ndtype = \"float32\"\n");
  EXPECT_NE(read_file(d.log()).find("max_size 100 items of one-step chunks"), std::string::npos) << read_file(d.log());
  engram_client* c = connect_c(d.socket());
  ASSERT_NE(c, nullptr);
  engram_table* t = nullptr;
  ASSERT_EQ(engram_table_open(c, "t", &t), ENGRAM_OK) << engram_last_error();
  engram_column col = {"x", ENGRAM_FLOAT32, 0, {}};
  Status written = Status::Ok();
  int n = 0;
  const int64_t t0 = monotonic_ns();
  std::thread writer([&] { written = write_one_step_items(c, t, col, 4, 40, 20000, &n); });
  bool seen = false;
  for (int i = 0; i < 100 && !seen; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(run({ENGRAMCTL_PATH, "--socket", d.socket(), "status"}, &out, d.dir()), 0);
    seen = out.find("waiting      1 client waits for arena blocks of 4096 bytes") != std::string::npos;
  }
  EXPECT_TRUE(seen) << out;
  writer.join();
  EXPECT_EQ(n, 16) << "the arena holds 16 one-step items";
  EXPECT_EQ(written.code(), Errc::out_of_memory) << written.to_string();
  EXPECT_NE(written.message().find("blocks of 4096 bytes all hold chunks of items, and no table will let one go"),
            std::string::npos)
      << written.message();
  EXPECT_NE(written.message().find("t (16 of 100)"), std::string::npos) << written.message();
  EXPECT_LT(monotonic_ns() - t0, 10'000'000'000) << "told after a moment, not at the 20 s timeout";
  std::string log = read_file(d.log());
  EXPECT_NE(log.find("writers wait for arena blocks of 4096 bytes: all 16 of that class"), std::string::npos) << log;
  EXPECT_LE(count_lines(log, "writers wait for arena blocks"), 2u) << "once, then a count";
  EXPECT_NE(log.find("no table will let one go"), std::string::npos) << log;
  engram_table_close(t);
  engram_disconnect(c);
}

// A wait for blocks that a sample could end (a table that expires what it
// samples) is a wait, until the writer's timeout: the hopeless wait above
// is told only when nothing but a delete could end it.
TEST(Engramd, AWaitForBlocksASampleCouldEndLastsItsTimeout) {
  Daemon d("[arena]\nclasses = [ { block_size = \"4KiB\", count = 16 } ]\n[[table]]\nname = \"t\"\n"
           "max_size = 100\nmax_times_sampled = 1\n[[table.column]]\nname = \"x\"\ndtype = \"float32\"\n");
  engram_client* c = connect_c(d.socket());
  ASSERT_NE(c, nullptr);
  engram_table* t = nullptr;
  ASSERT_EQ(engram_table_open(c, "t", &t), ENGRAM_OK) << engram_last_error();
  engram_column col = {"x", ENGRAM_FLOAT32, 0, {}};
  int n = 0;
  const int64_t t0 = monotonic_ns();
  Status written = write_one_step_items(c, t, col, 4, 40, 4000, &n);
  EXPECT_EQ(n, 16);
  EXPECT_EQ(written.code(), Errc::timeout) << written.to_string();
  EXPECT_GE(monotonic_ns() - t0, 3'900'000'000);
  engram_table_close(t);
  engram_disconnect(c);
}

// A server's defaults hold a table of the writers' defaults: one-step
// chunks of 400 B take 512 B blocks, and a configured table without
// [arena] gets blocks for its max_size. Before, the default arena's
// smallest blocks were 4 KiB, 4,096 of them, and the writer here stopped
// at exactly 4,096 items (ENGRAM_E_TIMEOUT).
TEST(Engramd, TheDefaultArenaHoldsItsTablesInOneStepChunks) {
  Daemon d("[[table]]\nname = \"t\"\nmax_size = 200000\n[[table.column]]\nname = \"x\"\ndtype = \"uint8\"\n"
           "shape = [400]\n");
  engram_client* c = connect_c(d.socket());
  ASSERT_NE(c, nullptr);
  expect_holds_one_step_items(c, "t", 200000);
  engram_disconnect(c);
}

// A table made at run time on a server without config is held too: the
// default arena grows on demand (here its 512 B class, from 65,536 blocks,
// to hold 200,000 one-step items of 400 B), says so in the log and in
// status. Before, the writer waited at about 65,500 items and ended with
// ENGRAM_E_NOMEM (the hopeless wait).
TEST(Engramd, TheDefaultArenaGrowsForATableMadeAtRunTime) {
  Daemon d("");
  engram_client* c = connect_c(d.socket());
  ASSERT_NE(c, nullptr);
  engram_column col = {"x", ENGRAM_UINT8, 1, {400}};
  engram_table_options o;
  engram_table_options_init(&o);
  o.name = "t";
  o.max_size = 200000;
  o.columns = &col;
  o.num_columns = 1;
  ASSERT_EQ(engram_table_create(c, &o), ENGRAM_OK) << engram_last_error();
  EXPECT_EQ(read_file(d.log()).find("long before the table is full"), std::string::npos)
      << "no warning: the class can grow to hold the table";
  expect_holds_one_step_items(c, "t", 200000);
  EXPECT_NE(read_file(d.log()).find("arena: the class of 512B blocks grew to"), std::string::npos) << read_file(d.log());
  std::string out;
  EXPECT_EQ(run({ENGRAMCTL_PATH, "--socket", d.socket(), "status"}, &out, d.dir()), 0) << out;
  EXPECT_NE(out.find("grows on demand to"), std::string::npos) << out;
  engram_disconnect(c);
}

// Growth stops at [arena] grow_to: a writer whose class cannot grow any
// more, and whose table will not let an item go, ends with ENGRAM_E_NOMEM
// naming the bound, as a fixed arena's does. The class grows once, from
// 1,024 blocks of 512 B (512 KiB) to the 4,096 that 2 MiB holds.
TEST(Engramd, TheArenaGrowsToItsBoundAndNoFurther) {
  std::string dir = make_temp_dir(), out;
  std::ofstream(dir + "/small.toml") << "[arena]\nclasses = [ { block_size = 512, count = 1024 } ]\n"
                                     << "grow_to = \"256KiB\"\n";
  EXPECT_EQ(run({ENGRAMD_PATH, "--check-config", "--config", dir + "/small.toml"}, &out, dir), 1) << out;
  EXPECT_NE(out.find("arena.grow_to"), std::string::npos) << out;
  Daemon d("[arena]\nclasses = [ { block_size = 512, count = 1024 } ]\ngrow_to = \"2MiB\"\n"
           "[[table]]\nname = \"t\"\nmax_size = 100000\n[[table.column]]\nname = \"x\"\ndtype = \"uint8\"\n"
           "shape = [400]\n");
  EXPECT_NE(read_file(d.log()).find("and may grow to 4096"), std::string::npos) << read_file(d.log());
  engram_client* c = connect_c(d.socket());
  ASSERT_NE(c, nullptr);
  engram_table* t = nullptr;
  ASSERT_EQ(engram_table_open(c, "t", &t), ENGRAM_OK) << engram_last_error();
  engram_column col = {"x", ENGRAM_UINT8, 1, {400}};
  int n = 0;
  Status written = write_one_step_items(c, t, col, 400, 100000, -1, &n);
  EXPECT_EQ(written.code(), Errc::out_of_memory) << written.to_string();
  EXPECT_NE(written.message().find("grow_to"), std::string::npos) << written.message();
  EXPECT_GT(n, 3000) << "the class grew past its 1,024 blocks";
  EXPECT_LE(n, 4096);
  EXPECT_EQ(run({ENGRAMCTL_PATH, "--socket", d.socket(), "status", "--json"}, &out, d.dir()), 0) << out;
  EXPECT_NE(out.find("\"arena_bytes\": 2097152, \"arena_grow_to\": 2097152"), std::string::npos) << out;
  engram_table_close(t);
  engram_disconnect(c);
}

// A client that reads the arena's hole (a scan of every block, as a
// careless tool might; a test did, and reached 24 GiB) allocates its
// pages, which would stay with the segment until the server stops. The
// server gives them back within about a second (ChunkArena::trim_holes),
// and keeps the committed blocks. Seen through mincore(2), which reports
// the memfd's pages whoever faulted them in; without the trim every page
// stays resident and the wait below runs out.
TEST(Engramd, PagesAClientTouchesInTheArenasHoleAreGivenBack) {
  Daemon d("[arena]\nclasses = [ { block_size = 512, count = 1024 } ]\ngrow_to = \"64MiB\"\n");
  Control ctl(d.socket());
  ASSERT_TRUE(ctl.ok());
  ShmSegment seg = ctl.map_arena();
  auto arena = ArenaBlocks::attach(seg.data(), seg.size(), ctl.arena_config());
  ASSERT_TRUE(arena.ok()) << arena.status().message();
  const SizeClass& sc = arena->size_class(0);
  char* base = static_cast<char*>(seg.data());
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t start = sc.data_offset + 1024 * 512, end = sc.data_offset + uint64_t{sc.count} * sc.block_size;
  ASSERT_GT(end - start, size_t{60} << 20) << "the class laid out to take all of grow_to";
  auto resident = [&](size_t from, size_t to) {
    std::vector<unsigned char> v((to - from + page - 1) / page);
    EXPECT_EQ(::mincore(base + from, to - from, v.data()), 0) << std::strerror(errno);
    size_t n = 0;
    for (unsigned char c : v) n += c & 1;
    return n;
  };
  for (size_t off = start; off < end; off += page) (void)*reinterpret_cast<volatile char*>(base + off);
  const size_t touched = resident(start, end);
  EXPECT_GT(touched, 0u) << "reading the hole allocates it (else there is nothing to give back)";
  size_t left = touched;
  for (int i = 0; i < 50 && left > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    left = resident(start, end);
  }
  EXPECT_EQ(left, 0u) << touched << " pages of the hole were allocated by the reads";
  EXPECT_EQ(resident(sc.data_offset, start), 1024 * 512 / page) << "the committed blocks stay";
}

// A table a checkpoint brought back keeps the checkpoint's settings over a
// changed [[table]] entry; that is said as a warning naming the keys (it
// was an info line that named none), and a matching entry only at info.
TEST(Engramd, ARestoredTableThatKeepsItsOwnSettingsSaysWhich) {
  auto config = [](const std::string& ck, const std::string& table) {
    return "[checkpoint]\ndir = \"" + ck + "\"\non_shutdown = true\n[[table]]\nname = \"t\"\n" + table;
  };
  const std::string ck = make_temp_dir() + "/ck";
  const std::string same = "max_size = 100\n[[table.column]]\nname = \"x\"\ndtype = \"float32\"\n";
  Daemon d(config(ck, same));
  ASSERT_EQ(d.terminate(), 0) << read_file(d.log());
  d.start();
  std::string log = read_file(d.log());
  EXPECT_NE(log.find("table t: restored from the checkpoint, as its [[table]] entry in the config says"),
            std::string::npos)
      << log;
  ASSERT_EQ(d.terminate(), 0) << read_file(d.log());
  std::ofstream(d.file("engramd.toml"))
      << "socket = \"" << d.socket() << "\"\n"
      << config(ck, "max_size = 200\nrate_limiter = { kind = \"min_size\", min_size = 3 }\n"
                    "[[table.column]]\nname = \"x\"\ndtype = \"float32\"\nshape = [4]\n");
  d.start();
  log = read_file(d.log());
  EXPECT_NE(log.find("warn"), std::string::npos) << log;
  EXPECT_NE(log.find("table t: restored from the checkpoint, which keeps its own max_size, column, rate_limiter: the "
                     "[[table]] entry in the config differs and is not applied"),
            std::string::npos)
      << log;
  std::string out;
  EXPECT_EQ(run({ENGRAMCTL_PATH, "--socket", d.socket(), "info", "t"}, &out, d.dir()), 0) << out;
  EXPECT_NE(out.find("100"), std::string::npos) << "the checkpoint's max_size: " << out;
}

}  // namespace
}  // namespace engram::test
