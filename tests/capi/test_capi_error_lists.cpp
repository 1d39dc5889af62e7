// The codes the main functions' man pages list, each brought about: a
// server gone, a server stopped (SIGSTOP), a silent socket, a dropped
// table, a full queue, NULL arguments. Every call here goes through
// listed_errors.hpp, so each code must also be on the page;
// tests/errors_driven.py checks that every listed code of the main
// functions is driven by this file or another C API test.
#include <sys/socket.h>
#include <sys/un.h>

#include "capi_fixture.hpp"

namespace engram::test {
namespace {

class ErrorLists : public CApi {
 protected:
  // A second server of this test's own, to stop under its clients.
  engram_server* start_own(const std::string& socket, const char* toml = nullptr) {
    engram_server_options so;
    engram_server_options_init(&so);
    so.socket_path = socket.c_str();
    so.config_toml = toml;
    so.quiet = 1;
    engram_server* s = nullptr;
    EXPECT_EQ(engram_server_start(&so, &s), ENGRAM_OK) << last();
    return s;
  }
  engram_client* connect_to(const std::string& socket, int32_t timeout_ms = 0) {
    engram_connect_options o;
    engram_connect_options_init(&o);
    o.socket_path = socket.c_str();
    o.timeout_ms = timeout_ms;
    engram_client* c = nullptr;
    EXPECT_EQ(engram_connect(&o, &c), ENGRAM_OK) << last();
    return c;
  }
  int connect_rc(const std::string& socket, int32_t timeout_ms = 0) {
    engram_connect_options o;
    engram_connect_options_init(&o);
    o.socket_path = socket.c_str();
    o.timeout_ms = timeout_ms;
    engram_client* c = nullptr;
    int rc = engram_connect(&o, &c);
    if (rc == ENGRAM_OK) engram_disconnect(c);
    return rc;
  }
  // A writer of the fixture's two columns on client c (not c_).
  engram_writer* writer_on(engram_client* c, uint32_t chunk_length, int32_t insert_timeout_ms = -1) {
    engram_writer_options wo;
    engram_writer_options_init(&wo);
    wo.columns = cols_;
    wo.num_columns = 2;
    wo.chunk_length = chunk_length;
    wo.insert_timeout_ms = insert_timeout_ms;
    engram_writer* w = nullptr;
    EXPECT_EQ(engram_writer_open(c, &wo, &w), ENGRAM_OK) << last();
    return w;
  }
  engram_table_options queue_options(const char* name, int64_t size) {
    engram_table_options o = two_columns(name, 100);
    o.sampler = ENGRAM_FIFO;
    EXPECT_EQ(engram_rate_limiter_queue(&o.rate_limiter, size), ENGRAM_OK);
    return o;
  }
};

TEST_F(ErrorLists, Connect) {
  engram_client* c = nullptr;
  EXPECT_EQ(engram_connect(nullptr, nullptr), ENGRAM_E_INVALID);
  EXPECT_EQ(connect_rc(dir_ + "/nobody-here.sock"), ENGRAM_E_DISCONNECTED) << last();
  // A socket that takes connections and never answers the hello.
  std::string silent = dir_ + "/silent.sock";
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, silent.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  EXPECT_EQ(connect_rc(silent, 200), ENGRAM_E_TIMEOUT) << last();
  ::close(fd);
  // One connection per uid: the second is refused by name.
  std::string own = dir_ + "/own.sock";
  engram_server* s = start_own(own, "[server]\nmax_connections_per_uid = 1\n");
  c = connect_to(own);
  EXPECT_EQ(connect_rc(own), ENGRAM_E_LIMIT) << last();
  EXPECT_NE(last().find("max_connections_per_uid"), std::string::npos) << last();
  engram_disconnect(c);
  EXPECT_EQ(engram_server_stop(s), ENGRAM_OK);
}

// Every call on a client whose server went away: ENGRAM_E_DISCONNECTED.
TEST_F(ErrorLists, AServerGoneIsDisconnectedEverywhere) {
  std::string own = dir_ + "/own.sock";
  engram_server* s = start_own(own);
  engram_client* c = connect_to(own);
  engram_table_options o = two_columns("t", 100);
  ASSERT_EQ(engram_table_create(c, &o), ENGRAM_OK) << last();
  engram_table* t = nullptr;
  ASSERT_EQ(engram_table_open(c, "t", &t), ENGRAM_OK) << last();
  engram_writer_options wo;
  engram_writer_options_init(&wo);
  wo.columns = cols_;
  wo.num_columns = 2;
  wo.chunk_length = 4;
  engram_writer* w = nullptr;
  ASSERT_EQ(engram_writer_open(c, &wo, &w), ENGRAM_OK) << last();
  uint8_t obs[20] = {};
  float r = 0;
  const void* step[2] = {obs, &r};
  ASSERT_EQ(engram_writer_append(w, step), ENGRAM_OK);
  ASSERT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_OK);
  ASSERT_EQ(engram_server_stop(s), ENGRAM_OK);

