// Server::health, what engramd feeds systemd's watchdog from: it must say
// "answering" only while the control thread and every table's owner run.
// An owner is wedged here for real: a signal handler on its thread (found
// by its name) holds it until the test lets go.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <fstream>

#include "server/config.hpp"
#include "server/server.hpp"
#include "daemon_fixture.hpp"

namespace engram::test {
namespace {

std::atomic<bool> g_hold{false};
std::atomic<bool> g_held{false};

void hold_thread(int) {
  g_held.store(true);
  while (g_hold.load()) ::usleep(1000);
  g_held.store(false);
}

// The tid of this process's thread named `name`, or -1.
pid_t thread_named(const std::string& name) {
  DIR* d = ::opendir("/proc/self/task");
  if (!d) return -1;
  pid_t found = -1;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::string comm;
    std::getline(std::ifstream(std::string("/proc/self/task/") + e->d_name + "/comm"), comm);
    if (comm == name) found = static_cast<pid_t>(std::atoi(e->d_name));
  }
  ::closedir(d);
  return found;
}

ServerConfig config_in(const std::string& dir, const std::string& tables) {
  auto c = parse_config("socket = \"" + dir + "/engram.sock\"\n" + tables, "test");
  EXPECT_TRUE(c.ok()) << c.status().message();
  return *c;
}

TEST(ServerHealth, AnswersWithCountsAndNamesAWedgedOwner) {
  std::string dir = make_temp_dir();
  auto s = Server::start(config_in(dir, table_toml("replay", "max_size = 10") + table_toml("queue", "max_size = 10")));
  ASSERT_TRUE(s.ok()) << s.status().message();
  Server::Health h = (*s)->health(1000);
  EXPECT_TRUE(h.answering) << h.stuck;
  EXPECT_EQ(h.tables, 2u);
  EXPECT_EQ(h.clients, 0u);
  EXPECT_TRUE(h.last_checkpoint.empty());

  pid_t owner = thread_named("own:queue");
  ASSERT_GT(owner, 0) << "the owner thread of table queue is named own:queue";
  struct sigaction sa {};
  sa.sa_handler = hold_thread;
  ASSERT_EQ(::sigaction(SIGUSR1, &sa, nullptr), 0);
  g_hold.store(true);
  ASSERT_EQ(::syscall(SYS_tgkill, ::getpid(), owner, SIGUSR1), 0);
  for (int i = 0; i < 5000 && !g_held.load(); ++i) ::usleep(1000);
  ASSERT_TRUE(g_held.load());

  auto t0 = std::chrono::steady_clock::now();
  h = (*s)->health(400);
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_FALSE(h.answering);
  EXPECT_EQ(h.stuck, "the owner of table queue");
  EXPECT_LT(waited, 2.0) << "health() is bounded by its timeout";

  g_hold.store(false);
  for (int i = 0; i < 5000 && g_held.load(); ++i) ::usleep(1000);
  h = (*s)->health(1000);
  EXPECT_TRUE(h.answering) << h.stuck;
  (*s)->stop();
}

// The restore at start reports its progress chunk by chunk, and a
// checkpoint counts as the last one once restored.
TEST(ServerHealth, RestoreReportsProgressAndTheLastCheckpoint) {
  std::string dir = make_temp_dir();
  std::string ck = "[checkpoint]\ndir = \"" + dir + "/ck\"\non_shutdown = true\n";
  {
    Daemon d(table_toml("replay", "max_size = 100") + ck);
    ASSERT_EQ(wait_exit(spawn({ENGRAM_PROC_PATH, "writer", d.socket(), "replay", "0", "60", d.file("k")}, d.file("p")),
                        30000),
              0)
        << read_file(d.file("p"));
  }  // stopped: the shutdown checkpoint
  struct Call {
    std::string what;
    uint64_t done, total;
  };
  std::vector<Call> calls;
  ServerConfig c = config_in(dir, table_toml("replay", "max_size = 100") + ck);
  auto s = Server::start(c, [&](const char* what, uint64_t d, uint64_t n) { calls.push_back({what, d, n}); });
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_FALSE(calls.empty());
  uint64_t chunks = calls.back().total;
  ASSERT_GT(chunks, 0u);
  ASSERT_EQ(calls.size(), chunks) << "once per chunk";
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].what, "restoring");
    EXPECT_EQ(calls[i].done, i + 1);
  }
  Server::Health h = (*s)->health(1000);
  EXPECT_NE(h.last_checkpoint.find("/ck/ckpt-"), std::string::npos) << h.last_checkpoint;
  EXPECT_GE(h.last_checkpoint_age_s, 0);
  // The shutdown checkpoint reports too, from the thread that writes it.
  calls.clear();
  (*s)->stop();
  ASSERT_EQ(calls.size(), chunks);
  EXPECT_EQ(calls.back().what, "checkpointing");
  EXPECT_EQ(calls.back().done, chunks);
}

}  // namespace
}  // namespace engram::test
