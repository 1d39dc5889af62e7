// The engram learner's reading of the unroll queue: `batch` unrolls in
// arrival order, or with --reproducible all E of rollout k in env order
// (items of rollout k + 1 that come first are kept for the next call).
#pragma once

#include <engram/engram.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "agents/impala/options.hpp"
#include "agents/impala/unrolls.hpp"

namespace engram::agents::impala {

class UnrollSource {
 public:
  UnrollSource(const Options& o, api::Table& t, int64_t obs_size, int64_t actions)
      : o_(o), t_(t), obs_size_(obs_size), actions_(actions) {}
  // The next batch, or nullptr if `stop()` said so while waiting.
  std::unique_ptr<Unrolls> next(const std::function<bool()>& stop);
  // --reproducible, resumed: the next batch is rollout `k`'s.
  void start_at(int32_t k) { rollout_ = k; }

 private:
  void place(Unrolls& batch, std::vector<bool>& have, const Unrolls& from, int64_t i, int64_t* filled);

  const Options& o_;
  api::Table& t_;
  int64_t obs_size_, actions_;
  int32_t rollout_ = 0;
  std::map<int32_t, std::map<int32_t, std::unique_ptr<Unrolls>>> early_;
};

}  // namespace engram::agents::impala