  EXPECT_EQ(engram_table_create(c, &o), ENGRAM_E_DISCONNECTED) << last();
  engram_table* t2 = nullptr;
  EXPECT_EQ(engram_table_open(c, "t", &t2), ENGRAM_E_DISCONNECTED) << last();
  engram_writer* w2 = nullptr;
  EXPECT_EQ(engram_writer_open(c, &wo, &w2), ENGRAM_E_DISCONNECTED) << last();
  EXPECT_EQ(engram_writer_flush(w, 1000), ENGRAM_E_DISCONNECTED) << last();
  EXPECT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_E_DISCONNECTED) << last();
  engram_sample_options so = batch_options(1, 1);
  uint8_t bo[20];
  float br;
  void* bufs[2] = {bo, &br};
  uint32_t n = 0;
  EXPECT_EQ(engram_sample(t, &so, bufs, nullptr, &n), ENGRAM_E_DISCONNECTED) << last();
  engram_batch* b = nullptr;
  EXPECT_EQ(engram_sample_view(t, &so, &b), ENGRAM_E_DISCONNECTED) << last();
  EXPECT_EQ(engram_sample_begin(t, &so), ENGRAM_E_DISCONNECTED) << last();
  uint64_t key = 1;
  double p = 1;
  EXPECT_EQ(engram_update_priorities(t, &key, &p, 1, nullptr), ENGRAM_E_DISCONNECTED) << last();
  EXPECT_EQ(engram_checkpoint(c, 1000, nullptr, 0), ENGRAM_E_DISCONNECTED) << last();
  engram_disconnect(c);
}

// A server that stopped answering (SIGSTOP): control requests end at the
// client's timeout.
TEST_F(ErrorLists, AStoppedServerTimesOutControlRequests) {
  Daemon d(table_toml("replay", "max_size = 10"));
  engram_client* c = connect_to(d.socket(), 300);
  ASSERT_TRUE(d.freeze()) << "engramd did not stop within a second of SIGSTOP";
  engram_table_options o = two_columns("t", 100);
  EXPECT_EQ(engram_table_create(c, &o), ENGRAM_E_TIMEOUT) << last();
  engram_table* t = nullptr;
  EXPECT_EQ(engram_table_open(c, "replay", &t), ENGRAM_E_TIMEOUT) << last();
  EXPECT_EQ(engram_checkpoint(c, 300, nullptr, 0), ENGRAM_E_TIMEOUT) << last();
  ASSERT_EQ(::kill(d.pid(), SIGCONT), 0);
  engram_disconnect(c);
}

