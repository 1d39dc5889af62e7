// Sum-tree micro benchmarks: K-ary trees (K in 2, 8, 16, 32, 64) against the
// binary baseline, for update, sample and a mixed workload (batch-256 sample
// followed by 256 updates of the sampled leaves, as a PER learner does), at
// N = 1e3 .. 1e7 leaves. Names: sumtree/<op>/<impl>/<N>; each iteration
// handles one batch of 256 items, so items_per_second is comparable.
// Beside them, range/update/kary8/<N>: the same updates of a table's
// priority range (core/priority_range.hpp, max and min), which every
// priority change pays on top of its selectors'.
// And table/list_piece/<full|sparse>/<N>: one piece of a listing
// (Table::list with the control protocol's bounds, kMaxListedItems and
// kMaxListScan), the longest a listing holds a table's owner: a full
// table fills the piece's items after as many slots, a sparse one (1 slot
// in 64 occupied) looks at every slot the piece may.
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "baseline_sum_tree.hpp"
#include "core/control_message.hpp"
#include "core/priority_range.hpp"
#include "core/table.hpp"
#include "core/sum_tree.hpp"

namespace engram::bench {
namespace {

constexpr size_t kBatch = 256;
constexpr size_t kPool = 1 << 16;  // pre-drawn random inputs, cycled

struct Inputs {
  std::vector<uint32_t> idx;
  std::vector<double> w, u;
  explicit Inputs(uint32_t n) : idx(kPool), w(kPool), u(kPool) {
    std::mt19937_64 rng(n);
    std::uniform_real_distribution<double> U(0, 1);
    for (size_t i = 0; i < kPool; ++i) {
      idx[i] = static_cast<uint32_t>(rng() % n);
      w[i] = U(rng) * 10;
      u[i] = U(rng);
    }
  }
  std::vector<double> initial(uint32_t n) const {
    std::vector<double> v(n);
    for (uint32_t i = 0; i < n; ++i) v[i] = w[i % kPool] + 0.001;
    return v;
  }
};

template <unsigned K>
struct Kary {
  explicit Kary(uint32_t n) : mem(static_cast<char*>(std::aligned_alloc(64, align_up(SumTree<K>::bytes_needed(n), 64)))) {
    tree = SumTree<K>::format(mem.get(), SumTree<K>::bytes_needed(n), n).value();
  }
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> mem;
  SumTree<K> tree;
  SumTreeScratch scratch;
  void assign(const double* w, uint32_t n) { tree.assign(w, n); }
  void set_batch(const uint32_t* idx, const double* w, size_t n) { tree.set_batch(idx, w, n, scratch); }
  void sample_batch(const double* u, uint32_t* out, size_t n) { tree.sample_batch(u, out, n, scratch); }
};

struct Range {
  explicit Range(uint32_t n)
      : mem(static_cast<char*>(std::aligned_alloc(64, align_up(PriorityRange::bytes_needed(n), 64)))) {
    range = PriorityRange::format(mem.get(), PriorityRange::bytes_needed(n), n).value();
  }
  std::unique_ptr<char, Kary<2>::Free> mem;
  PriorityRange range;
  void assign(const double* w, uint32_t n) {
    for (uint32_t i = 0; i < n; ++i) range.set(i, w[i]);
  }
  void set_batch(const uint32_t* idx, const double* w, size_t n) {
    for (size_t i = 0; i < n; ++i) range.set(idx[i], w[i]);
  }
  void sample_batch(const double*, uint32_t*, size_t) {}
};

struct Baseline : BaselineSumTree {
  using BaselineSumTree::BaselineSumTree;
};

enum class Op { update, sample, mixed };

template <typename Impl>
void run(benchmark::State& state, Op op, uint32_t n) {
  Inputs in(n);
  auto impl = std::make_unique<Impl>(n);
  {
    auto init = in.initial(n);
    impl->assign(init.data(), n);
  }
  uint32_t out[kBatch];
  size_t cursor = 0;
  for (auto _ : state) {
    const uint32_t* idx = &in.idx[cursor];
    const double* w = &in.w[cursor];
    const double* u = &in.u[cursor];
    switch (op) {
      case Op::update: impl->set_batch(idx, w, kBatch); break;
      case Op::sample: impl->sample_batch(u, out, kBatch); break;
      case Op::mixed:
        impl->sample_batch(u, out, kBatch);
        impl->set_batch(out, w, kBatch);
        break;
    }
    benchmark::DoNotOptimize(out);
    cursor = (cursor + kBatch) % kPool;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kBatch));
}

template <typename Impl>
void register_impl(const std::string& impl) {
  for (auto [op, opname] : {std::pair{Op::update, "update"}, {Op::sample, "sample"}, {Op::mixed, "mixed"}})
    for (uint32_t n : {1'000u, 10'000u, 100'000u, 1'000'000u, 10'000'000u})
      benchmark::RegisterBenchmark(("sumtree/" + std::string(opname) + "/" + impl + "/" + std::to_string(n)).c_str(),
                                   [op = op, n](benchmark::State& s) { run<Impl>(s, op, n); })
;
}

void list_piece(benchmark::State& state, uint32_t n, uint32_t every) {
  TableOptions o;
  o.name = "bench";
  o.capacity = n;
  o.signature = {make_column("x", DType::f32, {})};
  o.max_refs_per_item = 1;
  CheckedTableOptions checked = Table::check(o).value();
  size_t bytes = Table::bytes_needed(checked);
  std::unique_ptr<char, decltype(&std::free)> mem(static_cast<char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)),
                                                  &std::free);
  Table t = Table::format(mem.get(), bytes, checked).value();
  std::vector<uint64_t> keys;
  for (uint32_t i = 0; i < n; ++i) {
    ChunkRef r{i, 1, 0, 1};
    keys.push_back(t.insert(1.0, &r, 1).value());
  }
  for (uint32_t i = 0; i < n; ++i)
    if (i % every != 0) (void)t.remove(keys[i]);
  std::vector<ListedItem> out;
  out.reserve(kMaxListedItems);
  for (auto _ : state) {
    out.clear();
    benchmark::DoNotOptimize(t.list(0, kMaxListedItems, kMaxListScan, &out));
  }
  state.counters["items"] = static_cast<double>(out.size());
}

}  // namespace
}  // namespace engram::bench

