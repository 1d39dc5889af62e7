// Upstream tables (remote/upstream_link): a table of one engramd whose
// items go, oldest first and each once, into a table of another, across a
// restart of the receiver. Two engramds on loopback, plain C API writers.
#include <gtest/gtest.h>

#include "remote/peer_probe.hpp"

namespace engram::test {
namespace {

constexpr const char* kQueue =
    "max_size = 100000\nsampler = \"fifo\"\nmax_times_sampled = 1\nrate_limiter = { kind = \"queue\", size = 100000 }\n";

TEST(RemoteUpstream, ItemsGoOnceAndInOrderAndAgainAfterTheReceiverRestarts) {
  const std::string port = std::to_string(free_port());  // the same after a restart
  Daemon receiver("[remote]\nlisten = \"127.0.0.1:" + port + "\"\n" + table_toml("replay", kQueue));
  std::string address = remote_address(receiver);
  ASSERT_FALSE(address.empty()) << read_file(receiver.log());
  Daemon sender("[remote]\nname = \"actor-host\"\n" +
                table_toml("outbox", std::string(kQueue) + "upstream = \"" + address + "\"\nupstream_table = \"replay\"\n"));
  write_items(sender.socket(), "outbox", 0, 3000);
  ASSERT_TRUE(wait_for_inserts(receiver.socket(), "replay", 3000, 20000))
      << inserts(receiver.socket(), "replay") << " arrived\n"
      << engramctl(sender, {"status"}).second << read_file(sender.log());
  std::vector<int64_t> want(3000);
  for (int i = 0; i < 3000; ++i) want[i] = i;
  EXPECT_EQ(drain_items(receiver.socket(), "replay"), want);
  EXPECT_EQ(inserts(receiver.socket(), "replay"), 3000u) << "each once";
  auto [rc, status] = engramctl(sender, {"status"});
  EXPECT_NE(status.find("upstream     outbox -> " + address + " replay: delivering"), std::string::npos) << status;

  // The receiver goes away (and comes back empty: no checkpoint here); the
  // sender keeps what it takes until it is answered, and carries on.
  // A clean stop, though the sender's stream is open and waits for more.
  EXPECT_EQ(receiver.terminate(), 0) << read_file(receiver.log());
  write_items(sender.socket(), "outbox", 3000, 500);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  receiver.start();
  ASSERT_EQ(remote_address(receiver), address) << "the same port again";
  ASSERT_TRUE(wait_for_inserts(receiver.socket(), "replay", 500, 20000))
      << engramctl(sender, {"status"}).second << read_file(sender.log());
  std::vector<int64_t> got = drain_items(receiver.socket(), "replay");
  ASSERT_EQ(got.size(), 500u);
  for (int i = 0; i < 500; ++i) EXPECT_EQ(got[i], 3000 + i);
  std::string log = read_file(sender.log());
  EXPECT_NE(log.find("remote: upstream outbox to " + address), std::string::npos) << log;
  EXPECT_NE(log.find("table replay is back"), std::string::npos) << log;
  // Chunks whose items span two requests stay held between them: the
  // receiver never refused a stream for a chunk sent twice.
  EXPECT_EQ(log.find("already held"), std::string::npos) << log;
}

// Items of one-step chunks (the writer's default) bring a chunk each: a
// take of thousands names more new chunks than the peer holds for a
// stream (kMaxHeldChunks), and goes over several requests on one stream.
// Before, the peer refused each such request and the link reconnected,
// backing off, for every request: 4.8k items/s against 752k at 4 steps a
// chunk (bench/remote.sh).
TEST(RemoteUpstream, ABatchOfMoreNewChunksThanThePeerHoldsGoesOverSeveralRequests) {
  Daemon receiver("[remote]\nlisten = \"127.0.0.1:0\"\n" + table_toml("replay", kQueue));
  std::string address = remote_address(receiver);
  ASSERT_FALSE(address.empty()) << read_file(receiver.log());
  Daemon sender("[remote]\nname = \"actor-host\"\n" +
                table_toml("outbox", std::string(kQueue) + "upstream = \"" + address + "\"\nupstream_table = \"replay\"\n"));
  write_items(sender.socket(), "outbox", 0, 3000, /*chunk_length=*/1);  // 3000 blocks: the receiver's arena holds 4096
  ASSERT_TRUE(wait_for_inserts(receiver.socket(), "replay", 3000, 30000))
      << inserts(receiver.socket(), "replay") << " arrived\n"
      << engramctl(sender, {"status"}).second << read_file(sender.log());
  std::vector<int64_t> want(3000);
  for (int i = 0; i < 3000; ++i) want[i] = i;
  EXPECT_EQ(drain_items(receiver.socket(), "replay"), want);
  std::string log = read_file(sender.log()) + read_file(receiver.log());
  EXPECT_EQ(log.find("forget some first"), std::string::npos) << log;
  EXPECT_EQ(log.find("retrying"), std::string::npos) << "one stream throughout: " << log;
}

// The sender starts again without a checkpoint, under the same name: its
// table numbers its items afresh, and they must not be taken for the
// items of its last run that the receiver already applied (they were all
// dropped as duplicates while the numbering started at 0 on every start).
TEST(RemoteUpstream, ASenderStartedAfreshIsNotTakenForItsPast) {
  Daemon receiver("[remote]\nlisten = \"127.0.0.1:0\"\n" + table_toml("replay", kQueue));
  std::string address = remote_address(receiver);
  ASSERT_FALSE(address.empty()) << read_file(receiver.log());
  Daemon sender("[remote]\nname = \"actor-host\"\n" +
                table_toml("outbox", std::string(kQueue) + "upstream = \"" + address + "\"\nupstream_table = \"replay\"\n"));
  write_items(sender.socket(), "outbox", 0, 1000);
  ASSERT_TRUE(wait_for_inserts(receiver.socket(), "replay", 1000, 20000)) << read_file(sender.log());
  EXPECT_EQ(sender.terminate(), 0);
  sender.start();
  write_items(sender.socket(), "outbox", 1000, 300);
  EXPECT_TRUE(wait_for_inserts(receiver.socket(), "replay", 1300, 20000))
      << inserts(receiver.socket(), "replay") << " arrived\n" << engramctl(sender, {"status"}).second;
  std::vector<int64_t> got = drain_items(receiver.socket(), "replay");
  ASSERT_EQ(got.size(), 1300u);
  for (int i = 0; i < 1300; ++i) EXPECT_EQ(got[i], i);
}

// Items of 1 MiB, 100 of them: requests stay near the link's 16 MiB of
// chunks, far below the peer's largest message (64 MiB), so they go.
TEST(RemoteUpstream, LargeItemsGoInRequestsThePeerTakes) {
  const std::string big = "[arena]\nclasses = [ { block_size = \"2MiB\", count = 160 } ]\n";
  const std::string table = "[[table]]\nmax_size = 1000\nsampler = \"fifo\"\nmax_times_sampled = 1\n"
                            "rate_limiter = { kind = \"queue\", size = 1000 }\n";
  const std::string column = "[[table.column]]\nname = \"data\"\ndtype = \"uint8\"\nshape = [1048576]\n";
  Daemon receiver(big + "[remote]\nlisten = \"127.0.0.1:0\"\n" + table + "name = \"replay\"\n" + column);
  std::string address = remote_address(receiver);
  ASSERT_FALSE(address.empty()) << read_file(receiver.log());
  Daemon sender(big + table + "name = \"outbox\"\nupstream = \"" + address + "\"\nupstream_table = \"replay\"\n" +
                column);
  engram_client* c = connect_c(sender.socket());
  ASSERT_NE(c, nullptr);
  engram_table* t = nullptr;
  ASSERT_EQ(engram_table_open(c, "outbox", &t), ENGRAM_OK) << engram_last_error();
  engram_column col = {"data", ENGRAM_UINT8, 1, {1048576}};
  engram_writer_options wo;
  engram_writer_options_init(&wo);
  wo.columns = &col;
  wo.num_columns = 1;
  engram_writer* w = nullptr;
  ASSERT_EQ(engram_writer_open(c, &wo, &w), ENGRAM_OK) << engram_last_error();
  std::vector<uint8_t> data(1048576);
  for (int i = 0; i < 100; ++i) {
    data[0] = static_cast<uint8_t>(i);
    const void* step[1] = {data.data()};
    ASSERT_EQ(engram_writer_append(w, step), ENGRAM_OK) << engram_last_error();
    ASSERT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_OK) << engram_last_error();
  }
  ASSERT_EQ(engram_writer_flush(w, 20000), ENGRAM_OK) << engram_last_error();
  engram_writer_close(w);
  engram_table_close(t);
  engram_disconnect(c);
  EXPECT_TRUE(wait_for_inserts(receiver.socket(), "replay", 100, 30000))
      << inserts(receiver.socket(), "replay") << " arrived\n"
      << engramctl(sender, {"status"}).second;
  EXPECT_EQ(engramctl(sender, {"status"}).second.find("larger than max"), std::string::npos);
}

TEST(RemoteUpstream, AnUpstreamTableMustBeAQueueAndItsPeerAnAddress) {
  struct Case {
    std::string body, expect;
  } cases[] = {
      {table_toml("outbox", "max_size = 10\nupstream = \"127.0.0.1:7000\"\n"),
       "items leave an upstream table as they are sent, oldest first"},
      {table_toml("outbox", std::string(kQueue) + "upstream = \"10.1.2.3:7000\"\n"),
       "is on another machine, so the link needs TLS"},
      {table_toml("outbox", std::string(kQueue) + "upstream = \"nowhere\"\n"), "is not HOST:PORT"},
      {table_toml("outbox", std::string(kQueue) + "upstream_table = \"x\"\n"), "needs upstream = \"HOST:PORT\""},
  };
  for (const Case& c : cases) {
    std::string dir = make_temp_dir();
    std::string config = dir + "/engramd.toml";
    std::ofstream(config) << "socket = \"" << dir << "/engram.sock\"\n" << c.body;
    std::string log = dir + "/check.log";
    EXPECT_NE(wait_exit(spawn({ENGRAMD_PATH, "--config", config, "--check-config"}, log), 10000), 0) << c.body;
    EXPECT_NE(read_file(log).find(c.expect), std::string::npos) << c.body << "\n" << read_file(log);
    if (std::system(("rm -rf " + dir).c_str()) != 0) {
    }
  }
}

}  // namespace
}  // namespace engram::test