TEST_F(ErrorLists, TablesAndWritersRefuseBadArguments) {
  ASSERT_EQ(create("t"), ENGRAM_OK) << last();
  engram_table* t = open("t");
  engram_table* again = nullptr;
  EXPECT_EQ(engram_table_open(c_, "t", nullptr), ENGRAM_E_INVALID);
  EXPECT_EQ(engram_table_open(c_, "t", &again), ENGRAM_E_EXISTS) << "open on this client already: " << last();
  engram_writer_options wo;
  engram_writer_options_init(&wo);
  wo.columns = cols_;
  wo.num_columns = 2;
  engram_writer* w = nullptr;
  EXPECT_EQ(engram_writer_open(c_, &wo, nullptr), ENGRAM_E_INVALID);
  wo.chunk_length = 0;
  EXPECT_EQ(engram_writer_open(c_, &wo, &w), ENGRAM_E_RANGE) << last();
  wo.chunk_length = 1;
  ASSERT_EQ(engram_writer_open(c_, &wo, &w), ENGRAM_OK) << last();
  EXPECT_EQ(engram_writer_create_item(w, nullptr, 1, 1.0), ENGRAM_E_INVALID);
  EXPECT_EQ(engram_writer_flush(nullptr, 0), ENGRAM_E_INVALID);
  EXPECT_EQ(engram_update_priorities(nullptr, nullptr, nullptr, 0, nullptr), ENGRAM_E_INVALID);
  EXPECT_EQ(engram_rate_limiter_min_size(nullptr, 1), ENGRAM_E_INVALID);
  engram_rate_limiter rl;
  EXPECT_EQ(engram_rate_limiter_min_size(&rl, 0), ENGRAM_E_INVALID) << last();
  EXPECT_EQ(engram_server_stop(nullptr), ENGRAM_OK) << "NULL is a no-op";
  EXPECT_EQ(engram_checkpoint(nullptr, 0, nullptr, 0), ENGRAM_E_INVALID);
  EXPECT_EQ(engram_checkpoint(c_, 1000, nullptr, 0), ENGRAM_E_INVALID) << "no [checkpoint] dir: " << last();
  (void)t;
}

// A dropped table: handles get ENGRAM_E_CLOSED.
TEST_F(ErrorLists, ADroppedTableIsClosedToItsHandles) {
  ASSERT_EQ(create("t"), ENGRAM_OK) << last();
  engram_table* t = open("t");
  engram_writer* w = writer(cols_, 2, 4);
  append(w, 1);
  // Held by the writer until its chunk is finalized: it goes to the
  // dropped table at the flush, which hears of it.
  ASSERT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_OK) << last();
  ASSERT_EQ(engram_table_drop(c_, "t"), ENGRAM_OK) << last();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(engram_writer_flush(w, 1000), ENGRAM_E_CLOSED) << last();
  engram_sample_options so = batch_options(1, 1);
  uint8_t bo[20];
  float br;
  void* bufs[2] = {bo, &br};
  uint32_t n = 0;
  EXPECT_EQ(engram_sample_begin(t, &so), ENGRAM_E_CLOSED) << last();
  engram_batch* b = nullptr;
  EXPECT_EQ(engram_sample_view(t, &so, &b), ENGRAM_E_CLOSED) << last();
  EXPECT_EQ(engram_sample(t, &so, bufs, nullptr, &n), ENGRAM_E_CLOSED) << last();
  uint64_t key = 1;
  double p = 1;
  EXPECT_EQ(engram_update_priorities(t, &key, &p, 1, nullptr), ENGRAM_E_CLOSED) << last();
  EXPECT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_E_CLOSED) << "known closed now: " << last();
}

// A queue of one: the rate limiter holds a second item, and an empty one
// holds a sample.
TEST_F(ErrorLists, TheRateLimiterRefusesWhatMayNotWait) {
  engram_table_options o = queue_options("q", 1);
  ASSERT_EQ(engram_table_create(c_, &o), ENGRAM_OK) << last();
  engram_table* q = open("q");
  engram_sample_options so = batch_options(1, 1);
  so.timeout_ms = 0;
  engram_batch* b = nullptr;
  EXPECT_EQ(engram_sample_view(q, &so, &b), ENGRAM_E_RATE_LIMITED) << last();
  so.timeout_ms = 50;
  EXPECT_EQ(engram_sample_view(q, &so, &b), ENGRAM_E_TIMEOUT) << last();
  so.batch_size = 0;
  EXPECT_EQ(engram_sample_view(q, &so, &b), ENGRAM_E_RANGE) << last();
  engram_writer_options wo;
  engram_writer_options_init(&wo);
  wo.columns = cols_;
  wo.num_columns = 2;
  wo.insert_timeout_ms = 0;
  engram_writer* w = nullptr;
  ASSERT_EQ(engram_writer_open(c_, &wo, &w), ENGRAM_OK) << last();
  append(w, 1);
  ASSERT_EQ(engram_writer_create_item(w, q, 1, 1.0), ENGRAM_OK) << last();
  append(w, 2);
  ASSERT_EQ(engram_writer_create_item(w, q, 1, 1.0), ENGRAM_OK) << last();
  EXPECT_EQ(engram_writer_flush(w, 2000), ENGRAM_E_RATE_LIMITED) << "the second item, refused at once: " << last();
}

