// engram_table_export and engram_table_import through a server: the file
// holds what was written (plain and compressed columns, items over several
// chunks, overlapping items), an import and a second export give the same
// arrays byte for byte, an export under writers and evictions holds every
// item whole, and damaged, foreign or mismatched files insert nothing.
#include <sys/stat.h>

#include <fstream>

#include "capi_fixture.hpp"
#include "core/npz.hpp"

namespace engram::test {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}
bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// An exported file read with core/npz: each member's array bytes by name.
struct Npz {
  std::string bytes;
  std::map<std::string, std::pair<NpyArray, std::string>> arrays;  // name without .npy
  explicit Npz(const std::string& path) : bytes(slurp(path)) {
    auto z = ZipReader::open(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), path);
    EXPECT_TRUE(z.ok()) << z.status().message();
    if (!z.ok()) return;
    for (const auto& m : z->members()) {
      EXPECT_TRUE(z->check_crc(m).ok()) << m.name;
      NpyArray a;
      size_t at = 0;
      Status s = parse_npy(z->bytes(m), m.size, &a, &at);
      EXPECT_TRUE(s.ok()) << m.name << ": " << s.message();
      EXPECT_EQ((reinterpret_cast<const char*>(z->bytes(m)) - bytes.data() + at) % 64, 0u) << m.name << " not aligned";
      arrays[m.name.substr(0, m.name.size() - 4)] = {a, std::string(reinterpret_cast<const char*>(z->bytes(m)) + at,
                                                                    m.size - at)};
    }
  }
  template <typename T>
  std::vector<T> get(const std::string& name) const {
    auto it = arrays.find(name);
    if (it == arrays.end()) {
      ADD_FAILURE() << "no array " << name;
      return {};
    }
    std::vector<T> v(it->second.second.size() / sizeof(T));
    std::memcpy(v.data(), it->second.second.data(), v.size() * sizeof(T));
    return v;
  }
  const std::string& raw(const std::string& name) const { return arrays.at(name).second; }
};

class Transfer : public CApi, public ::testing::WithParamInterface<bool> {
 protected:
  // Three columns: obs u8[4,5] (delta_zstd when compressed), reward f32,
  // step i64 (zstd when compressed). Step s holds obs bytes (s*7+j)&255,
  // reward s/2, step s.
  void make(const char* name, bool compressed, uint64_t max_size = 1000, int remover = ENGRAM_FIFO) {
    engram_table_options o = two_columns(name, max_size, cols3_);
    o.num_columns = 3;
    o.remover = remover;
    if (compressed) o.compression = comp_;
    ASSERT_EQ(engram_table_create(c_, &o), ENGRAM_OK) << last();
  }
  engram_writer* writer3(bool compressed, uint32_t chunk_length, uint32_t max_steps) {
    engram_writer_options o;
    engram_writer_options_init(&o);
    o.columns = cols3_;
    o.num_columns = 3;
    o.chunk_length = chunk_length;
    o.max_item_steps = max_steps;
    if (compressed) o.compression = comp_;
    engram_writer* w = nullptr;
    EXPECT_EQ(engram_writer_open(c_, &o, &w), ENGRAM_OK) << last();
    return w;
  }
  static void step_values(int64_t s, uint8_t* obs, float* reward) {
    for (int j = 0; j < 20; ++j) obs[j] = static_cast<uint8_t>((s * 7 + j) & 255);
    *reward = static_cast<float>(s) / 2;
  }
  void append_step(engram_writer* w, int64_t s) {
    uint8_t obs[20];
    float reward;
    step_values(s, obs, &reward);
    const void* v[3] = {obs, &reward, &s};
    ASSERT_EQ(engram_writer_append(w, v), ENGRAM_OK) << last();
  }
  // Episodes of 37 steps, chunks of 8: after each step from the third an
  // item over the last 3 (n-step style, overlapping), and at each
  // episode's end one over the whole episode (5 chunks). Returns each
  // item's (first step, steps) in creation order.
  std::vector<std::pair<int64_t, uint32_t>> fill(engram_table* t, engram_writer* w, int episodes) {
    std::vector<std::pair<int64_t, uint32_t>> made;
    int64_t s = 0;
    for (int e = 0; e < episodes; ++e) {
      for (int k = 0; k < 37; ++k, ++s) {
        append_step(w, s);
        if (k >= 2) {
          EXPECT_EQ(engram_writer_create_item(w, t, 3, 0.5 + (s % 11)), ENGRAM_OK) << last();
          made.push_back({s - 2, 3});
        }
      }
      EXPECT_EQ(engram_writer_create_item(w, t, 37, 2.25), ENGRAM_OK) << last();
      made.push_back({s - 37, 37});
      EXPECT_EQ(engram_writer_end_episode(w), ENGRAM_OK);
    }
    EXPECT_EQ(engram_writer_flush(w, 10000), ENGRAM_OK) << last();
    return made;
  }
  std::string file(const char* name) { return dir_ + "/" + name; }

