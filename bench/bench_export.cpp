// Export benchmark: engram_table_export of a table next to the disk's
// sequential write speed (the same bytes, written and fsynced as dd
// conv=fsync), insert latency with and without an export going on, and
// engram_table_import of the file back into the table. Prints one JSON
// object (bench/export.sh stores it in bench/results/export.json).
//
//   engram_bench_export --mb N --dir DIR [--seconds S] [--reps R] [--compressed]
//
// The steps are random float32 (1 MiB items), which zstd cannot shrink:
// the MB/s are bytes that really reach the disk. --compressed stores the
// column with zstd in the table (still incompressible data: the cost
// measured is the decoder's pass over stored frames, a worst case).
#include <sys/utsname.h>

#include <memory>

#include "bench_traffic.hpp"
#include "engram/engram.hpp"
#include "engram/server.hpp"

namespace {

using namespace bench;

constexpr uint32_t kFloats = 256 * 1024;  // 1 MiB items

// Latencies of the inserts that started within [t0, t1].
void keep_within(const std::vector<Insert>& all, Clock::time_point t0, Clock::time_point t1, std::vector<double>* out) {
  for (const Insert& i : all)
    if (i.start >= t0 && i.start <= t1) out->push_back(i.us);
}

}  // namespace

int main(int argc, char** argv) try {
  uint64_t mb = 1024;
  std::string dir = "/tmp/engram-bench-export";
  double seconds = 3;
  int reps = 3;
  bool compressed = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--mb" && i + 1 < argc) mb = std::stoull(argv[++i]);
    else if (a == "--dir" && i + 1 < argc) dir = argv[++i];
    else if (a == "--seconds" && i + 1 < argc) seconds = std::stod(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::stoi(argv[++i]));
    else if (a == "--compressed") compressed = true;
    else {
      std::fprintf(stderr, "usage: engram_bench_export [--mb N] [--dir DIR] [--seconds S] [--reps R] [--compressed]\n");
      return 2;
    }
  }
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string socket = dir + "/engram.sock";
  // Blocks for the table twice over: an export pins the chunks it copies,
  // and the import goes into the same table after a reset.
  std::string toml = "socket = \"" + socket + "\"\n[arena]\nclasses = [ { block_size = \"4KiB\", count = 65536 }, "
                     "{ block_size = \"1032KiB\", count = " + std::to_string(2 * mb + 8) + " } ]\n" +
                     "[[table]]\nname = \"big\"\nmax_size = " + std::to_string(mb) +
                     "\n[[table.column]]\nname = \"x\"\ndtype = \"float32\"\nshape = [" + std::to_string(kFloats) +
                     "]\n" + (compressed ? "compression = \"zstd\"\n" : "") +
                     "[[table]]\nname = \"small\"\nmax_size = 10000\n[[table.column]]\nname = \"x\"\n"
                     "dtype = \"float32\"\nshape = [100]\n";
  auto server = std::make_unique<api::Server>(toml);
  api::Client c = api::Client::connect(socket);
  api::Table big = c.open_table("big");
  std::fprintf(stderr, "bench_export: filling %llu MiB...\n", static_cast<unsigned long long>(mb));
  {
    api::WriterOptions wo;
    wo.columns.add("x", ENGRAM_FLOAT32, {kFloats}, {compressed ? ENGRAM_CODEC_ZSTD : ENGRAM_CODEC_NONE, 0});
    api::Writer w = c.writer(wo);
    std::vector<float> x(kFloats);
    std::mt19937 rng(1);
    for (uint64_t i = 0; i < mb; ++i) {
      for (auto& v : x) v = static_cast<float>(rng());
      w.append({x.data()});
      w.create_item(big, 1, 1.0 + double(i % 7));
    }
    w.flush(-1);
  }
  uint64_t bytes = c.info("big").bytes_raw;

  std::fprintf(stderr, "bench_export: insert latency without an export (%.0f s)...\n", seconds);
  std::vector<double> quiet, during;
  {
    std::vector<Insert> all;
    std::atomic<bool> stop{false};
    std::thread t(insert_loop, socket, &stop, &all);
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    stop.store(true);
    t.join();
    for (const Insert& i : all) quiet.push_back(i.us);
  }
  // Exports and the disk baseline alternate, so that drift in the disk's
  // speed touches both alike; medians of the repetitions.
  std::string file = dir + "/big.npz";
  std::vector<double> export_runs, disk_runs, import_runs;
  uint64_t file_bytes = 0;
  for (int r = 0; r < reps; ++r) {
    std::fprintf(stderr, "bench_export: export %d of %d with inserts going on, the disk, the import...\n", r + 1, reps);
    std::vector<Insert> all;
    std::atomic<bool> stop{false};
    std::thread t(insert_loop, socket, &stop, &all);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    auto t0 = Clock::now();
    uint64_t n = big.export_to(file);
    auto t1 = Clock::now();
    stop.store(true);
    t.join();
    if (n != mb) throw api::Error(ENGRAM_E_CORRUPT, "exported " + std::to_string(n) + " items, not " + std::to_string(mb));
    export_runs.push_back(std::chrono::duration<double>(t1 - t0).count());
    keep_within(all, t0, t1, &during);
    file_bytes = std::filesystem::file_size(file);
    disk_runs.push_back(disk_seq_mb_per_s(dir, file_bytes));
    c.reset_table("big");
    t0 = Clock::now();
    n = big.import_from(file);
    import_runs.push_back(secs_since(t0));
    if (n != mb) throw api::Error(ENGRAM_E_CORRUPT, "imported " + std::to_string(n) + " items, not " + std::to_string(mb));
    std::filesystem::remove(file);
  }
  double export_s = median(export_runs), disk = median(disk_runs), import_s = median(import_runs);
  auto spread = [](const std::vector<double>& v) {
    return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()) / *std::min_element(v.begin(), v.end());
  };
  utsname u{};
  ::uname(&u);
  std::printf(
      "{\"bench\": \"export\", \"kernel\": \"%s\", \"cores\": %u, \"compressed\": %s, \"bytes\": %llu, "
      "\"file_bytes\": %llu, \"export_s\": %.3f, \"export_mb_per_s\": %.1f, \"disk_seq_mb_per_s\": %.1f, "
      "\"export_vs_disk\": %.3f, \"export_spread\": %.3f, \"disk_spread\": %.3f, \"import_s\": %.3f, "
      "\"import_mb_per_s\": %.1f, \"insert_p50_us\": %.1f, \"insert_p99_us\": %.1f, \"inserts\": %zu, "
      "\"insert_p50_us_during\": %.1f, \"insert_p99_us_during\": %.1f, \"insert_max_us_during\": %.1f, "
      "\"inserts_during\": %zu, \"p99_during_vs_without\": %.3f, \"repetitions\": %d}\n",
      u.release, std::thread::hardware_concurrency(), compressed ? "true" : "false",
      static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(file_bytes), export_s,
      double(file_bytes) / 1e6 / export_s, disk, double(file_bytes) / 1e6 / export_s / disk, spread(export_runs),
      spread(disk_runs), import_s, double(bytes) / 1e6 / import_s, pct(quiet, 0.5), pct(quiet, 0.99), quiet.size(),
      pct(during, 0.5), pct(during, 0.99), pct(during, 1.0), during.size(),
      pct(during, 0.99) / std::max(1e-9, pct(quiet, 0.99)), reps);
  std::filesystem::remove_all(dir);
  return 0;
} catch (const engram::api::Error& e) {
  std::fprintf(stderr, "bench_export: %s\n", e.what());
  return 1;
}
