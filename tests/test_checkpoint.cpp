// Checkpoints: the manifest format, both write paths, corruption of every
// file, exact round trips through a restarted server for every selector kind
// and for compressed columns, and traffic during a checkpoint of 1 GiB.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <thread>

#include "core/checkpoint_format.hpp"
#include "core/chunk_arena.hpp"
#include "core/chunk_format.hpp"
#include "core/shm.hpp"
#include "server/checkpointer.hpp"
#include "daemon_fixture.hpp"
#include "engram/engram.h"
#include "engram/server.h"
#include "seccomp_deny.hpp"
#include "test_util.hpp"

namespace engram::test {
namespace {
namespace fs = std::filesystem;

std::string last() { return engram_last_error(); }

// A writer of steps of one float32 column of `floats` values, chunk_length 1.
engram_writer* float_writer(engram_client* c, uint32_t floats) {
  engram_column col = {"x", ENGRAM_FLOAT32, 1, {floats}};
  engram_writer_options wo;
  engram_writer_options_init(&wo);
  wo.columns = &col;
  wo.num_columns = 1;
  engram_writer* w = nullptr;
  EXPECT_EQ(engram_writer_open(c, &wo, &w), ENGRAM_OK) << last();
  return w;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void spit(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// --- the manifest -------------------------------------------------------------

Manifest sample_manifest() {
  Manifest m;
  m.engram_version = "0.1.0";
  m.created_unix_ns = 123;
  m.sequence = 7;
  m.files.push_back({kChunksFile, 300, 42});
  m.chunks.push_back({0, 100, 200, 1, 9});
  m.chunks.push_back({100, 200, 200, 0, 8});
  TableState t;
  t.options.name = "replay";
  t.options.capacity = 4;
  t.options.sampler = {SelectorKind::max_heap, 1.0};
  t.options.signature = {make_column("obs", DType::u8, {84, 84}, Codec::delta_zstd, 5)};
  t.counters = {3, 5, 1};
  t.next_seq = 3;
  t.generations = {1, 2, 1, 0};
  t.free_stack = {3, 1};
  t.items.push_back({(1ull << 32) | 0, 0.5, 0, 2, 0, 1, 7, 0});
  t.items.push_back({(1ull << 32) | 2, 1.5, 2, 0, 1, 2, 9, 0});
  t.refs = {{0, 0, 0, 1}, {0, 0, 1, 1}, {1, 0, 0, 1}};
  t.marks = {{3, 10}, {8, 2}};
  m.tables.push_back(t);
  return m;
}

TEST(Manifest, RoundTripsEveryField) {
  Manifest m = sample_manifest();
  std::string bytes = encode_manifest(m);
  auto back = decode_manifest(bytes.data(), bytes.size());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(encode_manifest(*back), bytes);
  EXPECT_EQ(back->tables[0].items[1].sampler_seq, 9u);
  EXPECT_EQ(back->tables[0].options.signature[0].codec, static_cast<uint32_t>(Codec::delta_zstd));
  EXPECT_EQ(back->tables[0].refs[2].block, 1u);
  ASSERT_EQ(back->tables[0].marks.size(), 2u);
  EXPECT_EQ(back->tables[0].marks[1].producer, 8u);
  EXPECT_EQ(back->tables[0].marks[1].sequence, 2u);
}

// Checkpoints of format 1 (before delivery marks) still restore, with none.
TEST(Manifest, AFormatOneManifestReadsWithNoDeliveryMarks) {
  Manifest m = sample_manifest();
  m.format_version = 1;
  std::string bytes = encode_manifest(m);
  auto back = decode_manifest(bytes.data(), bytes.size());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->format_version, 1u);
  EXPECT_TRUE(back->tables[0].marks.empty());
  EXPECT_EQ(back->tables[0].items.size(), 2u);
}

TEST(Manifest, EveryTruncationAndFlipIsRefused) {
  std::string bytes = encode_manifest(sample_manifest());
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto r = decode_manifest(bytes.data(), n);
    ASSERT_FALSE(r.ok()) << "accepted the first " << n << " bytes";
    EXPECT_NE(r.status().message().find("MANIFEST"), std::string::npos);
  }
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string b = bytes;
    b[i] ^= 0x20;
    auto r = decode_manifest(b.data(), b.size());
    ASSERT_FALSE(r.ok()) << "accepted a flip at byte " << i;
  }
}

// Until every selector kind checked the exponent, a uniform or heap table
// could be created with a NaN or negative one that nothing read; its
// checkpoints must still restore, with the exponent a valid 1.
TEST(Manifest, AnExponentNoSelectorReadsRestoresAsOneAndAPrioritizedOneIsKept) {
  Manifest m = sample_manifest();
  m.tables[0].options.sampler = {SelectorKind::max_heap, std::nan("")};
  m.tables[0].options.remover = {SelectorKind::fifo, -2.0};
  TableState p = m.tables[0];
  p.options.name = "prio";
  p.options.sampler = {SelectorKind::prioritized, 0.6};
  m.tables.push_back(p);
  std::string bytes = encode_manifest(m);
  auto back = decode_manifest(bytes.data(), bytes.size());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->tables[0].options.sampler.exponent, 1.0);
  EXPECT_EQ(back->tables[0].options.remover.exponent, 1.0);
  EXPECT_TRUE(Table::check(back->tables[0].options).ok()) << Table::check(back->tables[0].options).status().message();
  EXPECT_EQ(back->tables[1].options.sampler.exponent, 0.6);
}

