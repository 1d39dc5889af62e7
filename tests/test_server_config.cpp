// The config an agent's embedded server starts from (agents/common/host/
// server_config.hpp): a table written as TOML comes back from the server
// as the options it was made of, and a command line's values go in as
// values, never as TOML of their own.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "agents/common/host/server_config.hpp"
#include "engram/server.hpp"

namespace engram::agents {
namespace {

std::string temp_socket() {
  char dir[] = "/tmp/engram-server-config-XXXXXX";
  EXPECT_NE(::mkdtemp(dir), nullptr);
  return std::string(dir) + "/s.sock";
}

TEST(ServerConfig, ATableComesBackAsItsOptions) {
  api::TableOptions t;
  t.name = "replay";
  t.max_size = 1234;
  t.sampler = ENGRAM_PRIORITIZED;
  t.priority_exponent = 0.6;
  t.remover = ENGRAM_LIFO;
  t.max_times_sampled = 3;
  t.columns.add("obs", ENGRAM_UINT8, {4, 10, 10}, {ENGRAM_CODEC_DELTA_ZSTD, 5})
      .add("action", ENGRAM_INT32)
      .add("logits", ENGRAM_FLOAT32, {6});
  std::string toml = arena_toml({16384, 64}, 100) + table_toml(t, "{ kind = \"queue\", size = 77 }", "");
  std::string socket = temp_socket();
  api::Server server(toml, socket);
  api::Client c = api::Client::connect(socket);
  engram_table_info i = c.info("replay");
  EXPECT_EQ(i.max_size, 1234u);
  EXPECT_EQ(i.sampler, ENGRAM_PRIORITIZED);
  EXPECT_EQ(i.remover, ENGRAM_LIFO);
  EXPECT_EQ(i.max_times_sampled, 3u);
  EXPECT_EQ(i.num_columns, 3u);
  EXPECT_EQ(i.rate_limiter.max_diff, 77.0) << "the queue's size";
  // The columns, compression included: a writer of the same ones inserts.
  api::WriterOptions wo;
  wo.columns = t.columns;
  api::Writer w = c.writer(wo);
  uint8_t obs[400] = {};
  int32_t action = 1;
  float logits[6] = {};
  w.append({obs, &action, logits});
  api::Table table = c.open_table("replay");
  w.create_item(table, 1, 1.0);
  w.flush(10000);
  EXPECT_EQ(c.info("replay").inserts, 1u);
}

// The server takes size classes in ascending order, each once: a small
// network's parameter blocks (4.5 KB for 100 floats) come before 16 KB
// chunks (the test above), and chunks of the episodes' 512 bytes share
// their class.
TEST(ServerConfig, ArenaClassesAreOrderedAndMerged) {
  std::string toml = arena_toml({512, 100}, 100);
  EXPECT_NE(toml.find("block_size = 512, count = 120100"), std::string::npos) << toml;
  api::Server server(toml, temp_socket());
}

TEST(ServerConfig, ACommandLinesValuesStayValues) {
  EXPECT_EQ(toml_string("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\u000a\\u0001\"");
  // A --listen that would end its string and add a key of its own is an
  // address the server refuses by its key, not "insecure = true".
  RunOptions o(1, "out");
  o.listen = "10.1.2.3:7000\"\ninsecure = true\nx = \"";
  try {
    api::Server server(arena_toml({1024, 16}, 10) + remote_toml(o, ""), temp_socket());
    FAIL() << "a server started on " << o.listen;
  } catch (const api::Error& e) {
    EXPECT_NE(std::string(e.what()).find("remote.listen"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace engram::agents
