// Every pointer parameter of the C API, NULL in turn, the other arguments
// valid: a parameter whose item in the header says "Not NULL" must get
// ENGRAM_E_INVALID with a message that says what is NULL, one that says
// "May be NULL" anything else, and neither may crash or cost the server.
// The calls are generated from the headers (scripts/gen-man3.py writes
// null_args.inc), so a new function or parameter is covered as soon as
// its comment describes it, and a page cannot promise a check the library
// does not make.
#include <cstdlib>
#include <functional>

#include "capi_fixture.hpp"

namespace engram::test {
namespace {

// A server, a client of it and one of every handle and buffer a call can
// take, made fresh for each call so that no call sees another's leftovers.
struct World {
  std::string dir, socket;
  engram_server* server = nullptr;
  engram_client* client = nullptr;
  engram_table* table = nullptr;
  engram_writer* writer = nullptr;
  engram_batch* batch = nullptr;
  engram_items* items = nullptr;
  engram_column columns[2] = {{"obs", ENGRAM_UINT8, 2, {4, 5}}, {"reward", ENGRAM_FLOAT32, 0, {}}};
  engram_table_options table_options;
  engram_writer_options writer_options;
  engram_sample_options sample_options;
  engram_connect_options connect_options;
  engram_server_options server_options;
  engram_transfer_options transfer_options;
  engram_rate_limiter limiter;
  engram_table_info info;
  std::string second_socket;
  // Room for anything a call writes: steps, infos, views, keys, results.
  alignas(64) uint8_t obs[4096] = {};
  alignas(64) float reward[1024] = {};
  const void* step[2] = {obs, reward};
  void* buffers[2] = {obs, reward};
  uint64_t keys[64] = {};
  double priorities[64] = {};
  int32_t results[64] = {};
  engram_sample_info infos[64];
  engram_column column_out[ENGRAM_MAX_COLUMNS];
  engram_compression compression_out[ENGRAM_MAX_COLUMNS];
  engram_item item_out[64];
  engram_view views[8];
  char path[4096] = {};
  uint32_t u32 = 0;
  uint64_t u64[64] = {};
  // Where calls put the handles they hand out; freed after the call.
  engram_client* out_client = nullptr;
  engram_table* out_table = nullptr;
  engram_writer* out_writer = nullptr;
  engram_batch* out_batch = nullptr;
  engram_items* out_items = nullptr;
  engram_server* out_server = nullptr;

  // Starts the server and makes a table "args" of four one-step items, a
  // writer, a batch of two of them, a listing, and options for the rest.
  void set_up() {
    dir = make_temp_dir();
    socket = dir + "/engram.sock";
    second_socket = dir + "/second.sock";
    engram_server_options_init(&server_options);
    server_options.socket_path = socket.c_str();
    server_options.quiet = 1;
    ASSERT_EQ(engram_server_start(&server_options, &server), ENGRAM_OK) << last();
    server_options.socket_path = second_socket.c_str();
    engram_connect_options_init(&connect_options);
    connect_options.socket_path = socket.c_str();
    ASSERT_EQ(engram_connect(&connect_options, &client), ENGRAM_OK) << last();
    engram_table_options_init(&table_options);
    table_options.name = "args";
    table_options.max_size = 100;
    table_options.columns = columns;
    table_options.num_columns = 2;
    ASSERT_EQ(engram_table_create(client, &table_options), ENGRAM_OK) << last();
    table_options.name = "args2";
    ASSERT_EQ(engram_table_open(client, "args", &table), ENGRAM_OK) << last();
    engram_writer_options_init(&writer_options);
    writer_options.columns = columns;
    writer_options.num_columns = 2;
    writer_options.keep_keys = 1;
    ASSERT_EQ(engram_writer_open(client, &writer_options, &writer), ENGRAM_OK) << last();
    for (int i = 0; i < 4; ++i) {
      ASSERT_EQ(engram_writer_append(writer, step), ENGRAM_OK) << last();
      ASSERT_EQ(engram_writer_create_item(writer, table, 1, 1.0), ENGRAM_OK) << last();
    }
    ASSERT_EQ(engram_writer_flush(writer, 5000), ENGRAM_OK) << last();
    size_t taken = 0;
    ASSERT_EQ(engram_writer_take_keys(writer, keys, 64, &taken), ENGRAM_OK) << last();
    ASSERT_EQ(taken, 4u);
    for (double& p : priorities) p = 1.0;
    engram_sample_options_init(&sample_options);
    sample_options.batch_size = 2;
    sample_options.timeout_ms = 0;
    ASSERT_EQ(engram_sample_view(table, &sample_options, &batch), ENGRAM_OK) << last();
    ASSERT_EQ(engram_items_open(client, "args", ENGRAM_BY_INSERTION, &items), ENGRAM_OK) << last();
    engram_transfer_options_init(&transfer_options);
    ASSERT_EQ(engram_rate_limiter_min_size(&limiter, 1), ENGRAM_OK);
    engram_table_info_init(&info);
  }