TEST(Manifest, ANewerFormatIsRefusedNamingBothVersions) {
  Manifest m = sample_manifest();
  m.format_version = kCheckpointFormat + 1;
  std::string bytes = encode_manifest(m);
  auto r = decode_manifest(bytes.data(), bytes.size());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Errc::layout_mismatch);
  EXPECT_NE(r.status().message().find("version " + std::to_string(kCheckpointFormat + 1)), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("(" + std::to_string(kCheckpointFormat) + ")"), std::string::npos)
      << r.status().message();
}

// --- writing and reading, without a server -------------------------------------

// An arena and a table in private memory, with items over random chunks.
struct Fixture {
  std::vector<char> table_mem;
  test::LocalArena local{ArenaConfig{{{4096, 512}}}};
  ChunkArena& arena = local.arena;
  Table table;
  TableOptions opts;
  std::mt19937_64 rng{5};

  Fixture() {
    opts.name = "t";
    opts.capacity = 300;
    opts.sampler = {SelectorKind::prioritized, 0.6};
    opts.signature = {make_column("x", DType::f32, {100})};
    size_t need = Table::bytes_needed(test::checked(opts));
    table_mem.resize(need + 64);
    table = *Table::format(aligned(table_mem), need, test::checked(opts));
    uint64_t sig = signature_hash(opts.signature.data(), 1);
    for (int i = 0; i < 200; ++i) {
      BlockRef b = *arena.alloc(1, 0);
      ChunkHeader h{kChunkMagic, 2, 2, 1, sig, 1, 0, {}};
      char* d = static_cast<char*>(arena.data(b));
      std::memcpy(d, &h, sizeof h);
      // Half the chunks compress (repeated values), half do not.
      for (int k = 0; k < 200; ++k) {
        float v = i % 2 ? static_cast<float>(rng() % 1000) : 1.0f;
        std::memcpy(d + chunk_column_offset(opts.signature.data(), 0, 2) + 4 * k, &v, 4);
      }
      EXPECT_TRUE(arena.seal(1, b, 1).ok());
      ChunkRef ref{b.index, b.generation, static_cast<uint32_t>(i % 2), 1};
      EXPECT_TRUE(table.insert(1.0 + i, &ref, 1).ok());
    }
  }
  static char* aligned(std::vector<char>& v) {
    return v.data() + (64 - reinterpret_cast<uintptr_t>(v.data()) % 64) % 64;
  }
  Snapshot snapshot() {
    Snapshot s;
    EXPECT_TRUE(s.add(table.snapshot(), arena).ok());
    return s;
  }
};

CheckpointConfig config_in(const std::string& dir, IoMode io) {
  CheckpointConfig c;
  c.dir = dir;
  c.io = io;
  return c;
}

TEST(CheckpointFiles, BothWritePathsWriteTheSameBytesWithAndWithoutODirect) {
  Fixture f;
  std::string dir = make_temp_dir();
  auto a = write_checkpoint(f.snapshot(), f.arena, 2, config_in(dir + "/uring", IoMode::automatic), 1, "0.1.0", nullptr);
  auto b = write_checkpoint(f.snapshot(), f.arena, 2, config_in(dir + "/pwrite", IoMode::pwrite), 1, "0.1.0", nullptr);
  CheckpointConfig buffered = config_in(dir + "/buffered", IoMode::automatic);
  buffered.direct = false;
  auto c = write_checkpoint(f.snapshot(), f.arena, 2, buffered, 1, "0.1.0", nullptr);
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(slurp(c->path + "/" + kChunksFile) == slurp(a->path + "/" + kChunksFile))
      << "O_DIRECT (padded, then trimmed) and buffered chunk files differ";
  // io_uring works on the machines engram is tested on; where a kernel or a
  // seccomp profile forbids it, say so instead of comparing pwrite to itself.
  if (!std::getenv("ENGRAM_NO_IO_URING")) {
    EXPECT_EQ(a->io, IoPath::io_uring) << "io_uring is unavailable here; set ENGRAM_NO_IO_URING=1 to accept that";
  }
  EXPECT_EQ(b->io, IoPath::pwrite);
  std::string ca = slurp(a->path + "/" + kChunksFile), cb = slurp(b->path + "/" + kChunksFile);
  EXPECT_GT(ca.size(), 0u);
  EXPECT_TRUE(ca == cb) << "chunk files differ";
  // The manifests differ only in their creation time.
  std::string ma = slurp(a->path + "/" + kManifestFile), mb = slurp(b->path + "/" + kManifestFile);
  auto da = decode_manifest(ma.data(), ma.size()), db = decode_manifest(mb.data(), mb.size());
  ASSERT_TRUE(da.ok() && db.ok());
  db->created_unix_ns = da->created_unix_ns;
  EXPECT_EQ(encode_manifest(*db), ma);
  // Every pin went back: the chunks are held by the items alone.
  for (const ChunkRef& r : f.table.snapshot().refs) EXPECT_EQ(f.arena.refcount_or_owner(r.block), 1u);
  fs::remove_all(dir);
}

