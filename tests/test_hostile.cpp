// A hostile client against engramd, beside a bystander that does honest
// work. The hostile one, in a process of its own, loops over everything it
// can reach: it truncates and reseals every descriptor it holds, zeroes and
// scribbles random bytes over its channels and the doorbells and over the
// arena blocks it reserved, unmaps and maps them again, pushes garbage
// records and rings, sends garbage and truncated control messages (with
// descriptors attached), opens, closes, creates and drops tables at random,
// and hangs up without a word. The bystander writes items whose bytes say
// what they are and samples them the whole time, checking every byte.
//
// What must hold: the bystander never waits more than a second on any
// call and reads only what it wrote; engramd answers status, stops on
// SIGTERM with exit 0, and the bystander's items are all there.
//
// What the hostile client leaves alone, because this version cannot defend
// it (engramd(8), SHARED MEMORY): the bytes of blocks that other clients
// reserved or that back items. The allocation state it cannot reach at
// all (it is in engramd's memory); it asks for blocks and returns garbage
// lists of blocks instead.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>

#include "core/arena_blocks.hpp"
#include "core/chunk_format.hpp"
#include "daemon_fixture.hpp"
#include "engram/engram.h"

namespace engram::test {
namespace {

constexpr uint32_t kFloats = 64;  // per step of the bystander's column

// One hostile session: a connection, its segments, its tables.
class Hostile {
 public:
  Hostile(const std::string& socket, uint64_t seed) : socket_(socket), rng_(seed) {}

  void run_for(std::chrono::milliseconds d) {
    auto end = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < end) session();
  }
  // What it did, counted: sessions, tables opened, scribbles, garbage records
  // pushed, garbage control messages sent, hang-ups.
  std::string counts() const {
    return std::to_string(sessions_) + " " + std::to_string(opens_) + " " + std::to_string(scribbles_) + " " +
           std::to_string(records_) + " " + std::to_string(messages_) + " " + std::to_string(hangups_);
  }

 private:
  struct Open {
    ShmSegment seg;
    int fd = -1;
    Channel chan;
    uint32_t table_id = 0;
    std::string name;
  };

  uint32_t pick(uint32_t n) { return static_cast<uint32_t>(rng_() % n); }

  void scribble(void* p, size_t n) {
    auto* b = static_cast<unsigned char*>(p);
    switch (pick(3)) {
      case 0: std::memset(b, 0, n); break;
      case 1: std::memset(b, 0xff, n); break;
      default:
        for (int i = 0; i < 64; ++i) b[pick(static_cast<uint32_t>(n))] = static_cast<unsigned char>(rng_());
    }
  }