  void tear_down() {
    engram_items_close(out_items);
    engram_items_close(items);
    engram_server_stop(out_server);
    engram_disconnect(out_client);
    engram_disconnect(client);  // frees the table, writer and batch handles too
    EXPECT_EQ(engram_server_stop(server), ENGRAM_OK) << last();
    EXPECT_EQ(std::system(("rm -rf " + dir).c_str()), 0);
  }
};

// The valid value of each parameter type: A<type>::get(world).
template <class T>
struct A;
#define ENGRAM_ARG(type, ...) \
  template <>                 \
  struct A<type> {            \
    static type get([[maybe_unused]] World& f) { return __VA_ARGS__; } \
  };
ENGRAM_ARG(engram_client*, f.client)
ENGRAM_ARG(engram_client**, &f.out_client)
ENGRAM_ARG(engram_table*, f.table)
ENGRAM_ARG(const engram_table*, f.table)
ENGRAM_ARG(engram_table**, &f.out_table)
ENGRAM_ARG(engram_writer*, f.writer)
ENGRAM_ARG(engram_writer**, &f.out_writer)
ENGRAM_ARG(engram_batch*, f.batch)
ENGRAM_ARG(const engram_batch*, f.batch)
ENGRAM_ARG(engram_batch**, &f.out_batch)
ENGRAM_ARG(engram_items*, f.items)
ENGRAM_ARG(engram_items**, &f.out_items)
ENGRAM_ARG(engram_server**, &f.out_server)
ENGRAM_ARG(const engram_connect_options*, &f.connect_options)
ENGRAM_ARG(const engram_table_options*, &f.table_options)
ENGRAM_ARG(const engram_writer_options*, &f.writer_options)
ENGRAM_ARG(const engram_sample_options*, &f.sample_options)
ENGRAM_ARG(const engram_server_options*, &f.server_options)
ENGRAM_ARG(const engram_transfer_options*, &f.transfer_options)
ENGRAM_ARG(engram_rate_limiter*, &f.limiter)
ENGRAM_ARG(const engram_rate_limiter*, &f.limiter)
ENGRAM_ARG(engram_table_info*, &f.info)
ENGRAM_ARG(engram_column*, f.column_out)
ENGRAM_ARG(engram_compression*, f.compression_out)
ENGRAM_ARG(engram_item*, f.item_out)
ENGRAM_ARG(engram_sample_info*, f.infos)
ENGRAM_ARG(engram_view*, f.views)
ENGRAM_ARG(const char*, "args")  // a table's name, and a file in the working directory
ENGRAM_ARG(char*, f.path)
ENGRAM_ARG(const void* const*, f.step)
ENGRAM_ARG(void* const*, f.buffers)
ENGRAM_ARG(const uint64_t*, f.keys)
ENGRAM_ARG(uint64_t*, f.u64)  // also size_t*, the same type here
ENGRAM_ARG(const double*, f.priorities)
ENGRAM_ARG(int32_t*, f.results)
ENGRAM_ARG(uint32_t*, &f.u32)
// Numbers: 1 is in range for every count, index (the batch holds two
// items, the table two columns) and cap; 0 for timeouts (never wait) and
// for the listing's order.
ENGRAM_ARG(int64_t, 1)
ENGRAM_ARG(double, 1.0)
ENGRAM_ARG(uint32_t, 1)
ENGRAM_ARG(size_t, 1)
ENGRAM_ARG(int32_t, 0)
#undef ENGRAM_ARG

enum class Rule { must, may };

struct Case {
  const char* function;
  const char* parameter;
  Rule rule;
  std::function<int(World&)> call;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
#define ENGRAM_NULL_ARG(fn, param, rule, ...) {#fn, param, Rule::rule, []([[maybe_unused]] World& f) { return __VA_ARGS__; }},
#include "null_args.inc"
#undef ENGRAM_NULL_ARG
  };
  return all;
}

// What a call needs beyond valid arguments: engram_sample_end collects a
// sample begun before it.
void prepare(const std::string& function, World& f) {
  if (function == "engram_sample_end") {
    ASSERT_EQ(engram_sample_begin(f.table, &f.sample_options), ENGRAM_OK) << last();
  }
}

TEST(NullArgs, EveryPointerIsCheckedAsItsPageSays) {
  ASSERT_GT(cases().size(), 80u);  // the generated table is there, and whole
  std::string cwd(4096, '\0');
  ASSERT_NE(::getcwd(cwd.data(), cwd.size()), nullptr);
  for (const Case& c : cases()) {
    SCOPED_TRACE(std::string(c.function) + " with " + c.parameter + " NULL");
    std::fprintf(stderr, "%s(%s = NULL)\n", c.function, c.parameter);  // named, should it crash
    World f;
    f.set_up();
    if (testing::Test::HasFatalFailure()) return;
    // Files a call writes (an export's) go to the world's directory, and
    // calls that read the defaults find this server.
    ASSERT_EQ(::chdir(f.dir.c_str()), 0);
    ASSERT_EQ(::setenv("ENGRAM_SOCKET", f.socket.c_str(), 1), 0);
    prepare(c.function, f);
    // A failure of our own first, so that the message checked below is
    // the call's and not one left from before.
    engram_rate_limiter scratch;
    ASSERT_EQ(engram_rate_limiter_min_size(&scratch, 0), ENGRAM_E_INVALID);
    ASSERT_EQ(last().find("NULL"), std::string::npos) << last();
    int rc = c.call(f);
    if (c.rule == Rule::must) {
      EXPECT_EQ(rc, ENGRAM_E_INVALID) << engram_strerror(rc) << ": " << last();
      EXPECT_NE(last().find("NULL"), std::string::npos) << "the message does not say what is NULL: " << last();
    } else {
      EXPECT_NE(rc, ENGRAM_E_INVALID) << last();
    }
    // The server took no harm: the table answers, its items all there.
    engram_table_info info;
    engram_table_info_init(&info);
    EXPECT_EQ(engram_table_info_get(f.client, "args", &info), ENGRAM_OK) << last();
    ASSERT_EQ(::chdir(cwd.c_str()), 0);
    ::unsetenv("ENGRAM_SOCKET");
    f.tear_down();
  }
}

}  // namespace
}  // namespace engram::test
