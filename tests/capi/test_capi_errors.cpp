// Connection, errors and what every call checks first: version and error
// strings, names, strings without a NUL, NULL column entries, unknown
// tables, bad config values, and who may connect.
#include "capi/capi_fixture.hpp"

namespace engram::test {
namespace {

TEST_F(CApi, VersionAndErrorStrings) {
  EXPECT_EQ(engram_version(), unsigned{ENGRAM_VERSION_NUMBER});
  EXPECT_STREQ(engram_version_string(), "0.5.0");
  for (int code = 0; code >= ENGRAM_E_SYSTEM; --code) EXPECT_STRNE(engram_strerror(code), "unknown error code");
  EXPECT_STREQ(engram_strerror(-1000), "unknown error code");
}

TEST_F(CApi, NamesOutsideTheSafeSetAreRefusedWithTheRule) {
  for (const char* bad : {"with space", "new\nline", "<2>x", "slash/x", "tab\t", "\x7f", "caf\xc3\xa9"}) {
    EXPECT_EQ(create(bad), ENGRAM_E_INVALID) << bad;
    EXPECT_NE(last().find("letters, digits, '_', '.', ':' and '-'"), std::string::npos) << last();
    EXPECT_EQ(last().find('\n'), std::string::npos) << "the message quotes the name raw: " << last();
  }
  EXPECT_EQ(create(""), ENGRAM_E_INVALID);
  EXPECT_EQ(create("Ok-name_1.2:3"), ENGRAM_OK) << last();
  std::string longest(ENGRAM_MAX_NAME, 'n');
  EXPECT_EQ(create(longest.c_str()), ENGRAM_OK) << last();
  EXPECT_EQ(create((longest + "n").c_str()), ENGRAM_E_RANGE);
  engram_column bad_col[2] = {{"ok", ENGRAM_UINT8, 0, {}}, {"no good", ENGRAM_UINT8, 0, {}}};
  engram_table_options o = two_columns("cols", 10, bad_col);
  EXPECT_EQ(engram_table_create(c_, &o), ENGRAM_E_INVALID);
  EXPECT_NE(last().find("column 1"), std::string::npos) << last();
}

// Strings the library reads are read with a bound: an array of the
// largest size allowed plus one, with no NUL, is refused without a read
// past its end (ASan would report one).
TEST_F(CApi, StringsWithoutANulWithinTheirLimitAreRefusedUnread) {
  std::vector<char> name(ENGRAM_MAX_NAME + 1, 'n');  // no NUL anywhere
  EXPECT_EQ(create(std::string(name.begin(), name.end()).c_str()), ENGRAM_E_RANGE);  // a copy, NUL-terminated
  auto heap_name = std::make_unique<char[]>(name.size());
  std::memcpy(heap_name.get(), name.data(), name.size());
  engram_table* t = nullptr;
  EXPECT_EQ(engram_table_open(c_, heap_name.get(), &t), ENGRAM_E_RANGE);
  EXPECT_NE(last().find("NUL"), std::string::npos) << last();
  EXPECT_EQ(engram_table_drop(c_, heap_name.get()), ENGRAM_E_RANGE);
  engram_table_options o = two_columns(nullptr, 10);
  o.name = heap_name.get();
  EXPECT_EQ(engram_table_create(c_, &o), ENGRAM_E_RANGE);
  auto col_name = std::make_unique<char[]>(ENGRAM_MAX_COLUMN_NAME + 1);
  std::memset(col_name.get(), 'c', ENGRAM_MAX_COLUMN_NAME + 1);
  engram_column cols[2] = {cols_[0], cols_[1]};
  cols[1].name = col_name.get();
  o = two_columns("t", 10, cols);
  EXPECT_EQ(engram_table_create(c_, &o), ENGRAM_E_RANGE);
  EXPECT_NE(last().find("column 1"), std::string::npos) << last();
  auto path = std::make_unique<char[]>(108);
  std::memset(path.get(), 'p', 108);
  engram_connect_options co;
  engram_connect_options_init(&co);
  co.socket_path = path.get();
  engram_client* c = nullptr;
  EXPECT_EQ(engram_connect(&co, &c), ENGRAM_E_RANGE);
  EXPECT_EQ(c, nullptr);
  engram_server_options so;
  engram_server_options_init(&so);
  so.socket_path = path.get();
  engram_server* s = nullptr;
  EXPECT_EQ(engram_server_start(&so, &s), ENGRAM_E_RANGE);
  EXPECT_NE(last().find("socket_path"), std::string::npos) << last();
}

// A NULL entry in a column array is the caller's mistake: an error naming
// the column, before anything is written or sampled (the table keeps its item).
TEST_F(CApi, NullEntriesInColumnArraysAreRefusedNamingTheColumn) {
  ASSERT_EQ(create("replay"), ENGRAM_OK);
  engram_table* t = open("replay");
  engram_writer* w = writer(cols_, 2);
  float r = 1;
  const void* some[2] = {nullptr, &r};
  EXPECT_EQ(engram_writer_append(w, some), ENGRAM_E_INVALID);
  EXPECT_NE(last().find("columns[0] (column obs)"), std::string::npos) << last();
  EXPECT_EQ(engram_writer_append_batch(w, some, 3), ENGRAM_E_INVALID);
  append(w, 7);
  ASSERT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_OK) << last();
  ASSERT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK) << last();
  uint8_t obs[20];
  void* bufs[2] = {obs, nullptr};
  engram_sample_options so = batch_options(1, 1);
  uint32_t n = 7;
  EXPECT_EQ(engram_sample(t, &so, bufs, nullptr, &n), ENGRAM_E_INVALID);
  EXPECT_NE(last().find("buffers[1] (column reward)"), std::string::npos) << last();
  EXPECT_EQ(n, 0u);
  engram_table_info i;
  engram_table_info_init(&i);
  ASSERT_EQ(engram_table_info_get(c_, "replay", &i), ENGRAM_OK);
  EXPECT_EQ(i.samples, 0u) << "a refused sample took an item";
  engram_writer_close(w);
  engram_table_close(t);
}