  void session() {
    Control ctl(socket_);
    if (!ctl.ok()) return;
    ++sessions_;
    ShmSegment arena_seg = ctl.map_arena(), bells_seg = ctl.map_bells();
    auto arena = ArenaBlocks::attach(arena_seg.data(), arena_seg.size(), ctl.arena_config());
    std::vector<Open> open;
    std::vector<BlockRef> mine;
    for (int step = 0; step < 60; ++step) {
      switch (pick(10)) {
        case 0: {  // open a table, keep its channel descriptor
          NameRequest n{};
          std::strncpy(n.name, pick(2) ? "b" : "h", sizeof n.name - 1);
          std::vector<char> r;
          ReceivedFds fds;
          if (!ctl.call(ControlType::open_table, &n, sizeof n, &r, &fds).ok() || r.size() != sizeof(OpenReply)) break;
          OpenReply o;
          std::memcpy(&o, r.data(), sizeof o);
          Open t;
          t.fd = fds.take(0);
          t.table_id = o.table_id;
          t.name = n.name;
          int dup = ::dup(t.fd);
          auto seg = ShmSegment::map_fd(dup, o.channel_size, ShmSegment::Access::read_write, "hostile");
          if (!seg.ok()) {
            ::close(t.fd);
            break;
          }
          t.seg = std::move(*seg);
          auto ch = Channel::attach(t.seg.data(), t.seg.size());
          if (ch.ok()) t.chan = *ch;
          open.push_back(std::move(t));
          ++opens_;
          break;
        }
        case 1: {  // try to resize and reseal every descriptor
          for (Open& t : open) {
            (void)!::ftruncate(t.fd, 0);
            (void)!::ftruncate(t.fd, 1 << 20);
            (void)::fcntl(t.fd, F_ADD_SEALS, F_SEAL_WRITE);
          }
          break;
        }
        case 2: {  // scribble over a channel, or the doorbells
          ++scribbles_;
          if (!open.empty() && pick(2)) {
            Open& t = open[pick(static_cast<uint32_t>(open.size()))];
            scribble(t.seg.data(), t.seg.size());
          } else if (bells_seg.data()) {
            scribble(bells_seg.data(), bells_seg.size());
          }
          break;
        }
        case 3: {  // garbage and half-valid records into a request ring
          if (open.empty()) break;
          Open& t = open[pick(static_cast<uint32_t>(open.size()))];
          if (!t.chan.header) break;
          for (int i = 0; i < 8; ++i) {
            RequestRecord r{};
            auto* bytes = reinterpret_cast<unsigned char*>(&r);
            for (size_t k = 0; k < sizeof r; ++k) bytes[k] = static_cast<unsigned char>(rng_());
            r.op = 1 + pick(7);
            r.count = pick(12);
            // An insert over a block of its own, bytes and all scribbled, into
            // its own table: into the bystander's it would be an item the
            // bystander could not tell from its own, which any client may add.
            if (pick(2) && !mine.empty() && t.name == "h") {
              BlockRef b = mine[pick(static_cast<uint32_t>(mine.size()))];
              r.payload.insert.refs[0] = {b.index, b.generation, pick(4), pick(4)};
            }
            records_ += t.chan.requests.try_push(&r).ok();
          }
          auto* bells = static_cast<BellsHeader*>(bells_seg.data());
          if (bells && t.table_id < kMaxTables) bells->slots[t.table_id].bell.ring();
          break;
        }
        case 4: {  // blocks of its own, written with garbage; returns of blocks it may not hold
          if (!arena.ok()) break;
          if (pick(3) == 0) {
            std::vector<BlockRef> junk(1 + pick(kMaxBlockGrant));
            for (BlockRef& j : junk) j = {pick(arena->total_blocks() + 8), pick(4)};
            if (!mine.empty() && pick(2)) junk.push_back(mine[pick(static_cast<uint32_t>(mine.size()))]);
            messages_ += ctl.give_back(junk).code() != Errc::disconnected;
            break;
          }
          auto b = ctl.grant_one(pick(arena->num_classes()));
          if (!b.ok()) break;
          mine.push_back(*b);
          scribble(arena->data(*b), arena->block_size(b->index));
          break;
        }
        case 5: {  // unmap and map again
          if (open.empty()) break;
          Open& t = open[pick(static_cast<uint32_t>(open.size()))];
          size_t size = t.seg.size();
          t.seg = ShmSegment{};
          t.chan = Channel{};
          auto seg = ShmSegment::map_fd(::dup(t.fd), size, ShmSegment::Access::read_write, "hostile");
          if (seg.ok()) {
            t.seg = std::move(*seg);
            if (auto ch = Channel::attach(t.seg.data(), t.seg.size()); ch.ok()) t.chan = *ch;
          }
          break;
        }
        case 6: {  // garbage control messages, some with descriptors, some truncated
          std::vector<unsigned char> junk(pick(300));
          for (auto& c : junk) c = static_cast<unsigned char>(rng_());
          if (junk.size() >= sizeof(ControlHeader) && pick(2)) {
            ControlHeader h{kControlMagic, 1 + pick(13), 0, static_cast<uint32_t>(junk.size() - sizeof(ControlHeader))};
            if (pick(3) == 0) h.size += 1 + pick(100);  // lies about its length
            std::memcpy(junk.data(), &h, sizeof h);
          }
          int fds[2] = {open.empty() ? 0 : open[0].fd, 1};
          messages_ += send_datagram(ctl.fd(), junk.data(), junk.size(), fds, pick(3)).ok();
          ControlHeader h;
          std::vector<char> p;
          (void)recv_message(ctl.fd(), &h, &p, 5);
          break;
        }
        case 7: {  // close a table
          if (open.empty()) break;
          size_t i = pick(static_cast<uint32_t>(open.size()));
          NameRequest n{};
          std::strncpy(n.name, open[i].name.c_str(), sizeof n.name - 1);
          (void)ctl.call(ControlType::close_table, &n, sizeof n, nullptr);
          ::close(open[i].fd);
          open.erase(open.begin() + static_cast<long>(i));
          break;
        }
        case 8: {  // create and drop a table of its own
          TableOptions t;
          t.name = "h";
          t.capacity = 4;
          t.signature = {make_column("x", DType::f32, {kFloats})};
          TableSpec spec = to_spec(Table::check(t).value());
          NameRequest n{};
          std::strncpy(n.name, "h", sizeof n.name - 1);
          if (pick(2)) (void)ctl.call(ControlType::create_table, &spec, sizeof spec, nullptr);
          else (void)ctl.call(ControlType::drop_table, &n, sizeof n, nullptr);
          break;
        }
        default:  // hang up without a word
          if (pick(4) == 0) {
            for (Open& t : open) ::close(t.fd);
            ++hangups_;
            return;
          }
      }
    }
    for (Open& t : open) ::close(t.fd);
  }