// Reads a whole checkpoint as a restore does; the first failure.
Status read_all(const std::string& path) {
  auto r = CheckpointReader::open(path);
  if (!r.ok()) return r.status();
  std::vector<char> buf;
  for (uint32_t i = 0; i < r->manifest().chunks.size(); ++i) {
    buf.resize(r->manifest().chunks[i].raw_bytes);
    if (Status s = r->read_chunk(i, buf.data()); !s.ok()) return s;
  }
  return r->finish();
}

// Where a seccomp profile denies io_uring (Docker's default does), a
// checkpoint is written with pwrite instead, the same bytes, and the
// reason handed to the log names the cause. In a forked child: the filter
// cannot be taken back.
TEST(CheckpointFiles, WhereSeccompDeniesIoUringPwriteWritesTheSameBytesAndSaysWhy) {
  Fixture f;
  std::string dir = make_temp_dir();
  auto ref = write_checkpoint(f.snapshot(), f.arena, 2, config_in(dir + "/ref", IoMode::automatic), 1, "0.1.0", nullptr);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // no gtest assertions here: the exit code and the files say what happened
    static std::string said;  // write_checkpoint takes a plain function to log with
    std::string refused = deny_syscall(__NR_io_uring_setup, EPERM);
    if (!refused.empty()) {
      spit(dir + "/said", refused);
      _exit(2);
    }
    auto r = write_checkpoint(f.snapshot(), f.arena, 2, config_in(dir + "/denied", IoMode::automatic), 1, "0.1.0",
                              [](const std::string& why) { said += why; });
    spit(dir + "/said", r.ok() ? said : r.status().message());
    _exit(!r.ok() ? 3 : r->io != IoPath::pwrite ? 4 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  std::string said = slurp(dir + "/said");
  ASSERT_TRUE(WIFEXITED(status)) << "the child died: " << status;
  ASSERT_NE(WEXITSTATUS(status), 2) << "no seccomp filter here: " << said;
  ASSERT_NE(WEXITSTATUS(status), 3) << "the checkpoint failed: " << said;
  ASSERT_NE(WEXITSTATUS(status), 4) << "io_uring was used despite the filter";
  ASSERT_EQ(WEXITSTATUS(status), 0);
  EXPECT_NE(said.find("io_uring is unavailable (Operation not permitted: a seccomp profile or sysctl forbids it)"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("pwrite"), std::string::npos) << said;
  std::string denied = dir + "/denied/" + fs::path(ref->path).filename().string();  // the same sequence number
  std::string a = slurp(ref->path + "/" + kChunksFile), b = slurp(denied + "/" + kChunksFile);
  EXPECT_GT(a.size(), 0u);
  EXPECT_TRUE(a == b) << "the pwrite fallback wrote other chunk bytes";
  Status read = read_all(denied);
  EXPECT_TRUE(read.ok()) << read.message();
  fs::remove_all(dir);
}

TEST(CheckpointFiles, EveryKindOfDamageToEveryFileIsNamed) {
  Fixture f;
  std::string dir = make_temp_dir();
  auto good = write_checkpoint(f.snapshot(), f.arena, 2, config_in(dir, IoMode::automatic), 1, "0.1.0", nullptr);
  ASSERT_TRUE(good.ok()) << good.status().message();
  ASSERT_TRUE(read_all(good->path).ok());
  for (const char* file : {kManifestFile, kChunksFile}) {
    std::string path = good->path + "/" + file;
    std::string orig = slurp(path);
    std::vector<std::pair<std::string, std::string>> damages = {
        {"truncated", orig.substr(0, orig.size() / 2)}, {"emptied", ""}};
    for (size_t at : {size_t{0}, orig.size() / 3, orig.size() - 1}) {
      std::string b = orig;
      b[at] ^= 0x01;
      damages.push_back({"flipped at " + std::to_string(at), b});
    }
    for (auto& [what, bytes] : damages) {
      spit(path, bytes);
      Status s = read_all(good->path);
      EXPECT_FALSE(s.ok()) << file << " " << what;
      EXPECT_NE(s.message().find(file), std::string::npos) << file << " " << what << ": " << s.message();
    }
    fs::remove(path);
    Status s = read_all(good->path);
    EXPECT_FALSE(s.ok()) << file << " deleted";
    EXPECT_NE(s.message().find(file), std::string::npos) << s.message();
    spit(path, orig);
    ASSERT_TRUE(read_all(good->path).ok()) << "restored bytes read again";
  }
  fs::remove_all(dir);
}

TEST(CheckpointFiles, OnlyTheNewestKAreKept) {
  Fixture f;
  std::string dir = make_temp_dir();
  CheckpointConfig c = config_in(dir, IoMode::pwrite);
  c.keep = 2;
  for (uint64_t seq = 1; seq <= 4; ++seq) ASSERT_TRUE(write_checkpoint(f.snapshot(), f.arena, 2, c, seq, "x", nullptr).ok());
  auto all = list_checkpoints(dir);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(checkpoint_sequence(all[0]), 4u);
  EXPECT_EQ(checkpoint_sequence(all[1]), 3u);
  fs::remove_all(dir);
}

// --- through a server -----------------------------------------------------------

constexpr const char* kSelectors[] = {"uniform", "prioritized", "fifo", "lifo", "max_heap", "min_heap"};

class ServerCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir();
    socket_ = dir_ + "/engram.sock";
    toml_ = "socket = \"" + socket_ + "\"\n[checkpoint]\ndir = \"" + dir_ + "/ckpt\"\nkeep = 5\n";
  }
  void TearDown() override {
    stop();
    fs::remove_all(dir_);
  }
  void start(const std::string& extra_toml = "") {
    engram_server_options so;
    engram_server_options_init(&so);
    std::string text = toml_ + extra_toml;
    so.config_toml = text.c_str();
    so.quiet = 1;
    ASSERT_EQ(engram_server_start(&so, &server_), ENGRAM_OK) << last();
    c_ = connect_c(socket_);
    ASSERT_NE(c_, nullptr);
  }
  void stop() {
    engram_disconnect(c_);
    c_ = nullptr;
    if (server_) {
      EXPECT_EQ(engram_server_stop(server_), ENGRAM_OK);
    }
    server_ = nullptr;
  }
  std::string checkpoint() {
    char path[512];
    EXPECT_EQ(engram_checkpoint(c_, 60000, path, sizeof path), ENGRAM_OK) << last();
    return path;
  }
  // Fills the tables, checkpoints, draws 7 items from "fifo", checkpoints
  // again and stops: the newer checkpoint's path, and fifo's samples as of
  // the older one (what a fallback to it restores).
  std::pair<std::string, uint64_t> two_checkpoints();
  engram_table_info info(const char* name) {
    engram_table_info i;
    engram_table_info_init(&i);
    EXPECT_EQ(engram_table_info_get(c_, name, &i), ENGRAM_OK) << last();
    return i;
  }

  // `items` items of 1 MiB of random floats (zstd cannot shrink them) into
  // table "big", whose one column is float32 [262144].
  void fill_big(int items) {
    engram_table* big = nullptr;
    ASSERT_EQ(engram_table_open(c_, "big", &big), ENGRAM_OK) << last();
    engram_writer* w = float_writer(c_, 262144);
    ASSERT_NE(w, nullptr);
    std::vector<float> x(262144);
    std::mt19937 rng(1);
    for (int i = 0; i < items; ++i) {
      for (auto& v : x) v = static_cast<float>(rng());
      const void* d[1] = {x.data()};
      ASSERT_EQ(engram_writer_append(w, d), ENGRAM_OK) << last();
      ASSERT_EQ(engram_writer_create_item(w, big, 1, 1.0), ENGRAM_OK) << last();
    }
    ASSERT_EQ(engram_writer_flush(w, 60000), ENGRAM_OK) << last();
    engram_writer_close(w);
    engram_table_close(big);
  }

  std::string dir_, socket_, toml_;
  engram_server* server_ = nullptr;
  engram_client* c_ = nullptr;
};

