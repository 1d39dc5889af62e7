// Checkpoint benchmark: write throughput next to the disk's sequential write
// throughput (the same bytes, written and fsynced the same way as dd
// conv=fsync), restore throughput, and insert latency with and without a
// checkpoint being written. Prints one JSON object (bench/checkpoint.sh
// stores it in bench/results/checkpoint.json).
//
//   engram_bench_checkpoint --mb N --dir DIR [--seconds S] [--reps R] [--buffered] [--max-mb-per-s N]
//
// --max-mb-per-s sets [checkpoint] max_mb_per_s (default 512, the server's;
// 0 = unpaced).
//
// Each of R repetitions (default 3) times a checkpoint, then the disk
// baseline; the JSON has their medians, and the insert latencies of all.
//
// --buffered writes the chunk file through the page cache instead of with
// O_DIRECT ([checkpoint] direct = false), to compare the two.
//
// The chunk data is random float32, which zstd cannot shrink: the MB/s are
// those of bytes that really reach the disk.
#include <fcntl.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "server/file_writer.hpp"
#include "bench_traffic.hpp"
#include "engram/engram.hpp"
#include "engram/server.hpp"

namespace {

using namespace bench;

constexpr uint32_t kFloats = 256 * 1024;  // 1 MiB items

}  // namespace