// engram_client_interrupt ends a sample waiting for the rate limiter.
TEST_F(ErrorLists, AnInterruptEndsAWaitingSampleView) {
  engram_table_options o = queue_options("q", 1);
  ASSERT_EQ(engram_table_create(c_, &o), ENGRAM_OK) << last();
  engram_table* q = open("q");
  std::thread stop([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    engram_client_interrupt(c_);
  });
  engram_sample_options so = batch_options(1, 1);
  so.timeout_ms = 10000;
  engram_batch* b = nullptr;
  EXPECT_EQ(engram_sample_view(q, &so, &b), ENGRAM_E_INTERRUPTED) << last();
  stop.join();
}

// An append that finalizes a chunk sends the items waiting for it; to a
// server gone, it hears so (DISCONNECTED). A table dropped meanwhile is
// reported by the flush (its refusal is kept for it).
TEST_F(ErrorLists, AnAppendThatSendsItemsHearsTheServerIsGone) {
  uint8_t obs[20] = {};
  float r = 0;
  const void* step[2] = {obs, &r};
  std::string own = dir_ + "/own.sock";
  engram_server* s = start_own(own);
  engram_client* c = connect_to(own);
  engram_table_options o = two_columns("u", 100);
  ASSERT_EQ(engram_table_create(c, &o), ENGRAM_OK) << last();
  engram_table* u = nullptr;
  ASSERT_EQ(engram_table_open(c, "u", &u), ENGRAM_OK) << last();
  engram_writer* w2 = writer_on(c, 2);
  ASSERT_NE(w2, nullptr);
  ASSERT_EQ(engram_writer_append(w2, step), ENGRAM_OK) << last();
  ASSERT_EQ(engram_writer_create_item(w2, u, 1, 1.0), ENGRAM_OK) << last();
  ASSERT_EQ(engram_server_stop(s), ENGRAM_OK);
  EXPECT_EQ(engram_writer_append(w2, step), ENGRAM_E_DISCONNECTED) << last();
  engram_disconnect(c);
}

// A sample begun, then collected: an item of another length (RANGE), a
// table dropped meanwhile (CLOSED), a server gone meanwhile (DISCONNECTED).
TEST_F(ErrorLists, ASampleBegunHearsAtItsEndWhatBefellIt) {
  ASSERT_EQ(create("t"), ENGRAM_OK) << last();
  engram_table* t = open("t");
  engram_writer* w = writer(cols_, 2, 1);
  insert_items(w, t, 3);
  uint8_t bo[2][20];
  float br[2];
  void* bufs[2] = {bo, br};
  uint32_t n = 0;
  engram_sample_options so = batch_options(1, 2);  // the items are of 1 step
  ASSERT_EQ(engram_sample_begin(t, &so), ENGRAM_OK) << last();
  EXPECT_EQ(engram_sample_end(t, bufs, nullptr, &n), ENGRAM_E_RANGE) << last();

  engram_table_options o = queue_options("q", 1);
  ASSERT_EQ(engram_table_create(c_, &o), ENGRAM_OK) << last();
  engram_table* q = open("q");
  so = batch_options(1, 1);
  so.timeout_ms = 5000;
  ASSERT_EQ(engram_sample_begin(q, &so), ENGRAM_OK) << last();  // waits: the queue is empty
  ASSERT_EQ(engram_table_drop(c_, "q"), ENGRAM_OK) << last();
  EXPECT_EQ(engram_sample_end(q, bufs, nullptr, &n), ENGRAM_E_CLOSED) << last();

  std::string own = dir_ + "/own.sock";
  engram_server* s = start_own(own);
  engram_client* c = connect_to(own);
  o = queue_options("q2", 1);
  ASSERT_EQ(engram_table_create(c, &o), ENGRAM_OK) << last();
  engram_table* q2 = nullptr;
  ASSERT_EQ(engram_table_open(c, "q2", &q2), ENGRAM_OK) << last();
  ASSERT_EQ(engram_sample_begin(q2, &so), ENGRAM_OK) << last();
  ASSERT_EQ(engram_server_stop(s), ENGRAM_OK);
  EXPECT_EQ(engram_sample_end(q2, bufs, nullptr, &n), ENGRAM_E_DISCONNECTED) << last();
  engram_disconnect(c);
}