// One table per selector kind, plus a compressed one; items sampled,
// updated and deleted so that every counter and order has something in it.
void fill(engram_client* c, bool compressed_too) {
  engram_column cols[2] = {{"obs", ENGRAM_UINT8, 1, {64}}, {"n", ENGRAM_UINT32, 0, {}}};
  engram_compression comp[2] = {{ENGRAM_CODEC_DELTA_ZSTD, 0}, {ENGRAM_CODEC_NONE, 0}};
  std::vector<std::string> names;
  for (int k = 0; k < 6; ++k) names.push_back(kSelectors[k]);
  if (compressed_too) names.push_back("compressed");
  for (size_t k = 0; k < names.size(); ++k) {
    engram_table_options o;
    engram_table_options_init(&o);
    o.name = names[k].c_str();
    o.max_size = 150;
    o.sampler = k < 6 ? static_cast<int32_t>(k + 1) : static_cast<int32_t>(ENGRAM_MAX_HEAP);
    o.remover = ENGRAM_FIFO;
    o.priority_exponent = 0.7;
    o.columns = cols;
    o.num_columns = 2;
    if (k == 6) {
      o.compression = comp;
    }
    ASSERT_EQ(engram_table_create(c, &o), ENGRAM_OK) << last();
    engram_table* t = nullptr;
    ASSERT_EQ(engram_table_open(c, o.name, &t), ENGRAM_OK) << last();
    engram_writer_options wo;
    engram_writer_options_init(&wo);
    wo.columns = cols;
    wo.num_columns = 2;
    wo.chunk_length = 4;
    wo.keep_keys = 1;
    if (k == 6) {
      wo.compression = comp;
    }
    engram_writer* w = nullptr;
    ASSERT_EQ(engram_writer_open(c, &wo, &w), ENGRAM_OK) << last();
    std::mt19937 rng(static_cast<unsigned>(k));
    for (uint32_t i = 0; i < 200; ++i) {  // 50 evicted
      uint8_t obs[64];
      for (auto& b : obs) b = static_cast<uint8_t>(i + (rng() & 3));
      const void* data[2] = {obs, &i};
      ASSERT_EQ(engram_writer_append(w, data), ENGRAM_OK) << last();
      ASSERT_EQ(engram_writer_create_item(w, t, 1, 0.5 + (i * 37 % 11)), ENGRAM_OK) << last();
    }
    ASSERT_EQ(engram_writer_flush(w, 10000), ENGRAM_OK) << last();
    std::vector<uint64_t> keys(200);
    size_t nk = 0;
    ASSERT_EQ(engram_writer_take_keys(w, keys.data(), keys.size(), &nk), ENGRAM_OK);
    engram_writer_close(w);
    std::vector<double> prios = {9.5, 0.25, 3.0};
    ASSERT_EQ(engram_update_priorities(t, &keys[160], prios.data(), 3, nullptr), ENGRAM_OK) << last();
    ASSERT_EQ(engram_delete_items(t, &keys[170], 2, nullptr), ENGRAM_OK) << last();
    engram_sample_options so;
    engram_sample_options_init(&so);
    so.batch_size = 16;
    std::vector<uint8_t> obs(16 * 64);
    std::vector<uint32_t> n(16);
    void* bufs[2] = {obs.data(), n.data()};
    uint32_t count = 0;
    ASSERT_EQ(engram_sample(t, &so, bufs, nullptr, &count), ENGRAM_OK) << last();
    engram_table_close(t);
  }
}