  std::string socket_;
  std::mt19937_64 rng_;
  uint64_t sessions_ = 0, opens_ = 0, scribbles_ = 0, records_ = 0, messages_ = 0, hangups_ = 0;
};

// The bystander's step i: every float is i + k / 1000 (k its position).
void fill_step(uint32_t i, float* x) {
  for (uint32_t k = 0; k < kFloats; ++k) x[k] = static_cast<float>(i) + static_cast<float>(k) / 1000.0f;
}
bool step_is_whole(const float* x) {
  float base = x[0];
  for (uint32_t k = 0; k < kFloats; ++k)
    if (x[k] != base + static_cast<float>(k) / 1000.0f) return false;
  return true;
}

// The bystander's writer: one float32 column of kFloats values per step.
engram_writer* bystander_writer(engram_client* c, int32_t insert_timeout_ms, bool keep_keys) {
  engram_column col = {"x", ENGRAM_FLOAT32, 1, {kFloats}};
  engram_writer_options wo;
  engram_writer_options_init(&wo);
  wo.columns = &col;
  wo.num_columns = 1;
  wo.insert_timeout_ms = insert_timeout_ms;
  wo.keep_keys = keep_keys;
  engram_writer* w = nullptr;
  EXPECT_EQ(engram_writer_open(c, &wo, &w), ENGRAM_OK) << engram_last_error();
  return w;
}

// Items from..from+n-1 of the bystander's steps, one step each, into t, flushed.
void write_bystander_items(engram_writer* w, engram_table* t, uint32_t from, uint32_t n) {
  std::vector<float> step(kFloats);
  for (uint32_t i = from; i < from + n; ++i) {
    fill_step(i, step.data());
    const void* cols[1] = {step.data()};
    ASSERT_EQ(engram_writer_append(w, cols), ENGRAM_OK) << "item " << i << ": " << engram_last_error();
    ASSERT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_OK) << "item " << i << ": " << engram_last_error();
  }
  ASSERT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK) << engram_last_error();
}

// A sample of 16 from t, every step of which must be whole: bytes its
// writer wrote, not a hostile client's.
void expect_whole_sample(engram_table* t) {
  std::vector<float> out(16 * kFloats);
  engram_sample_options so;
  engram_sample_options_init(&so);
  so.batch_size = 16;
  void* bufs[1] = {out.data()};
  uint32_t n = 0;
  ASSERT_EQ(engram_sample(t, &so, bufs, nullptr, &n), ENGRAM_OK) << engram_last_error();
  ASSERT_EQ(n, 16u);
  for (uint32_t i = 0; i < n; ++i) EXPECT_TRUE(step_is_whole(&out[i * kFloats])) << "sampled bytes nobody wrote";
}

// A config of table "b" (max_size 100 unless given) for the bystander's
// items over an arena of one class of 256 blocks of 512 bytes.
std::string bystander_config(const std::string& arena = "{ block_size = \"512\", count = 256 }", uint32_t max_size = 100) {
  return "[arena]\nclasses = [ " + arena + " ]\n[[table]]\nname = \"b\"\nmax_size = " + std::to_string(max_size) +
         "\n[[table.column]]\nname = \"x\"\ndtype = \"float32\"\nshape = [" + std::to_string(kFloats) + "]\n";
}

