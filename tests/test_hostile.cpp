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
// it (engramd(8), SHARED MEMORY): the arena's free lists and block states,
// and blocks that other clients reserved or that back items.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>

#include "core/chunk_arena.hpp"
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
    auto arena = ChunkArena::attach(arena_seg.data(), arena_seg.size(), ctl.arena_config());
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
        case 4: {  // blocks of its own, written with garbage
          if (!arena.ok()) break;
          auto b = arena->alloc(ctl.hello().client_id, pick(arena->num_classes()));
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
          TableSpec spec = to_spec(t);
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

TEST(HostileClient, TheDaemonAndAnHonestBystanderSurviveIt) {
  Daemon d(std::string("[arena]\nclasses = [ { block_size = \"512\", count = 4096 }, { block_size = \"4KiB\", count = 256 } ]\n") +
           "[[table]]\nname = \"b\"\nmax_size = 1000\n[[table.column]]\nname = \"x\"\ndtype = \"float32\"\nshape = [" +
           std::to_string(kFloats) + "]\n");
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
  engram_column col = {"x", ENGRAM_FLOAT32, 1, {kFloats}};
  engram_writer_options wo;
  engram_writer_options_init(&wo);
  wo.columns = &col;
  wo.num_columns = 1;
  wo.keep_keys = 1;
  engram_writer* w = nullptr;
  ASSERT_EQ(engram_writer_open(c, &wo, &w), ENGRAM_OK) << engram_last_error();
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

}  // namespace
}  // namespace engram::test