// What a table gives when drained by its sampler: (key, data) in order.
std::vector<std::pair<uint64_t, std::string>> draw(engram_client* c, const char* name, uint32_t n) {
  engram_table* t = nullptr;
  EXPECT_EQ(engram_table_open(c, name, &t), ENGRAM_OK) << last();
  std::vector<std::pair<uint64_t, std::string>> out;
  engram_sample_options so;
  engram_sample_options_init(&so);
  uint8_t obs[64];
  uint32_t num;
  void* bufs[2] = {obs, &num};
  for (uint32_t i = 0; i < n; ++i) {
    engram_sample_info si;
    uint32_t count = 0;
    EXPECT_EQ(engram_sample(t, &so, bufs, &si, &count), ENGRAM_OK) << last();
    std::vector<double> zero = {0.0};
    // Heaps would draw the same item again; move it to the back.
    if (std::string(name).find("heap") != std::string::npos || std::string(name) == "compressed") {
      EXPECT_EQ(engram_update_priorities(t, &si.key, zero.data(), 1, nullptr), ENGRAM_OK);
    }
    out.emplace_back(si.key, std::string(reinterpret_cast<char*>(obs), 64) + std::to_string(num) + "/" +
                                 std::to_string(si.times_sampled) + "/" + std::to_string(si.priority));
  }
  engram_table_close(t);
  return out;
}

Manifest manifest_of(const std::string& path) {
  std::string b = slurp(path + "/" + kManifestFile);
  auto m = decode_manifest(b.data(), b.size());
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? *m : Manifest{};
}

// Each table's items with their data, as plain text to compare.
std::map<std::string, std::string> dump(const std::string& path) {
  auto r = CheckpointReader::open(path);
  EXPECT_TRUE(r.ok()) << r.status().message();
  std::map<std::string, std::string> out;
  if (!r.ok()) return out;
  std::vector<std::string> chunks;
  for (uint32_t i = 0; i < r->manifest().chunks.size(); ++i) {
    std::string b(r->manifest().chunks[i].raw_bytes, '\0');
    EXPECT_TRUE(r->read_chunk(i, b.data()).ok());
    chunks.push_back(b);
  }
  for (const TableState& t : r->manifest().tables) {
    std::string& s = out[t.options.name];
    s += "inserts " + std::to_string(t.counters.inserts) + " samples " + std::to_string(t.counters.samples) +
         // A restored table numbers on from the clock (first_sequence),
         // past its saved counter: checked below; the rest must be equal.
         " deletes " + std::to_string(t.counters.deletes) + " seqs " +
         std::to_string(t.sampler_seq) + "," + std::to_string(t.remover_seq) + " updates " +
         std::to_string(t.stats.updates) + " bytes " + std::to_string(t.stats.bytes_raw) + "/" +
         std::to_string(t.stats.bytes_stored) + "\n";
    for (uint32_t g : t.generations) s += std::to_string(g) + ",";
    s += "\nfree";
    for (uint32_t f : t.free_stack) s += " " + std::to_string(f);
    s += "\n";
    for (const ItemState& it : t.items) {
      s += std::to_string(it.key) + " p" + std::to_string(it.priority) + " seq" + std::to_string(it.inserted_seq) +
           " n" + std::to_string(it.times_sampled) + " ages" + std::to_string(it.sampler_seq) + "," +
           std::to_string(it.remover_seq) + " data ";
      for (uint32_t k = 0; k < it.num_refs; ++k) {
        const ChunkRef& ref = t.refs[it.first_ref + k];
        s += std::to_string(ref.offset) + "+" + std::to_string(ref.length) + ":" +
             std::to_string(checksum(chunks[ref.block].data(), chunks[ref.block].size())) + " ";
      }
      s += "\n";
    }
  }
  return out;
}