TEST(HostileClient, TheDaemonAndAnHonestBystanderSurviveIt) {
  Daemon d(bystander_config("{ block_size = \"512\", count = 4096 }, { block_size = \"4KiB\", count = 256 }", 1000));
  pid_t hostile = ::fork();
  if (hostile == 0) {
    Hostile h(d.socket(), 12345);
    h.run_for(std::chrono::milliseconds(8000));
    std::ofstream(d.file("hostile.counts")) << h.counts() << "\n";
    std::_Exit(0);
  }
  ASSERT_GT(hostile, 0);

  engram_client* c = connect_c(d.socket());
  ASSERT_NE(c, nullptr);
  engram_table* t = nullptr;
  ASSERT_EQ(engram_table_open(c, "b", &t), ENGRAM_OK) << engram_last_error();
  engram_writer* w = bystander_writer(c, -1, true);
  ASSERT_NE(w, nullptr);
  engram_sample_options so;
  engram_sample_options_init(&so);
  so.batch_size = 16;
  so.timeout_ms = 1000;
  std::vector<float> out(16 * kFloats), step(kFloats);
  double worst_s = 0;
  auto timed = [&](auto&& call) {
    auto t0 = std::chrono::steady_clock::now();
    int rc = call();
    worst_s = std::max(worst_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return rc;
  };
  uint32_t written = 0, sampled = 0;
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(8000);
  while (std::chrono::steady_clock::now() < end) {
    for (int i = 0; i < 16; ++i, ++written) {
      fill_step(written, step.data());
      const void* cols[1] = {step.data()};
      ASSERT_EQ(timed([&] { return engram_writer_append(w, cols); }), ENGRAM_OK) << engram_last_error();
      ASSERT_EQ(timed([&] { return engram_writer_create_item(w, t, 1, 1.0); }), ENGRAM_OK) << engram_last_error();
    }
    ASSERT_EQ(timed([&] { return engram_writer_flush(w, 1000); }), ENGRAM_OK) << engram_last_error();
    void* bufs[1] = {out.data()};
    uint32_t n = 0;
    ASSERT_EQ(timed([&] { return engram_sample(t, &so, bufs, nullptr, &n); }), ENGRAM_OK) << engram_last_error();
    for (uint32_t i = 0; i < n; ++i, ++sampled)
      ASSERT_TRUE(step_is_whole(&out[i * kFloats])) << "sampled bytes the bystander did not write";
  }
  EXPECT_LT(worst_s, 1.0) << "the bystander waited too long on one call";
  EXPECT_GT(sampled, 1000u);
  ASSERT_EQ(wait_exit(hostile, 30000), 0) << "the hostile client crashed or hung";
  {
    std::ifstream in(d.file("hostile.counts"));
    uint64_t sessions = 0, opens = 0, scribbles = 0, records = 0, messages = 0, hangups = 0;
    in >> sessions >> opens >> scribbles >> records >> messages >> hangups;
    std::printf("hostile client: %llu sessions, %llu tables opened, %llu scribbles, %llu garbage records, %llu garbage "
                "messages, %llu hang-ups\n",
                (unsigned long long)sessions, (unsigned long long)opens, (unsigned long long)scribbles,
                (unsigned long long)records, (unsigned long long)messages, (unsigned long long)hangups);
    EXPECT_GE(sessions, 20u) << "the hostile client did too little to show anything";
    EXPECT_GE(opens, 20u);
    EXPECT_GE(scribbles, 20u);
    EXPECT_GE(records, 100u);
    EXPECT_GE(messages, 20u);
  }

  Control ctl(d.socket());
  ASSERT_TRUE(ctl.ok()) << "engramd no longer accepts clients";
  EXPECT_GE(ctl.status().tables, 1u);
  engram_table_info info;
  engram_table_info_init(&info);
  ASSERT_EQ(engram_table_info_get(c, "b", &info), ENGRAM_OK) << engram_last_error();
  EXPECT_EQ(info.size, std::min<uint64_t>(written, 1000)) << "items of the bystander were lost";
  size_t nk = 0;
  std::vector<uint64_t> keys(written);
  ASSERT_EQ(engram_writer_take_keys(w, keys.data(), keys.size(), &nk), ENGRAM_OK);
  EXPECT_EQ(nk, written) << "every item the bystander created was applied";
  engram_writer_close(w);
  engram_table_close(t);
  engram_disconnect(c);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(d.terminate(), 0) << "engramd did not stop cleanly:\n" << read_file(d.log());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  d.start();
}

// Point 5 of the hostile-client review: one client scribbling over the
// whole arena segment, every byte, costs chunk bytes (its own, and any that
// it could write anyway), never the allocation that other clients need:
// the free lists and block states are in engramd's memory. On 19b5492,
// where they were in the segment, the next client's writer failed with
// "free list 0 holds a block that is not free" (or found no free block).
TEST(HostileClient, ScribblingOverTheWholeArenaCostsBytesNotAllocation) {
  Daemon d(bystander_config());
  // The hostile client holds some blocks of its own, then writes every
  // byte of the segment, twice: all ones, then random.
  {
    Control ctl(d.socket());
    ASSERT_TRUE(ctl.ok());
    ShmSegment arena = ctl.map_arena();
    ASSERT_NE(arena.data(), nullptr);
    std::memset(arena.data(), 0xff, arena.size());
    std::mt19937_64 rng(7);
    auto* words = static_cast<uint64_t*>(arena.data());
    for (size_t i = 0; i < arena.size() / 8; ++i) words[i] = rng();
    StatusReply st = ctl.status();
    EXPECT_EQ(st.blocks_free, st.blocks_total) << "a scribble changed the allocation state";
  }
  // An honest client after it: more items than the arena has blocks, so
  // that every block is taken, written, evicted and taken again.
  engram_client* c = connect_c(d.socket());
  ASSERT_NE(c, nullptr);
  engram_table* t = nullptr;
  ASSERT_EQ(engram_table_open(c, "b", &t), ENGRAM_OK) << engram_last_error();
  engram_writer* w = bystander_writer(c, 2000, false);
  ASSERT_NE(w, nullptr);
  write_bystander_items(w, t, 0, 600);
  expect_whole_sample(t);
  engram_writer_close(w);
  engram_table_close(t);
  engram_disconnect(c);
  Control ctl(d.socket());
  ASSERT_TRUE(ctl.ok());
  StatusReply st = ctl.status();
  EXPECT_EQ(st.blocks_reserved, 0u);
  EXPECT_EQ(st.blocks_sealed, 100u) << "one chunk per item of the full table";
  EXPECT_EQ(st.blocks_free + st.blocks_sealed, st.blocks_total);
  EXPECT_EQ(d.terminate(), 0) << read_file(d.log());
  d.start();
}

// Issue 41, also noticed: every arena descriptor allows punching holes
// (fallocate PUNCH_HOLE, or MADV_REMOVE on a mapping): the pages go back to
// the kernel and read as zeros until written again. That is a scribble by
// other means: engramd, which reads sealed chunks when it checkpoints them,
// takes no SIGBUS (a memfd has no size limit to fault on), and the arena
// is whole for the next writer.
TEST(HostileClient, PunchingHolesInTheArenaCostsBytesNotTheServer) {
  std::string ckpt = make_temp_dir();
  Daemon d(bystander_config() + "[checkpoint]\ndir = \"" + ckpt + "\"\n");
  engram_client* c = connect_c(d.socket());
  ASSERT_NE(c, nullptr);
  engram_table* t = nullptr;
  ASSERT_EQ(engram_table_open(c, "b", &t), ENGRAM_OK) << engram_last_error();
  engram_writer* w = bystander_writer(c, 2000, false);
  ASSERT_NE(w, nullptr);
  write_bystander_items(w, t, 0, 100);
  {
    Control ctl(d.socket());
    ASSERT_TRUE(ctl.ok());
    ShmSegment arena = ctl.map_arena();
    ASSERT_NE(arena.data(), nullptr);
    ASSERT_EQ(::madvise(arena.data(), arena.size(), MADV_REMOVE), 0) << std::strerror(errno);
  }
  char path[512];
  EXPECT_EQ(engram_checkpoint(c, 30000, path, sizeof path), ENGRAM_OK) << "engramd reads every punched chunk: "
                                                                       << engram_last_error();
  write_bystander_items(w, t, 100, 600);
  expect_whole_sample(t);
  engram_writer_close(w);
  engram_table_close(t);
  engram_disconnect(c);
  EXPECT_EQ(d.terminate(), 0) << read_file(d.log());
  EXPECT_EQ(std::system(("rm -rf " + ckpt).c_str()), 0);
}

// Blocks come only from the server, and go back to it only from the
// client that holds them reserved: a return of another client's block, a
// sealed one, a free one, a stale generation or an index out of range is
// refused and changes nothing, and the blocks beside it in the same
// message still come back. Grants are checked like any request.
TEST(HostileClient, AClientCanReturnOnlyTheBlocksItHolds) {
  Daemon d(bystander_config());
  engram_client* c = connect_c(d.socket());
  ASSERT_NE(c, nullptr);
  engram_table* t = nullptr;
  ASSERT_EQ(engram_table_open(c, "b", &t), ENGRAM_OK) << engram_last_error();
  engram_writer* w = bystander_writer(c, -1, false);
  ASSERT_NE(w, nullptr);
  std::vector<float> step(kFloats);
  for (uint32_t i = 0; i < 5; ++i) {
    fill_step(i, step.data());
    const void* cols[1] = {step.data()};
    ASSERT_EQ(engram_writer_append(w, cols), ENGRAM_OK) << engram_last_error();
    ASSERT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_OK) << engram_last_error();
  }
  ASSERT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK) << engram_last_error();

  Control h(d.socket());
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h.grant(1, 1).status().code(), Errc::invalid_argument) << "there is no size class 1";
  EXPECT_EQ(h.grant(0, 0).status().code(), Errc::invalid_argument);
  EXPECT_EQ(h.grant(0, kMaxBlockGrant + 1).status().code(), Errc::invalid_argument);
  auto mine = h.grant(0, 4);
  ASSERT_TRUE(mine.ok()) << mine.status().message();
  ASSERT_EQ(mine->size(), 4u);
  // Another client's blocks: its sealed chunks (found by their headers)
  // and the spares its writer holds (every block neither free nor its own
  // chunk nor ours is one).
  ShmSegment seg = h.map_arena();
  auto arena = ArenaBlocks::attach(seg.data(), seg.size(), h.arena_config());
  ASSERT_TRUE(arena.ok());
  std::vector<BlockRef> others;
  for (uint32_t b = 0; b < arena->total_blocks(); ++b)
    for (uint32_t gen = 1; gen <= 3; ++gen) others.push_back({b, gen});  // every block, any likely generation
  for (BlockRef m : *mine)
    others.erase(std::remove_if(others.begin(), others.end(), [&](BlockRef o) { return o.index == m.index; }), others.end());
  StatusReply before = h.status();
  for (size_t i = 0; i < others.size(); i += kMaxBlockGrant) {
    std::vector<BlockRef> part(others.begin() + static_cast<long>(i),
                               others.begin() + static_cast<long>(std::min(others.size(), i + kMaxBlockGrant)));
    Status s = h.give_back(part);
    EXPECT_EQ(s.code(), Errc::invalid_argument) << "blocks " << i << "..: " << s.message();
  }
  EXPECT_EQ(h.give_back({{arena->total_blocks() + 5, 1}, {UINT32_MAX, 1}}).code(), Errc::invalid_argument);
  EXPECT_EQ(h.give_back({}).code(), Errc::invalid_argument) << "an empty return";
  StatusReply after = h.status();
  EXPECT_EQ(after.blocks_free, before.blocks_free) << "someone else's block was freed";
  EXPECT_EQ(after.blocks_reserved, before.blocks_reserved);
  EXPECT_EQ(after.blocks_sealed, before.blocks_sealed);
  // Its own blocks come back, even beside refused ones, and only once.
  BlockRef stale = (*mine)[0];
  ++stale.generation;
  Status s = h.give_back({(*mine)[0], stale, (*mine)[1], (*mine)[1]});
  EXPECT_EQ(s.code(), Errc::invalid_argument) << s.message();
  EXPECT_NE(s.message().find("2 of 4 blocks"), std::string::npos) << s.message();
  EXPECT_EQ(h.status().blocks_free, before.blocks_free + 2);
  EXPECT_TRUE(h.give_back({(*mine)[2], (*mine)[3]}).ok());
  EXPECT_EQ(h.status().blocks_free, before.blocks_free + 4);

  // The honest client's items are all there and whole.
  engram_sample_options so;
  engram_sample_options_init(&so);
  so.batch_size = 5;
  std::vector<float> out(5 * kFloats);
  void* bufs[1] = {out.data()};
  uint32_t n = 0;
  ASSERT_EQ(engram_sample(t, &so, bufs, nullptr, &n), ENGRAM_OK) << engram_last_error();
  ASSERT_EQ(n, 5u);
  for (uint32_t i = 0; i < n; ++i) EXPECT_TRUE(step_is_whole(&out[i * kFloats]));
  engram_writer_close(w);
  engram_table_close(t);
  engram_disconnect(c);
  StatusReply end = h.status();
  EXPECT_EQ(end.blocks_reserved, 0u);
  EXPECT_EQ(end.blocks_sealed, 5u);
}

}  // namespace
}  // namespace engram::test