TEST_F(CApi, UnknownTableIsNotFoundAndNamesTheTables) {
  ASSERT_EQ(create("replay"), ENGRAM_OK);
  engram_table* t = nullptr;
  EXPECT_EQ(engram_table_open(c_, "nope", &t), ENGRAM_E_NOT_FOUND);
  EXPECT_NE(last().find("replay"), std::string::npos) << last();
  engram_table_info i;
  engram_table_info_init(&i);
  EXPECT_EQ(engram_table_info_get(c_, "nope", &i), ENGRAM_E_NOT_FOUND);
  EXPECT_EQ(engram_table_drop(c_, "nope"), ENGRAM_E_NOT_FOUND);
}

TEST(CApiConfig, BadConfigValuesNameTheKey) {
  struct Case {
    const char* toml;
    const char* says;
  } cases[] = {
      {"socket = 1\n", "socket"},
      {"[arena]\nclasses = [ { block_size = \"12XB\", count = 4 } ]\n", "arena.classes[0].block_size"},
      {"[arena]\nclasses = [ { block_size = 100, count = 4 } ]\n", "multiple of 64"},
      {"[client]\nring_records = 1000\n", "power of two"},
      {"[[table]]\nname = \"t\"\nmax_size = 10\nsampler = \"best\"\n", "sampler"},
      {"[[table]]\nname = \"t\"\nmax_size = 10\n[[table.column]]\nname = \"x\"\ndtype = \"float128\"\n", "dtype"},
      {"[[table]]\nname = \"t\"\nmax_size = 10\nrate_limiter = { kind = \"queue\" }\n[[table.column]]\nname = \"x\"\ndtype "
       "= \"uint8\"\n",
       "size"},
      {"[[table]]\nname = \"t\"\nmax_size = 10\n[[table.column]]\nname = \"x\"\ndtype = \"uint8\"\ncompression = \"lz4\"\n",
       "table[0].column[0].compression"},
      {"[[table]]\nname = \"t\"\nmax_size = 10\n[[table.column]]\nname = \"x\"\ndtype = \"uint8\"\ncompression = "
       "\"zstd\"\nlevel = 99\n",
       "level 99 is out of range"},
      {"[[table]]\nname = \"t\"\nmax_size = 10\n[[table.column]]\nname = \"x\"\ndtype = \"uint8\"\nlevel = 3\n",
       "needs compression"},
      {"bogus = 1\n", "unknown key"},
      {"[[table\n", "config_toml:1"},
  };
  for (const Case& c : cases) {
    engram_server_options so;
    engram_server_options_init(&so);
    so.config_toml = c.toml;
    so.socket_path = "/tmp/engram-never.sock";
    engram_server* s = nullptr;
    EXPECT_EQ(engram_server_start(&so, &s), ENGRAM_E_INVALID) << c.toml;
    EXPECT_NE(last().find(c.says), std::string::npos) << c.toml << " -> " << last();
  }
}