TEST_F(ServerCheckpoint, RestoreIsExactForEverySelectorAndCompressedColumns) {
  start();
  fill(c_, true);
  std::map<std::string, engram_table_info> before;
  for (const char* n : {"uniform", "prioritized", "fifo", "lifo", "max_heap", "min_heap", "compressed"})
    before[n] = info(n);
  std::string a = checkpoint();
  ASSERT_TRUE(fs::exists(a + "/" + kManifestFile)) << a;
  // What the deterministic kinds give next, before the restart...
  std::map<std::string, std::vector<std::pair<uint64_t, std::string>>> next;
  for (const char* n : {"fifo", "lifo", "max_heap", "min_heap", "compressed"}) next[n] = draw(c_, n, 20);
  stop();

  start();  // restores the newest checkpoint
  for (auto& [n, i] : before) {
    engram_table_info j = info(n.c_str());
    EXPECT_EQ(j.size, i.size) << n;
    EXPECT_EQ(j.inserts, i.inserts) << n;
    EXPECT_EQ(j.samples, i.samples) << n;
    EXPECT_EQ(j.deletes, i.deletes) << n;
    EXPECT_EQ(j.updates, i.updates) << n;
    EXPECT_EQ(j.bytes_raw, i.bytes_raw) << n;
    EXPECT_EQ(j.bytes_stored, i.bytes_stored) << n;
  }
  std::string b = checkpoint();
  EXPECT_NE(a, b);
  auto da = dump(a), db = dump(b);
  ASSERT_EQ(da.size(), 7u);
  for (auto& [n, text] : da) EXPECT_EQ(db[n], text) << "table " << n << " differs after a restore";
  auto ma = CheckpointReader::open(a), mb = CheckpointReader::open(b);
  ASSERT_TRUE(ma.ok() && mb.ok());
  for (size_t i = 0; i < ma->manifest().tables.size(); ++i)
    EXPECT_GT(mb->manifest().tables[i].next_seq, ma->manifest().tables[i].next_seq)
        << "numbers handed out after a checkpoint are never handed out again after a restore";
  // ...and after: the same items, with the same data, in the same order.
  for (auto& [n, want] : next) EXPECT_EQ(draw(c_, n.c_str(), 20), want) << n;
}

// A checkpoint does not store ItemSlot::plain_steps: the restore checks each
// one-chunk item's chunk as an insert does, so that samplers of a restored
// item find its columns without reading the chunk's header. Rewriting every
// header after the restore shows which way they went: an item sampled by
// the layout checked at restore comes back whole, one whose header is read
// is refused as corrupt.
TEST_F(ServerCheckpoint, RestoredOneChunkItemsSampleByTheLayoutCheckedAtRestore) {
  start();
  fill(c_, false);  // plain chunks of 4 steps, items of one step
  checkpoint();
  stop();
  start();  // restores it
  Control ctl(socket_);
  ASSERT_TRUE(ctl.ok());
  ShmSegment seg = ctl.map_arena();
  auto arena = ArenaBlocks::attach(seg.data(), seg.size(), ctl.arena_config());
  ASSERT_TRUE(arena.ok()) << arena.status().message();
  uint32_t rewritten = 0;
  for (uint32_t b = 0; b < arena->total_blocks(); ++b) {
    if (!ctl.committed_at_hello(*arena, b)) continue;
    auto* h = static_cast<ChunkHeader*>(arena->data({b, 0}));
    if (h->magic != kChunkMagic) continue;
    h->magic = 0;
    h->capacity_steps = 1000000;
    ++rewritten;
  }
  EXPECT_GE(rewritten, 150u / 4) << "the restored chunks of one table at least";

  engram_table* t = nullptr;
  ASSERT_EQ(engram_table_open(c_, "uniform", &t), ENGRAM_OK) << last();
  engram_sample_options so;
  engram_sample_options_init(&so);
  so.batch_size = 32;
  std::vector<uint8_t> obs(32 * 64);
  std::vector<uint32_t> n(32);
  void* bufs[2] = {obs.data(), n.data()};
  uint32_t count = 0;
  ASSERT_EQ(engram_sample(t, &so, bufs, nullptr, &count), ENGRAM_OK) << last();
  ASSERT_EQ(count, 32u);
  for (uint32_t i = 0; i < count; ++i)  // fill(): every obs byte is n + 0..3
    for (uint32_t j = 0; j < 64; ++j)
      ASSERT_LE(static_cast<uint8_t>(obs[i * 64 + j] - n[i]), 3) << "item " << i << " byte " << j;
  engram_table_close(t);
}

std::pair<std::string, uint64_t> ServerCheckpoint::two_checkpoints() {
  start();
  fill(c_, false);
  checkpoint();
  uint64_t older_samples = info("fifo").samples;
  draw(c_, "fifo", 7);
  std::string newer = checkpoint();
  stop();
  return {newer, older_samples};
}

// [checkpoint] restore_from names the checkpoint to restore (an embedded
// server's engramd --restore: a learner resumes with the tables of its own
// checkpoint, not a newer one), and a missing one fails the start.
TEST_F(ServerCheckpoint, RestoreFromRestoresTheNamedCheckpointNotTheNewest) {
  start();
  fill(c_, false);
  std::string older = checkpoint();
  uint64_t older_samples = info("fifo").samples;
  draw(c_, "fifo", 7);
  checkpoint();
  stop();
  start("restore_from = \"" + older + "\"\n");
  EXPECT_EQ(info("fifo").samples, older_samples) << "not the named checkpoint";
  stop();
  engram_server_options so;
  engram_server_options_init(&so);
  std::string text = toml_ + "restore_from = \"" + dir_ + "/ckpt/none\"\n";
  so.config_toml = text.c_str();
  so.quiet = 1;
  EXPECT_NE(engram_server_start(&so, &server_), ENGRAM_OK);
  EXPECT_NE(last().find("cannot restore " + dir_ + "/ckpt/none"), std::string::npos) << last();
  server_ = nullptr;
}