// A priority update waiting for a stopped server's answer ends at an interrupt.
TEST_F(ErrorLists, AnInterruptEndsAnUpdateWaitingForItsAnswer) {
  Daemon d(table_toml("replay", "max_size = 10"));
  engram_client* c = connect_to(d.socket());
  engram_table* t = nullptr;
  ASSERT_EQ(engram_table_open(c, "replay", &t), ENGRAM_OK) << last();
  ASSERT_TRUE(d.freeze()) << "engramd did not stop within a second of SIGSTOP";
  std::thread stop([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    engram_client_interrupt(c);
  });
  uint64_t key = 1;
  double p = 2;
  EXPECT_EQ(engram_update_priorities(t, &key, &p, 1, nullptr), ENGRAM_E_INTERRUPTED) << last();
  stop.join();
  ASSERT_EQ(::kill(d.pid(), SIGCONT), 0);
  engram_disconnect(c);
}

// A checkpoint's path that does not fit the caller's buffer: RANGE, and
// the checkpoint was written all the same.
TEST_F(ErrorLists, ACheckpointPathTooLongForItsBufferIsRange) {
  std::string own = dir_ + "/own.sock";
  std::string toml = "[checkpoint]\ndir = \"" + dir_ + "/ckpt\"\n";
  engram_server* s = start_own(own, toml.c_str());
  engram_client* c = connect_to(own);
  char path[4];
  EXPECT_EQ(engram_checkpoint(c, -1, path, sizeof path), ENGRAM_E_RANGE) << last();
  EXPECT_NE(last().find(dir_ + "/ckpt/"), std::string::npos) << "names where it was written: " << last();
  engram_disconnect(c);
  EXPECT_EQ(engram_server_stop(s), ENGRAM_OK);
}

// The server holds at most 64 tables.
TEST_F(ErrorLists, TheSixtyFifthTableIsOutOfRange) {
  int rc = ENGRAM_OK;
  for (int i = 0; i < 70 && rc == ENGRAM_OK; ++i) rc = create(("t" + std::to_string(i)).c_str(), 4);
  EXPECT_EQ(rc, ENGRAM_E_RANGE) << last();
  EXPECT_NE(last().find("at most 64 tables"), std::string::npos) << last();
}