// Connects as uid `nobody` with primary group `gid` (and no others) in a
// child; returns its engram_connect code.
int connect_as_nobody(const std::string& socket, std::string* message, gid_t gid = 65534) {
  int pipefd[2];
  if (::pipe(pipefd) != 0) return 1000;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(pipefd[0]);
    if (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(65534) != 0) ::_exit(100);
    engram_connect_options o;
    engram_connect_options_init(&o);
    o.socket_path = socket.c_str();
    engram_client* c = nullptr;
    int rc = engram_connect(&o, &c);
    std::string m = engram_last_error();
    if (::write(pipefd[1], m.data(), m.size()) < 0) ::_exit(101);
    ::_exit(-rc);
  }
  ::close(pipefd[1]);
  char buf[512];
  ssize_t n = ::read(pipefd[0], buf, sizeof buf);
  ::close(pipefd[0]);
  if (n > 0) message->assign(buf, static_cast<size_t>(n));
  // The child's call, checked against its page here (the child's own
  // check died with it).
  return listed("engram_connect", -wait_exit(pid, 10000));
}

std::string group_name(gid_t gid) {
  struct group* g = ::getgrgid(gid);
  return g ? g->gr_name : std::to_string(gid);
}

TEST(AccessControl, AnotherUserWithoutTheGroupIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to switch to another uid";
  Daemon d(table_toml("replay", "max_size = 10"));
  std::string msg;
  // The socket is 0660: the kernel refuses first.
  EXPECT_EQ(connect_as_nobody(d.socket(), &msg), ENGRAM_E_PERMISSION) << msg;
  EXPECT_NE(msg.find("usermod -aG "), std::string::npos) << "says how to join the socket's group: " << msg;
  // Even through a socket opened to everyone, the server checks SO_PEERCRED.
  ASSERT_EQ(::chmod(d.socket().c_str(), 0666), 0);
  ASSERT_EQ(::chmod(d.dir().c_str(), 0755), 0);
  EXPECT_EQ(connect_as_nobody(d.socket(), &msg), ENGRAM_E_PERMISSION) << msg;
  EXPECT_NE(msg.find("may not use this server"), std::string::npos) << msg;
  // The default group is the server's own.
  EXPECT_NE(msg.find("clients must be in group " + group_name(::getegid()) + ": sudo usermod -aG"), std::string::npos)
      << msg;
  EXPECT_NE(read_file(d.log()).find("refused pid"), std::string::npos) << "refusals are logged with the peer's credentials";
}

// With no `group` configured, the server's own group is the one whose
// members may connect (engramd.toml(5)); before, nobody but the owner could.
TEST(AccessControl, TheServersOwnGroupIsTheDefault) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to switch to another uid";
  Daemon d(table_toml("replay", "max_size = 10"));
  ASSERT_EQ(::chmod(d.dir().c_str(), 0755), 0);
  std::string msg;
  EXPECT_EQ(connect_as_nobody(d.socket(), &msg, ::getegid()), ENGRAM_OK) << msg;
}

}  // namespace
}  // namespace engram::test