  engram_column cols3_[3] = {{"obs", ENGRAM_UINT8, 2, {4, 5}}, {"reward", ENGRAM_FLOAT32, 0, {}},
                             {"step", ENGRAM_INT64, 0, {}}};
  engram_compression comp_[3] = {{ENGRAM_CODEC_DELTA_ZSTD, 0}, {ENGRAM_CODEC_NONE, 0}, {ENGRAM_CODEC_ZSTD, 0}};
};

TEST_P(Transfer, ExportHoldsWhatWasWrittenAndImportRoundTripsByteForByte) {
  bool compressed = GetParam();
  make("a", compressed);
  engram_table* a = open("a");
  engram_writer* w = writer3(compressed, 8, 37);
  auto made = fill(a, w, 6);  // 6 * 36 = 216 items, under max_size
  engram_writer_close(w);
  uint64_t n = 0;
  ASSERT_EQ(engram_table_export(a, file("a.npz").c_str(), nullptr, &n), ENGRAM_OK) << last();
  EXPECT_EQ(n, made.size());
  EXPECT_FALSE(exists(file("a.npz.partial")));

  Npz fa(file("a.npz"));
  EXPECT_EQ(fa.arrays.at("steps/obs").first.descr, "|u1");
  EXPECT_EQ(fa.arrays.at("steps/reward").first.descr, "<f4");
  EXPECT_EQ(fa.arrays.at("steps/step").first.descr, "<i8");
  auto offset = fa.get<uint64_t>("items/offset");
  auto length = fa.get<uint32_t>("items/length");
  auto priority = fa.get<double>("items/priority");
  auto keys = fa.get<uint64_t>("items/key");
  auto inserted = fa.get<uint64_t>("items/inserted");
  auto steps = fa.get<int64_t>("steps/step");
  auto reward = fa.get<float>("steps/reward");
  const std::string& obs = fa.raw("steps/obs");
  ASSERT_EQ(offset.size(), made.size());
  ASSERT_EQ(fa.arrays.at("steps/obs").first.shape, (std::vector<uint64_t>{steps.size(), 4, 5}));
  for (size_t i = 0; i < made.size(); ++i) {
    EXPECT_EQ(length[i], made[i].second) << i;
    if (i) {
      EXPECT_LT(inserted[i - 1], inserted[i]);
    }
    EXPECT_NE(keys[i], 0u);
    for (uint32_t k = 0; k < length[i]; ++k) {
      int64_t s = made[i].first + k;
      uint64_t row = offset[i] + k;
      ASSERT_EQ(steps[row], s) << "item " << i;
      uint8_t want[20];
      float r;
      step_values(s, want, &r);
      ASSERT_EQ(reward[row], r);
      ASSERT_EQ(std::memcmp(obs.data() + row * 20, want, 20), 0) << "item " << i << " step " << k;
    }
  }
  EXPECT_DOUBLE_EQ(priority[0], 0.5 + 2 % 11);

  // Into a table of the same columns, the other way compressed, and out again.
  make("b", !compressed);
  engram_table* b = open("b");
  uint64_t in = 0;
  ASSERT_EQ(engram_table_import(b, file("a.npz").c_str(), nullptr, &in), ENGRAM_OK) << last();
  EXPECT_EQ(in, made.size());
  ASSERT_EQ(engram_table_export(b, file("b.npz").c_str(), nullptr, &n), ENGRAM_OK) << last();
  Npz fb(file("b.npz"));
  for (const char* name : {"steps/obs", "steps/reward", "steps/step", "items/priority", "items/length", "items/offset"})
    EXPECT_TRUE(fa.raw(name) == fb.raw(name)) << name << " differs after import and export";
  EXPECT_EQ(fb.get<uint32_t>("items/times_sampled"), std::vector<uint32_t>(made.size(), 0));

  // The imported items sample as the originals: item data per key.
  engram_table_info info;
  engram_table_info_init(&info);
  ASSERT_EQ(engram_table_info_get(c_, "b", &info), ENGRAM_OK);
  EXPECT_EQ(info.size, made.size());
}