TEST_F(ServerCheckpoint, ADamagedNewestCheckpointFallsBackToThePreviousOne) {
  auto [newer, older_samples] = two_checkpoints();
  struct Damage {
    const char* file;
    const char* how;
  };
  for (Damage d : {Damage{kManifestFile, "flip"}, Damage{kManifestFile, "truncate"}, Damage{kManifestFile, "delete"},
                   Damage{kChunksFile, "flip"}, Damage{kChunksFile, "truncate"}, Damage{kChunksFile, "delete"}}) {
    std::string path = newer + "/" + d.file;
    std::string orig = slurp(path);
    if (std::string(d.how) == "flip") {
      std::string b = orig;
      b[b.size() / 2] ^= 0x10;
      spit(path, b);
    } else if (std::string(d.how) == "truncate") {
      spit(path, orig.substr(0, orig.size() - 5));
    } else {
      fs::remove(path);
    }
    start();
    EXPECT_EQ(info("fifo").samples, older_samples) << d.file << " " << d.how << ": not the previous checkpoint";
    EXPECT_EQ(info("uniform").size, 148u) << d.file << " " << d.how;
    stop();
    spit(path, orig);
  }
  start();
  EXPECT_EQ(info("fifo").samples, older_samples + 7) << "the repaired newest is used again";
}

// Lies with a valid checksum: a manifest rewritten (encode_manifest seals
// it anew) so that it parses, but describes state the API would never have
// made. Each is refused whole, and the previous checkpoint is used.
TEST_F(ServerCheckpoint, AManifestThatLiesWithAGoodChecksumIsRefusedAndThePreviousOneUsed) {
  auto [newer, older_samples] = two_checkpoints();
  const std::string path = newer + "/" + kManifestFile;
  const std::string orig = slurp(path);
  struct Lie {
    const char* what;
    std::function<void(Manifest&)> tell;
  };
  std::vector<Lie> lies = {
      {"a slice past its chunk's steps", [](Manifest& m) { m.tables[0].refs[0].offset = 1000; }},
      {"a slice longer than its chunk", [](Manifest& m) { m.tables[0].refs[0].length = 1000; }},
      {"an empty slice", [](Manifest& m) { m.tables[0].refs[0].length = 0; }},
      {"a chunk number past the chunks", [](Manifest& m) { m.tables[0].refs[0].block = 1u << 30; }},
      {"min_diff above max_diff", [](Manifest& m) {
         m.tables[2].options.rate_limiter.min_diff = 10;
         m.tables[2].options.rate_limiter.max_diff = 1;
       }},
      {"an infinite min_diff", [](Manifest& m) {
         m.tables[2].options.rate_limiter.min_diff = std::numeric_limits<double>::infinity();
       }},
      {"weights that sum past the limit", [](Manifest& m) {
         for (auto& t : m.tables)
           if (t.options.sampler.kind == SelectorKind::prioritized) {
             t.options.sampler.exponent = 1.0;
             for (auto& it : t.items) it.priority = 1e308;
           }
       }},
  };
  for (const Lie& lie : lies) {
    auto decoded = decode_manifest(orig.data(), orig.size());
    ASSERT_TRUE(decoded.ok()) << decoded.status().message();
    Manifest m = *decoded;
    ASSERT_EQ(m.tables.size(), 6u);
    lie.tell(m);
    spit(path, encode_manifest(m));
    start();
    EXPECT_EQ(info("fifo").samples, older_samples) << lie.what << ": restored, not refused";
    stop();
  }
  spit(path, orig);
  start();
  EXPECT_EQ(info("fifo").samples, older_samples + 7) << "the repaired newest is used again";
}

TEST_F(ServerCheckpoint, WithNoGoodCheckpointTheServerStartsEmptyNotHalfLoaded) {
  start();
  fill(c_, false);
  std::string p = checkpoint();
  stop();
  // Damage the last chunk: the restore has loaded every other one into the
  // arena by the time it finds out, and must give them all back.
  std::string chunks = slurp(p + "/" + kChunksFile);
  chunks[chunks.size() - 2] ^= 0x40;
  spit(p + "/" + kChunksFile, chunks);
  // With nothing good left, the server starts empty and says so (engramd
  // --restore, which names one checkpoint, refuses to start instead: see
  // test_engramd).
  start();
  engram_table_info i;
  engram_table_info_init(&i);
  EXPECT_EQ(engram_table_info_get(c_, "fifo", &i), ENGRAM_E_NOT_FOUND) << "a table was half-loaded";
  Control ctl(socket_);
  ASSERT_TRUE(ctl.ok());
  StatusReply st = ctl.status();
  EXPECT_EQ(st.tables, 0u);
  EXPECT_EQ(st.blocks_sealed, 0u) << "chunks of the refused checkpoint stayed in the arena";
  EXPECT_EQ(st.blocks_reserved, 0u);
  EXPECT_EQ(st.blocks_free, st.blocks_total);
}

TEST_F(ServerCheckpoint, PeriodicCheckpointsAreWritten) {
  toml_ += "interval_s = 1\n";
  start();
  fill(c_, false);
  // The first is due a second after the start, the next a second later.
  std::vector<std::string> all;
  for (int i = 0; i < 100 && all.size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    all = list_checkpoints(dir_ + "/ckpt");
  }
  ASSERT_GE(all.size(), 2u) << "no periodic checkpoints within 10 s";
  Manifest m = manifest_of(all.front());
  EXPECT_EQ(m.tables.size(), 6u);
  EXPECT_GT(m.sequence, checkpoint_sequence(all.back()));
}