int main(int argc, char** argv) {
  using namespace engram::bench;
  register_impl<Baseline>("baseline");
  register_impl<Kary<2>>("kary2");
  register_impl<Kary<8>>("kary8");
  register_impl<Kary<16>>("kary16");
  register_impl<Kary<32>>("kary32");
  register_impl<Kary<64>>("kary64");
  for (uint32_t n : {1'000u, 10'000u, 100'000u, 1'000'000u, 10'000'000u})
    benchmark::RegisterBenchmark(("range/update/kary8/" + std::to_string(n)).c_str(),
                                 [n](benchmark::State& s) { run<Range>(s, Op::update, n); });
  for (uint32_t n : {1'000'000u}) {
    benchmark::RegisterBenchmark(("table/list_piece/full/" + std::to_string(n)).c_str(),
                                 [n](benchmark::State& s) { list_piece(s, n, 1); });
    benchmark::RegisterBenchmark(("table/list_piece/sparse/" + std::to_string(n)).c_str(),
                                 [n](benchmark::State& s) { list_piece(s, n, 64); });
  }
  // 0.2 s per benchmark unless the command line says otherwise (later flags win).
  std::vector<char*> args(argv, argv + argc);
  static char min_time[] = "--benchmark_min_time=0.2";
  args.insert(args.begin() + 1, min_time);
  argc = static_cast<int>(args.size());
  argv = args.data();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