INSTANTIATE_TEST_SUITE_P(PlainAndCompressed, Transfer, ::testing::Bool(),
                         [](const auto& p) { return p.param ? "compressed" : "plain"; });

// A table that goes on being written and evicting while it is exported:
// every item in the file is whole (its chunks were pinned), and there are
// as many as the table held.
TEST_F(Transfer, ExportUnderWritersAndEvictions) {
  make("busy", true, 300);
  engram_table* t = open("busy");
  std::atomic<bool> stop{false};
  std::atomic<int64_t> written{0};
  std::thread writer([&] {
    engram_client* c2 = connect_c(socket_);
    engram_table* t2 = nullptr;
    ASSERT_EQ(engram_table_open(c2, "busy", &t2), ENGRAM_OK);
    engram_writer_options o;
    engram_writer_options_init(&o);
    o.columns = cols3_;
    o.num_columns = 3;
    o.chunk_length = 4;
    o.compression = comp_;
    engram_writer* w = nullptr;
    ASSERT_EQ(engram_writer_open(c2, &o, &w), ENGRAM_OK) << last();
    for (int64_t s = 0; !stop.load() || s < 2000; ++s) {
      uint8_t obs[20];
      float reward;
      step_values(s, obs, &reward);
      const void* v[3] = {obs, &reward, &s};
      ASSERT_EQ(engram_writer_append(w, v), ENGRAM_OK) << engram_last_error();
      ASSERT_EQ(engram_writer_create_item(w, t2, 1, 1.0), ENGRAM_OK) << engram_last_error();
      written = s;
    }
    engram_writer_close(w);
    engram_disconnect(c2);
  });
  while (written.load() < 1000) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  for (int round = 0; round < 5; ++round) {
    uint64_t n = 0;
    std::string path = file("busy.npz");
    ASSERT_EQ(engram_table_export(t, path.c_str(), nullptr, &n), ENGRAM_OK) << last();
    EXPECT_GT(n, 200u);
    EXPECT_LE(n, 300u);
    Npz f(path);
    auto steps = f.get<int64_t>("steps/step");
    auto reward = f.get<float>("steps/reward");
    const std::string& obs = f.raw("steps/obs");
    ASSERT_EQ(steps.size(), n);
    for (size_t row = 0; row < n; ++row) {
      uint8_t want[20];
      float r;
      step_values(steps[row], want, &r);
      ASSERT_EQ(reward[row], r) << row;
      ASSERT_EQ(std::memcmp(obs.data() + row * 20, want, 20), 0) << row;
      if (row) {
        ASSERT_LT(steps[row - 1], steps[row]) << "insertion order";
      }
    }
  }
  stop = true;
  writer.join();
}