int main(int argc, char** argv) try {
  uint64_t mb = 1024;
  std::string dir = "/tmp/engram-bench-checkpoint";
  double seconds = 3;
  bool direct = true;
  int reps = 3;
  long max_mb_per_s = 512;  // the server's default
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--mb" && i + 1 < argc) mb = std::stoull(argv[++i]);
    else if (a == "--dir" && i + 1 < argc) dir = argv[++i];
    else if (a == "--seconds" && i + 1 < argc) seconds = std::stod(argv[++i]);
    else if (a == "--buffered") direct = false;
    else if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::stoi(argv[++i]));
    else if (a == "--max-mb-per-s" && i + 1 < argc) max_mb_per_s = std::stol(argv[++i]);
    else {
      std::fprintf(stderr, "usage: engram_bench_checkpoint [--mb N] [--dir DIR] [--seconds S] [--reps R] [--buffered] [--max-mb-per-s N]\n");
      return 2;
    }
  }
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string socket = dir + "/engram.sock";
  std::string toml = "socket = \"" + socket + "\"\n[checkpoint]\ndir = \"" + dir + "/ckpt\"\nkeep = 1\ndirect = " +
                     (direct ? "true" : "false") + "\nmax_mb_per_s = " + std::to_string(max_mb_per_s) + "\n" +
                     "[arena]\nclasses = [ { block_size = \"4KiB\", count = 65536 }, { block_size = \"1032KiB\", count = " +
                     std::to_string(mb + 8) + " } ]\n" +
                     "[[table]]\nname = \"big\"\nmax_size = " + std::to_string(mb) +
                     "\n[[table.column]]\nname = \"x\"\ndtype = \"float32\"\nshape = [" + std::to_string(kFloats) +
                     "]\n[[table]]\nname = \"small\"\nmax_size = 10000\n[[table.column]]\nname = \"x\"\n"
                     "dtype = \"float32\"\nshape = [100]\n";
  auto server = std::make_unique<api::Server>(toml);
  auto c = std::make_unique<api::Client>(api::Client::connect(socket));
  {
    std::fprintf(stderr, "bench_checkpoint: filling %llu MiB...\n", static_cast<unsigned long long>(mb));
    api::Table big = c->open_table("big");
    api::Writer w = float_writer(*c, kFloats);
    std::vector<float> x(kFloats);
    std::mt19937 rng(1);
    for (uint64_t i = 0; i < mb; ++i) {
      for (auto& v : x) v = static_cast<float>(rng());
      w.append({x.data()});
      w.create_item(big, 1, 1.0);
    }
    w.flush(-1);
  }
  uint64_t bytes = c->info("big").bytes_raw;

  std::fprintf(stderr, "bench_checkpoint: insert latency without a checkpoint (%.0f s)...\n", seconds);
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
  // Checkpoints and the disk baseline alternate, so that drift in the
  // disk's speed touches both alike; medians of the repetitions.
  std::vector<double> ckpt_runs, disk_runs;
  std::string path;
  uint64_t file_bytes = 0;
  for (int r = 0; r < reps; ++r) {
    std::fprintf(stderr, "bench_checkpoint: checkpoint %d of %d with inserts going on, then the disk...\n", r + 1, reps);
    std::vector<Insert> all;
    std::atomic<bool> stop{false};
    std::thread t(insert_loop, socket, &stop, &all);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    auto t0 = Clock::now();
    path = c->checkpoint(-1);
    auto t1 = Clock::now();
    stop.store(true);
    t.join();
    ckpt_runs.push_back(std::chrono::duration<double>(t1 - t0).count());
    for (const Insert& i : all)
      if (i.start >= t0 && i.start <= t1) during.push_back(i.us);
    file_bytes = 0;
    for (const auto& e : std::filesystem::directory_iterator(path)) file_bytes += e.file_size();
    disk_runs.push_back(disk_seq_mb_per_s(dir, file_bytes));
  }
  double ckpt_s = median(ckpt_runs), disk = median(disk_runs);
  c.reset();
  server->stop();

  std::fprintf(stderr, "bench_checkpoint: restore...\n");
  auto t0 = Clock::now();
  server = std::make_unique<api::Server>(toml);  // restores the checkpoint before it returns
  double restore_s = secs_since(t0);
  c = std::make_unique<api::Client>(api::Client::connect(socket));
  uint64_t restored = c->info("big").bytes_raw;
  if (restored != bytes) {
    std::fprintf(stderr, "bench_checkpoint: the restore brought back %llu bytes, not %llu\n",
                 static_cast<unsigned long long>(restored), static_cast<unsigned long long>(bytes));
    return 1;
  }
  c.reset();
  server->stop();

  std::string why;
  auto probe = engram::FileWriter::open(dir + "/probe", engram::IoMode::automatic, direct, &why);
  const char* io = probe.ok() ? engram::io_path_name((*probe)->path()) : "unknown";
  utsname u{};
  ::uname(&u);
  std::printf(
      "{\"bench\": \"checkpoint\", \"kernel\": \"%s\", \"cores\": %u, \"bytes\": %llu, \"file_bytes\": %llu, "
      "\"io_path\": \"%s\", \"direct\": %s, \"max_mb_per_s\": %ld, \"checkpoint_s\": %.3f, \"checkpoint_mb_per_s\": %.1f, \"disk_seq_mb_per_s\": %.1f, "
      "\"checkpoint_vs_disk\": %.3f, \"restore_s\": %.3f, \"restore_mb_per_s\": %.1f, "
      "\"insert_p50_us\": %.1f, \"insert_p99_us\": %.1f, \"insert_max_us\": %.1f, \"inserts\": %zu, "
      "\"insert_p50_us_during\": %.1f, \"insert_p99_us_during\": %.1f, \"insert_max_us_during\": %.1f, "
      "\"inserts_during\": %zu, \"p99_during_vs_without\": %.3f, \"repetitions\": %d}\n",
      u.release, std::thread::hardware_concurrency(), static_cast<unsigned long long>(bytes),
      static_cast<unsigned long long>(file_bytes), io, probe.ok() && (*probe)->direct() ? "true" : "false", max_mb_per_s, ckpt_s, double(bytes) / 1e6 / ckpt_s, disk,
      double(bytes) / 1e6 / ckpt_s / disk, restore_s, double(bytes) / 1e6 / restore_s, pct(quiet, 0.5),
      pct(quiet, 0.99), pct(quiet, 1.0), quiet.size(), pct(during, 0.5), pct(during, 0.99), pct(during, 1.0),
      during.size(), pct(during, 0.99) / std::max(1e-9, pct(quiet, 0.99)), reps);
  std::filesystem::remove_all(dir);
  return 0;
} catch (const engram::api::Error& e) {
  std::fprintf(stderr, "bench_checkpoint: %s\n", e.what());
  return 1;
}
