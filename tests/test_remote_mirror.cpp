// Mirrored tables (remote/mirror_link, remote/follow): a table of one
// engramd that keeps the newest item of a table of another, as an actor
// machine keeps the learner's parameters. Two engramds on loopback.
#include <gtest/gtest.h>

#include "remote/peer_probe.hpp"

namespace engram::test {
namespace {

constexpr const char* kNewest = "max_size = 1\n";

// Waits until the mirror's newest item is `want`.
bool wait_for_newest(const std::string& socket, const char* table, int64_t want, int ms) {
  for (int waited = 0; waited < ms; waited += 2) {
    if (newest_meta(socket, table) == want) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

TEST(RemoteMirror, EachVersionArrivesOnceAndFollowingCountsForNothing) {
  const std::string port = std::to_string(free_port());  // the same after a restart
  Daemon learner("[remote]\nlisten = \"127.0.0.1:" + port + "\"\n" + table_toml("params", kNewest));
  std::string address = remote_address(learner);
  ASSERT_FALSE(address.empty()) << read_file(learner.log());
  Daemon actors(table_toml("params", std::string(kNewest) + "mirror = \"" + address + "\"\n"));

  // Readers on the actors' machine, as its actors would be: however many,
  // each version crosses once.
  std::atomic<bool> stop{false};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r)
    readers.emplace_back([&] {
      while (!stop) (void)newest_meta(actors.socket(), "params");
    });
  for (int v = 1; v <= 20; ++v) {
    write_items(learner.socket(), "params", v, 1);
    ASSERT_TRUE(wait_for_newest(actors.socket(), "params", v, 10000))
        << "version " << v << "\n" << engramctl(actors, {"status"}).second << read_file(actors.log());
  }
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(samples(learner.socket(), "params"), 0u) << "following is a look, not a sample";
  std::string json = engramctl(actors, {"status", "--json"}).second;
  EXPECT_NE(json.find("\"items\": 20,"), std::string::npos) << "each version once:\n" << json;
  auto [rc, status] = engramctl(actors, {"status"});
  EXPECT_NE(status.find("mirror       params <- " + address + " params: following"), std::string::npos) << status;

  // The learner restarts (empty, without a checkpoint): the mirror follows
  // its new numbering, and keeps the last version it had meanwhile.
  // A clean stop, though a follower's stream is open: it is ended, not
  // waited for (a Follow never ends by itself).
  EXPECT_EQ(learner.terminate(), 0) << read_file(learner.log());
  EXPECT_EQ(newest_meta(actors.socket(), "params"), 20);
  Daemon again("[remote]\nlisten = \"127.0.0.1:" + port + "\"\n" + table_toml("params", kNewest));
  ASSERT_FALSE(remote_address(again).empty()) << read_file(again.log());
  write_items(again.socket(), "params", 21, 1);
  EXPECT_TRUE(wait_for_newest(actors.socket(), "params", 21, 20000))
      << engramctl(actors, {"status"}).second << read_file(actors.log());
  std::string log = read_file(actors.log());
  EXPECT_NE(log.find("remote: mirror params of " + address + " table params"), std::string::npos) << log;
  EXPECT_NE(log.find("is back"), std::string::npos) << log;
}

// A follower is refused by name: other columns, a table too large to look
// into; and a mirror's own table must keep the newest few, oldest first.
TEST(RemoteMirror, WhatCannotBeFollowedIsRefusedByName) {
  Daemon learner("[remote]\nlisten = \"127.0.0.1:0\"\n" + table_toml("params", kNewest) +
                 table_toml("replay", "max_size = 5000\n") +
                 "[[table]]\nname = \"other\"\nmax_size = 1\n[[table.column]]\nname = \"x\"\ndtype = \"float32\"\n");
  std::string address = remote_address(learner);
  ASSERT_FALSE(address.empty()) << read_file(learner.log());
  Daemon actors(table_toml("p1", std::string(kNewest) + "mirror = \"" + address + "\"\nmirror_table = \"other\"\n") +
                table_toml("p2", std::string(kNewest) + "mirror = \"" + address + "\"\nmirror_table = \"replay\"\n"));
  std::string status;
  for (int waited = 0; waited < 10000; waited += 50) {
    status = engramctl(actors, {"status"}).second;
    if (status.find("other columns") != std::string::npos && status.find("4096") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(status.find("other columns than the follower's table"), std::string::npos) << status;
  EXPECT_NE(status.find("only tables of up to 4096 can be looked into"), std::string::npos) << status;

  struct Case {
    std::string body, expect;
  } cases[] = {
      {table_toml("p", "max_size = 100\nmirror = \"127.0.0.1:7\"\n"), "max_size = 1..64"},
      {table_toml("p", "max_size = 1\nremover = \"lifo\"\nmirror = \"127.0.0.1:7\"\n"), "remover = \"fifo\""},
      {table_toml("p", "max_size = 1\nmirror_table = \"q\"\n"), "table[0].mirror_table: needs mirror = \"HOST:PORT\""},
      {table_toml("p", "max_size = 1\nmirror = \"10.1.2.3:7\"\n"), "the link needs TLS"},
      {table_toml("p", std::string(kNewest) + "sampler = \"fifo\"\nmax_times_sampled = 1\nmirror = \"127.0.0.1:7\"\n"
                                              "upstream = \"127.0.0.1:8\"\n"),
       "not both"},
  };
  for (const Case& c : cases) expect_refused_config(c.body, c.expect);
}

}  // namespace
}  // namespace engram::test
