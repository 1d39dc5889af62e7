// Fault injection: clients SIGKILLed at random moments while others keep
// working. After every kill the daemon must reclaim the victim within one
// second and the bystanders must keep making progress; at the end every
// block is free or referenced by an item.
#include <gtest/gtest.h>

#include <random>

#include "daemon_fixture.hpp"
#include "engram/engram.h"
#include "test_util.hpp"

namespace engram::test {
namespace {

TableInfoWire table_info(Control& ctl, const char* name) {
  NameRequest n{};
  std::strncpy(n.name, name, sizeof n.name - 1);
  std::vector<char> r;
  TableInfoWire w{};
  if (ctl.call(ControlType::table_info, &n, sizeof n, &r).ok() && r.size() == sizeof w) std::memcpy(&w, r.data(), sizeof w);
  return w;
}

// Polls until pred() holds; false after timeout_ms.
template <typename Pred>
bool within_ms(int timeout_ms, Pred pred) {
  int64_t deadline = monotonic_ns() + int64_t{timeout_ms} * 1000000;
  while (monotonic_ns() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  return pred();
}

TEST(FaultInjection, KilledClientsAreReclaimedWithinOneSecondAndOthersCarryOn) {
  Daemon d(table_toml("replay", "max_size = 500"));
  Control ctl(d.socket());
  ASSERT_TRUE(ctl.ok());
  pid_t bw = spawn({ENGRAM_PROC_PATH, "writer", d.socket(), "replay", "100", "100000000", d.file("bw")}, d.file("by.log"));
  pid_t bs = spawn({ENGRAM_PROC_PATH, "sampler", d.socket(), "replay", "100000000", "32", d.file("bs"), "view"},
                   d.file("by.log"));
  ASSERT_TRUE(within_ms(5000, [&] { return ctl.status().clients == 3; }));

  std::mt19937 rng(7);
  const int rounds = 200;
  int writers_killed = 0, samplers_killed = 0;
  TableInfoWire last = table_info(ctl, "replay");
  for (int round = 0; round < rounds; ++round) {
    bool is_writer = rng() % 2 == 0;
    std::vector<std::string> args =
        is_writer ? std::vector<std::string>{ENGRAM_PROC_PATH, "writer", d.socket(), "replay", std::to_string(round % 50),
                                             "100000", d.file("victim")}
                  : std::vector<std::string>{ENGRAM_PROC_PATH, "sampler", d.socket(), "replay", "100000", "16",
                                             d.file("victim"), rng() % 2 ? "view" : "copy"};
    pid_t victim = spawn(args, d.file("victim.log"));
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 20000));
    ::kill(victim, SIGKILL);
    ASSERT_EQ(wait_exit(victim, 5000), -SIGKILL) << "round " << round << ": the victim ended by itself:\n"
                                                 << read_file(d.file("victim.log"));
    (is_writer ? writers_killed : samplers_killed)++;
    int64_t t0 = monotonic_ns();
    ASSERT_TRUE(within_ms(1000, [&] { return ctl.status().clients == 3; }))
        << "round " << round << ": the victim was not reclaimed within one second";
    ASSERT_LT(monotonic_ns() - t0, 1'000'000'000);
    // The bystanders were not blocked: both made progress since the last round.
    ASSERT_TRUE(within_ms(1000, [&] {
      TableInfoWire now = table_info(ctl, "replay");
      return now.counters.inserts > last.counters.inserts && now.counters.samples > last.counters.samples;
    })) << "round " << round << ": a bystander stopped making progress\n"
        << read_file(d.file("by.log"));
    last = table_info(ctl, "replay");
  }
  EXPECT_GT(writers_killed, 50);
  EXPECT_GT(samplers_killed, 50);

  ::kill(bw, SIGKILL);
  ::kill(bs, SIGKILL);
  wait_exit(bw, 5000);
  wait_exit(bs, 5000);
  ASSERT_TRUE(within_ms(1000, [&] { return ctl.status().clients == 1; }));
  StatusReply st = ctl.status();
  EXPECT_EQ(st.blocks_reserved, 0u) << "a dead client's blocks were not reclaimed";
  EXPECT_EQ(st.blocks_free + st.blocks_sealed, st.blocks_total);
  EXPECT_GT(st.blocks_sealed, 0u);
  // Sealed blocks are exactly the ones items reference: without items, all are free.
  NameRequest n{};
  std::strncpy(n.name, "replay", sizeof n.name - 1);
  ASSERT_TRUE(ctl.call(ControlType::reset_table, &n, sizeof n, nullptr).ok());
  st = ctl.status();
  EXPECT_EQ(st.blocks_free, st.blocks_total) << "a reference leaked: " << st.blocks_sealed << " sealed blocks remain";
}

}  // namespace
}  // namespace engram::test
