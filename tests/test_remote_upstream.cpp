// Upstream tables (remote/upstream_link): a table of one engramd whose
// items go, oldest first and each once, into a table of another, across a
// restart of the receiver. Two engramds on loopback, plain C API writers.
#include <gtest/gtest.h>

#include <algorithm>

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

// Waits up to ms for `text` in the file at `path`.
bool wait_for_text(const std::string& path, const std::string& text, int ms) {
  for (int i = 0; i < ms / 20; ++i) {
    if (read_file(path).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return read_file(path).find(text) != std::string::npos;
}

std::string upstream_to(const std::string& address, const std::string& remote) {
  return "[remote]\n" + remote +
         table_toml("outbox", std::string(kQueue) + "upstream = \"" + address + "\"\nupstream_table = \"replay\"\n");
}

// Two senders under one [remote] name (issue 58.1: each wrote, and the
// receiver answered 41,809 of the first's 50,000 items as duplicates,
// silently). The second's stream is a clash: refused, named in both logs
// and in the receiver's status, and the first delivers on, losing
// nothing; once the first stops, the second delivers, losing nothing.
TEST(RemoteUpstream, TwoSendersOfOneNameClashAndLoseNothing) {
  Daemon receiver("[remote]\nlisten = \"127.0.0.1:0\"\n" + table_toml("replay", kQueue));
  std::string address = remote_address(receiver);
  ASSERT_FALSE(address.empty()) << read_file(receiver.log());
  Daemon a(upstream_to(address, "name = \"actors\"\n"));
  write_items(a.socket(), "outbox", 0, 500);
  ASSERT_TRUE(wait_for_inserts(receiver.socket(), "replay", 500, 20000)) << read_file(a.log());
  Daemon b(upstream_to(address, "name = \"actors\"\n"));
  write_items(b.socket(), "outbox", 1000, 300);
  ASSERT_TRUE(wait_for_text(b.log(), "claims it too", 10000)) << read_file(b.log());
  std::string b_log = read_file(b.log()), r_log = read_file(receiver.log());
  for (const std::string* log : {&b_log, &r_log}) {
    EXPECT_NE(log->find("(sender 'actors'), and a second stream from"), std::string::npos) << *log;
    EXPECT_NE(log->find("[remote] name"), std::string::npos) << "the key to change: " << *log;
    EXPECT_NE(log->find("is already delivering from ipv4:127.0.0.1:"), std::string::npos) << *log;
  }
  EXPECT_NE(r_log.find("remote: refused a stream: producer "), std::string::npos) << r_log;
  auto [rc, status] = engramctl(receiver, {"status"});
  EXPECT_NE(status.find("clashes      "), std::string::npos) << status;
  EXPECT_NE(status.find("claims it too"), std::string::npos) << status;
  auto [brc, b_status] = engramctl(b, {"status"});
  EXPECT_NE(b_status.find("claims it too"), std::string::npos) << "the sender's status says it too: " << b_status;
  write_items(a.socket(), "outbox", 500, 500);  // the first delivers on
  ASSERT_TRUE(wait_for_inserts(receiver.socket(), "replay", 1000, 20000)) << read_file(a.log());
  EXPECT_EQ(a.terminate(), 0);
  ASSERT_TRUE(wait_for_inserts(receiver.socket(), "replay", 1300, 30000))
      << engramctl(b, {"status"}).second << read_file(b.log());
  std::vector<int64_t> got = drain_items(receiver.socket(), "replay"), want;
  for (int64_t i = 0; i < 1000; ++i) want.push_back(i);
  for (int64_t i = 1000; i < 1300; ++i) want.push_back(i);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, want) << "each item of both senders once";
}

// Two senders with the default name on one host (one host name, as two
// network namespaces, containers or clones have): each is its own
// producer, and the items of both arrive, the first's later ones too.
// With the host name alone, the first's items written after the
// second's came back as duplicates.
TEST(RemoteUpstream, TwoSendersOfTheDefaultNameOnOneHostAreTwoProducers) {
  Daemon receiver("[remote]\nlisten = \"127.0.0.1:0\"\n" + table_toml("replay", kQueue));
  std::string address = remote_address(receiver);
  ASSERT_FALSE(address.empty()) << read_file(receiver.log());
  Daemon a(upstream_to(address, "")), b(upstream_to(address, ""));
  write_items(a.socket(), "outbox", 0, 400);
  ASSERT_TRUE(wait_for_inserts(receiver.socket(), "replay", 400, 20000)) << read_file(a.log());
  write_items(b.socket(), "outbox", 1000, 400);
  ASSERT_TRUE(wait_for_inserts(receiver.socket(), "replay", 800, 20000)) << read_file(b.log());
  write_items(a.socket(), "outbox", 400, 400);  // numbered before b's, by a's clock
  ASSERT_TRUE(wait_for_inserts(receiver.socket(), "replay", 1200, 20000))
      << inserts(receiver.socket(), "replay") << " arrived\n" << engramctl(receiver, {"status"}).second;
  std::vector<int64_t> got = drain_items(receiver.socket(), "replay"), want;
  for (int64_t i = 0; i < 800; ++i) want.push_back(i);
  for (int64_t i = 1000; i < 1400; ++i) want.push_back(i);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, want);
  EXPECT_EQ(read_file(receiver.log()).find("claims it too"), std::string::npos);
  EXPECT_NE(read_file(a.log()).find("drawn for this start"), std::string::npos) << read_file(a.log());
}

// With a [checkpoint] dir, the default name's id is made at the first
// start and kept there: a restart delivers as the same producer.
TEST(RemoteUpstream, TheDefaultNameIsKeptInTheCheckpointDirectory) {
  Daemon receiver("[remote]\nlisten = \"127.0.0.1:0\"\n" + table_toml("replay", kQueue));
  std::string address = remote_address(receiver);
  std::string state = make_temp_dir();
  Daemon a("[checkpoint]\ndir = \"" + state + "\"\n" + upstream_to(address, ""));
  // engramd answers on its socket before its peers start (and log the
  // name): wait for the line. Without the wait this failed once in a few
  // runs under load.
  auto name_in = [](const std::string& path) {
    for (int i = 0; i < 1000; ++i) {
      std::string log = read_file(path);
      size_t at = log.find("this server delivers as ");
      if (at != std::string::npos) return log.substr(at, log.find(' ', at + 24) - at);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return std::string();
  };
  std::string first = name_in(a.log());
  ASSERT_FALSE(first.empty()) << read_file(a.log());
  std::string id = read_file(state + "/instance-id");
  ASSERT_EQ(id.size(), 17u) << id;
  EXPECT_NE(first.find("/" + id.substr(0, 16)), std::string::npos) << first << " vs " << id;
  EXPECT_EQ(a.terminate(), 0);
  ::unlink(a.log().c_str());
  a.start();
  EXPECT_EQ(name_in(a.log()), first) << read_file(a.log());
  std::string cmd = "rm -rf " + state;
  EXPECT_EQ(std::system(cmd.c_str()), 0);
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
