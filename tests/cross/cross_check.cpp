// The C++ reader of the cross-language test (tests/cross/run.sh): takes
// every item of table "cross" (FIFO, each sampled once), half of them
// zero-copy, and checks every byte against what its writer wrote (see
// cross_writer.c), and that each writer's N steps arrived exactly once.
// Usage: cross_check SOCKET N WRITER_ID...
#include <engram/engram.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace api = engram::api;
constexpr int kPayload = 48;

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: cross_check SOCKET N WRITER_ID...\n");
    return 2;
  }
  const int64_t n = std::atoll(argv[2]);
  std::map<int32_t, std::set<int64_t>> seen;
  std::map<int32_t, int> wrong;  // items whose payload differs, per writer
  for (int i = 3; i < argc; ++i) seen[std::atoi(argv[i])];
  int bad = 0;
  auto check = [&](int32_t writer, int64_t step, const uint8_t* payload) {
    auto it = seen.find(writer);
    if (it == seen.end() || step < 0 || step >= n || !it->second.insert(step).second) {
      if (bad++ < 10) std::fprintf(stderr, "unexpected item: writer %d step %lld\n", writer, (long long)step);
      return;
    }
    for (int i = 0; i < kPayload; ++i)
      if (payload[i] != static_cast<uint8_t>((writer * 31 + step * 7 + i) & 0xFF)) {
        if (bad++ < 10) std::fprintf(stderr, "writer %d step %lld: payload byte %d is %d\n", writer, (long long)step, i, payload[i]);
        ++wrong[writer];
        return;
      }
  };
  try {
    api::Client client = api::Client::connect(argv[1]);
    api::Table table = client.open_table("cross");
    engram_sample_options o = api::sample_options(64, 1, 0);
    for (bool zero_copy = true;; zero_copy = !zero_copy) {
      try {
        if (zero_copy) {
          api::Batch b = table.sample_view(o);
          for (uint32_t k = 0; k < b.size(); ++k) {
            int32_t writer;
            int64_t step;
            std::memcpy(&writer, b.views(k, 0).at(0).data, sizeof writer);
            std::memcpy(&step, b.views(k, 1).at(0).data, sizeof step);
            check(writer, step, static_cast<const uint8_t*>(b.views(k, 2).at(0).data));
          }
        } else {
          std::vector<int32_t> writers(o.batch_size);
          std::vector<int64_t> steps(o.batch_size);
          std::vector<uint8_t> payloads(o.batch_size * kPayload);
          void* bufs[3] = {writers.data(), steps.data(), payloads.data()};
          uint32_t got = table.sample(o, api::Span<void* const>(bufs, 3));
          for (uint32_t k = 0; k < got; ++k) check(writers[k], steps[k], &payloads[k * kPayload]);
        }
      } catch (const api::Error& e) {
        if (e.code() == ENGRAM_E_RATE_LIMITED) break;  // empty: every item taken
        throw;
      }
    }
  } catch (const api::Error& e) {
    std::fprintf(stderr, "cross_check: %s\n", e.what());
    return 1;
  }
  for (auto& [writer, steps] : seen) {
    std::printf("writer %d: %zu of %lld items, %d with bytes other than written\n", writer, steps.size(), (long long)n,
                wrong[writer]);
    if (static_cast<int64_t>(steps.size()) != n) ++bad;
  }
  return bad ? 1 : 0;
}