// A client may hold few blocks reserved at once ([client]
// max_reserved_share): a writer past that share waits, then hears LIMIT,
// or an interrupt.
TEST_F(ErrorLists, AWriterPastItsClientsShareOfBlocksWaits) {
  std::string own = dir_ + "/own.sock";
  engram_server* s = start_own(own, "[arena]\nclasses = [ { block_size = \"4KiB\", count = 16 } ]\n"
                                    "[client]\nmax_reserved_share = 0.25\n");
  engram_client* c = connect_to(own);
  uint8_t obs[20] = {};
  float r = 0;
  const void* step[2] = {obs, &r};
  std::vector<engram_writer*> ws;
  int rc = ENGRAM_OK;
  for (int i = 0; i < 8 && rc == ENGRAM_OK; ++i) {
    engram_writer_options wo;
    engram_writer_options_init(&wo);
    wo.columns = cols_;
    wo.num_columns = 2;
    wo.chunk_length = 4;
    wo.insert_timeout_ms = 100;
    engram_writer* w = nullptr;
    rc = engram_writer_open(c, &wo, &w);
    if (rc != ENGRAM_OK) break;
    ws.push_back(w);
    rc = engram_writer_append(w, step);  // each writer's open chunk holds a block reserved
  }
  EXPECT_EQ(rc, ENGRAM_E_LIMIT) << last();
  EXPECT_NE(last().find("max_reserved_share"), std::string::npos) << last();
  ASSERT_FALSE(ws.empty());
  std::thread stop([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    engram_client_interrupt(c);
  });
  engram_writer_options wo;
  engram_writer_options_init(&wo);
  wo.columns = cols_;
  wo.num_columns = 2;
  engram_writer* w = nullptr;
  ASSERT_EQ(engram_writer_open(c, &wo, &w), ENGRAM_OK) << last();  // insert_timeout_ms -1: waits for ever
  EXPECT_EQ(engram_writer_append(w, step), ENGRAM_E_INTERRUPTED) << last();
  stop.join();
  engram_disconnect(c);
  EXPECT_EQ(engram_server_stop(s), ENGRAM_OK);
}

// A table handle with as many requests unanswered as its rings hold (16
// here, the server stopped): a call that must send waits for room, until
// its timeout or an interrupt.
TEST_F(ErrorLists, ACallThatFindsTheRingFullWaitsForRoom) {
  Daemon d(table_toml("replay", "max_size = 1000") + "[client]\nring_records = 16\n");
  engram_client* c = connect_to(d.socket());
  engram_table* t = nullptr;
  ASSERT_EQ(engram_table_open(c, "replay", &t), ENGRAM_OK) << last();
  engram_writer_options wo;
  engram_writer_options_init(&wo);
  engram_column cols[2] = {{"obs", ENGRAM_UINT8, 2, {10, 30}}, {"meta", ENGRAM_INT64, 1, {2}}};
  wo.columns = cols;
  wo.num_columns = 2;
  engram_writer* w = nullptr;
  ASSERT_EQ(engram_writer_open(c, &wo, &w), ENGRAM_OK) << last();  // its blocks granted before the stop
  uint8_t obs[300] = {};
  int64_t meta[2] = {};
  const void* step[2] = {obs, meta};
  ASSERT_EQ(engram_writer_append(w, step), ENGRAM_OK) << last();
  ASSERT_TRUE(d.freeze()) << "engramd did not stop within a second of SIGSTOP";
  uint64_t keys[1] = {1};
  double p[1] = {1.0};
  int rc = ENGRAM_OK;
  std::thread stop([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    engram_client_interrupt(c);
  });
  for (int i = 0; i < 64 && rc == ENGRAM_OK; ++i) rc = engram_update_priorities_async(t, keys, p, 1);
  stop.join();
  ASSERT_EQ(rc, ENGRAM_E_INTERRUPTED) << "the rings filled up: " << last();
  engram_sample_options so = batch_options(1, 1);
  so.timeout_ms = 100;
  EXPECT_EQ(engram_sample_begin(t, &so), ENGRAM_E_TIMEOUT) << last();
  std::thread stop2([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    engram_client_interrupt(c);
  });
  so.timeout_ms = -1;
  EXPECT_EQ(engram_sample_begin(t, &so), ENGRAM_E_INTERRUPTED) << last();
  stop2.join();
  // An item over a full chunk leaves at once, and waits for room too.
  std::thread stop3([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    engram_client_interrupt(c);
  });
  EXPECT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_E_INTERRUPTED) << last();
  stop3.join();
  ASSERT_EQ(::kill(d.pid(), SIGCONT), 0);
  engram_disconnect(c);
}

TEST_F(ErrorLists, AServerOnALiveSocketIsRefused) {
  engram_server_options so;
  engram_server_options_init(&so);
  so.socket_path = socket_.c_str();
  so.quiet = 1;
  engram_server* s = nullptr;
  EXPECT_EQ(engram_server_start(&so, &s), ENGRAM_E_EXISTS) << last();
}

}  // namespace
}  // namespace engram::test