TEST_F(ServerCheckpoint, CheckpointsNeedADirectory) {
  toml_ = "socket = \"" + socket_ + "\"\n";
  start();
  char path[256];
  EXPECT_EQ(engram_checkpoint(c_, 1000, path, sizeof path), ENGRAM_E_INVALID);
  EXPECT_NE(last().find("[checkpoint] dir"), std::string::npos) << last();
}

// A client that stopped waiting for its checkpoint and hung up is no
// longer told of it: the next client, whose connection may take the same
// descriptor number in the server, hears of its own checkpoint, not of
// the one the first asked for.
TEST_F(ServerCheckpoint, AnAnswerGoesOnlyToAClientStillThere) {
  // Paced to 1 MB/s, 3 MiB of chunks take about 3 s to write.
  start("max_mb_per_s = 1\n[arena]\nclasses = [ { block_size = \"4KiB\", count = 64 }, "
        "{ block_size = \"1032KiB\", count = 16 } ]\n"
        "[[table]]\nname = \"big\"\nmax_size = 3\n[[table.column]]\nname = \"x\"\ndtype = \"float32\"\nshape = [262144]\n");
  ASSERT_NO_FATAL_FAILURE(fill_big(3));
  char path[512];
  engram_client* first = connect_c(socket_);
  ASSERT_NE(first, nullptr);
  ASSERT_EQ(engram_checkpoint(first, 100, path, sizeof path), ENGRAM_E_TIMEOUT) << "the checkpoint was not slow";
  engram_disconnect(first);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the server sees the hang-up
  engram_client* second = connect_c(socket_);
  ASSERT_NE(second, nullptr);
  ASSERT_EQ(engram_checkpoint(second, 60000, path, sizeof path), ENGRAM_OK) << last();
  engram_disconnect(second);
  EXPECT_EQ(checkpoint_sequence(path), 2u) << path << ": the answer to the first client's checkpoint";
}

// Writers and samplers go on while a checkpoint of more than 1 GiB of chunk
// data is written; the test counts what they completed meanwhile.
TEST_F(ServerCheckpoint, TrafficContinuesDuringACheckpointOfOneGiB) {
  start("[arena]\nclasses = [ { block_size = \"4KiB\", count = 8192 }, { block_size = \"1032KiB\", count = 1100 } ]\n"
        "[[table]]\nname = \"big\"\nmax_size = 1100\n[[table.column]]\nname = \"x\"\ndtype = \"float32\"\nshape = [262144]\n"
        "[[table]]\nname = \"small\"\nmax_size = 1000\n[[table.column]]\nname = \"x\"\ndtype = \"float32\"\nshape = [100]\n");
  ASSERT_NO_FATAL_FAILURE(fill_big(1050));
  ASSERT_GE(info("big").bytes_raw, uint64_t{1} << 30);

  std::atomic<bool> writing{false}, done{false};
  std::atomic<uint64_t> inserts_during{0}, samples_during{0};
  std::atomic<int64_t> max_stall_ns{0};
  std::thread traffic([&] {
    engram_client* c = connect_c(socket_);
    ASSERT_NE(c, nullptr);
    engram_table* t = nullptr;
    ASSERT_EQ(engram_table_open(c, "small", &t), ENGRAM_OK);
    engram_writer* w = float_writer(c, 100);
    ASSERT_NE(w, nullptr);
    float x[100] = {};
    float out[100 * 8];
    void* bufs[1] = {out};
    engram_sample_options so;
    engram_sample_options_init(&so);
    so.batch_size = 8;
    while (!done.load()) {
      auto t0 = std::chrono::steady_clock::now();
      const void* d[1] = {x};
      ASSERT_EQ(engram_writer_append(w, d), ENGRAM_OK);
      ASSERT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_OK);
      ASSERT_EQ(engram_writer_flush(w, 10000), ENGRAM_OK) << last();
      int64_t stall = (std::chrono::steady_clock::now() - t0).count();
      uint32_t count = 0;
      ASSERT_EQ(engram_sample(t, &so, bufs, nullptr, &count), ENGRAM_OK) << last();
      if (writing.load()) {
        ++inserts_during;
        samples_during += count;
        if (stall > max_stall_ns.load()) max_stall_ns.store(stall);
      }
    }
    engram_writer_close(w);
    engram_table_close(t);
    engram_disconnect(c);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  writing.store(true);
  auto t0 = std::chrono::steady_clock::now();
  std::string p = checkpoint();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  writing.store(false);
  done.store(true);
  traffic.join();
  Manifest m = manifest_of(p);
  uint64_t raw = 0;
  for (const SavedChunk& c : m.chunks) raw += c.raw_bytes;
  EXPECT_GE(raw, uint64_t{1} << 30);
  EXPECT_GT(inserts_during.load(), 0u);
  EXPECT_GT(samples_during.load(), 0u);
  std::printf("checkpoint of %.2f GiB in %.2f s; during it: %llu inserts, %llu sampled items, longest insert %.2f ms\n",
              double(raw) / (1 << 30), secs, static_cast<unsigned long long>(inserts_during.load()),
              static_cast<unsigned long long>(samples_during.load()), double(max_stall_ns.load()) / 1e6);
}

}  // namespace
}  // namespace engram::test