TEST_F(Transfer, DamagedForeignAndMismatchedFilesInsertNothing) {
  make("a", false);
  engram_table* a = open("a");
  engram_writer* w = writer3(false, 8, 37);
  fill(a, w, 2);
  engram_writer_close(w);
  ASSERT_EQ(engram_table_export(a, file("good.npz").c_str(), nullptr, nullptr), ENGRAM_OK) << last();
  std::string good = slurp(file("good.npz"));
  make("b", false);
  engram_table* b = open("b");
  auto refused = [&](const std::string& bytes, int code, const char* says) {
    spit(file("bad.npz"), bytes);
    uint64_t n = 99;
    EXPECT_EQ(engram_table_import(b, file("bad.npz").c_str(), nullptr, &n), code) << last();
    EXPECT_NE(last().find(says), std::string::npos) << last();
    EXPECT_NE(last().find("bad.npz"), std::string::npos) << "names the file: " << last();
    EXPECT_EQ(n, 0u);
  };
  // A flipped byte in the steps: the CRC-32 says so.
  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x10;
  refused(flipped, ENGRAM_E_CORRUPT, "CRC-32");
  refused(good.substr(0, good.size() - 30), ENGRAM_E_INVALID, "no zip end record");
  refused(good.substr(0, good.size() / 2), ENGRAM_E_INVALID, "no zip end record");
  refused("time,reward\n0,1.0\n", ENGRAM_E_INVALID, "not a .npz");
  // The central directory pointing past the file.
  std::string moved = good;
  size_t end = good.rfind(std::string("PK\x05\x06", 4));
  ASSERT_NE(end, std::string::npos);
  moved[end + 16] = '\xff';
  moved[end + 17] = '\xff';
  refused(moved, ENGRAM_E_CORRUPT, "central directory");
  // Another table's columns: a dtype that differs, a column it lacks.
  engram_column wide[3] = {cols3_[0], cols3_[1], cols3_[2]};
  wide[0].dtype = ENGRAM_INT16;
  engram_table_options o = two_columns("wide", 10, wide);
  o.num_columns = 3;
  ASSERT_EQ(engram_table_create(c_, &o), ENGRAM_OK);
  EXPECT_EQ(engram_table_import(open("wide"), file("good.npz").c_str(), nullptr, nullptr), ENGRAM_E_SIGNATURE);
  EXPECT_NE(last().find("steps/obs is |u1 of shape (284, 4, 5)"), std::string::npos) << last();
  EXPECT_NE(last().find("needs <i2"), std::string::npos) << last();
  o = two_columns("fewer", 10);
  ASSERT_EQ(engram_table_create(c_, &o), ENGRAM_OK);
  EXPECT_EQ(engram_table_import(open("fewer"), file("good.npz").c_str(), nullptr, nullptr), ENGRAM_E_SIGNATURE);
  EXPECT_NE(last().find("column step, which table fewer lacks"), std::string::npos) << last();
  EXPECT_EQ(engram_table_import(b, file("missing.npz").c_str(), nullptr, nullptr), ENGRAM_E_SYSTEM);
  EXPECT_NE(last().find("missing.npz"), std::string::npos) << last();

  engram_table_info info;
  engram_table_info_init(&info);
  ASSERT_EQ(engram_table_info_get(c_, "b", &info), ENGRAM_OK);
  EXPECT_EQ(info.size, 0u) << "nothing went in";
  // And the good file goes in whole.
  uint64_t n = 0;
  ASSERT_EQ(engram_table_import(b, file("good.npz").c_str(), nullptr, &n), ENGRAM_OK) << last();
  EXPECT_EQ(n, 2u * 36);
}

int stop_at_once(void*, uint64_t, uint64_t) { return 1; }

TEST_F(Transfer, StoppedExportLeavesNoFileAndEmptyTablesExport) {
  make("a", false);
  engram_table* a = open("a");
  uint64_t n = 7;
  ASSERT_EQ(engram_table_export(a, file("empty.npz").c_str(), nullptr, &n), ENGRAM_OK) << last();
  EXPECT_EQ(n, 0u);
  Npz f(file("empty.npz"));
  EXPECT_EQ(f.arrays.at("steps/obs").first.shape, (std::vector<uint64_t>{0, 4, 5}));
  ASSERT_EQ(engram_table_import(a, file("empty.npz").c_str(), nullptr, &n), ENGRAM_OK) << last();
  EXPECT_EQ(n, 0u);

  engram_writer* w = writer3(false, 8, 37);
  fill(a, w, 1);
  engram_writer_close(w);
  engram_transfer_options o;
  engram_transfer_options_init(&o);
  o.progress = stop_at_once;
  EXPECT_EQ(engram_table_export(a, file("stopped.npz").c_str(), &o, nullptr), ENGRAM_E_INTERRUPTED);
  EXPECT_FALSE(exists(file("stopped.npz")));
  EXPECT_FALSE(exists(file("stopped.npz.partial")));
  EXPECT_EQ(engram_table_export(a, (dir_ + "/no/such/dir/x.npz").c_str(), nullptr, nullptr), ENGRAM_E_SYSTEM);
  EXPECT_NE(last().find("no/such/dir"), std::string::npos) << last();
  // The pins of every export above went back: the connection can export again.
  ASSERT_EQ(engram_table_export(a, file("again.npz").c_str(), nullptr, &n), ENGRAM_OK) << last();
  EXPECT_EQ(n, 36u);
}

// The control messages by hand, as a hostile client would send them.
TEST_F(Transfer, ExportMessagesOutOfTurnAndPerUserLimit) {
  make("a", false);
  Control c1(socket_), c2(socket_), c3(socket_);
  NameRequest name{};
  std::strncpy(name.name, "a", sizeof name.name - 1);
  std::vector<char> r;
  ExportItemsRequest rq{0, 10, 0};
  EXPECT_EQ(c1.call(ControlType::export_items, &rq, sizeof rq, &r).code(), Errc::invalid_argument);
  EXPECT_EQ(c1.call(ControlType::export_end, nullptr, 0, &r).code(), Errc::invalid_argument);
  NameRequest nope{};
  std::strncpy(nope.name, "nope", sizeof nope.name - 1);
  EXPECT_EQ(c1.call(ControlType::export_begin, &nope, sizeof nope, &r).code(), Errc::not_found);
  EXPECT_TRUE(c1.call(ControlType::export_begin, &name, sizeof name, &r).ok());
  EXPECT_EQ(c1.call(ControlType::export_begin, &name, sizeof name, &r).code(), Errc::invalid_argument);
  rq.from = 5;  // past the (empty) export
  EXPECT_EQ(c1.call(ControlType::export_items, &rq, sizeof rq, &r).code(), Errc::invalid_argument);
  EXPECT_EQ(c1.call(ControlType::export_items, &rq, 3, &r).code(), Errc::invalid_argument) << "malformed";
  EXPECT_TRUE(c2.call(ControlType::export_begin, &name, sizeof name, &r).ok());
  Status third = c3.call(ControlType::export_begin, &name, sizeof name, &r);
  EXPECT_EQ(third.code(), Errc::limit);
  EXPECT_NE(third.message().find("exports open"), std::string::npos) << third.message();
  EXPECT_TRUE(c1.call(ControlType::export_end, nullptr, 0, &r).ok());
  EXPECT_TRUE(c3.call(ControlType::export_begin, &name, sizeof name, &r).ok());
}

// An export whose client goes quiet for longer than kExportIdleMs lapses:
// its pins go, and export_end says the copy cannot be trusted.
TEST_F(Transfer, IdleExportLapses) {
  make("a", false);
  Control c1(socket_);
  NameRequest name{};
  std::strncpy(name.name, "a", sizeof name.name - 1);
  std::vector<char> r;
  ASSERT_TRUE(c1.call(ControlType::export_begin, &name, sizeof name, &r).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(kExportIdleMs + 700));
  ExportItemsRequest keep{0, 0, 0};
  EXPECT_EQ(c1.call(ControlType::export_items, &keep, sizeof keep, &r).code(), Errc::timeout);
  Status end = c1.call(ControlType::export_end, nullptr, 0, &r);
  EXPECT_EQ(end.code(), Errc::timeout);
  EXPECT_NE(end.message().find("lapsed"), std::string::npos) << end.message();
  EXPECT_TRUE(c1.call(ControlType::export_begin, &name, sizeof name, &r).ok()) << "a new export may begin";
}

}  // namespace
}  // namespace engram::test
