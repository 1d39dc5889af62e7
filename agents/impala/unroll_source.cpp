#include "agents/impala/unroll_source.hpp"

#include <optional>
#include <stdexcept>
#include <string>

#include "agents/impala/tables.hpp"

namespace engram::agents::impala {

std::unique_ptr<Unrolls> UnrollSource::next(const std::function<bool()>& stop) {
  const int64_t steps = o_.unroll + 1;
  auto batch = std::make_unique<Unrolls>(o_.batch, steps, obs_size_, actions_, byte_observations(o_));
  std::vector<bool> have(static_cast<size_t>(o_.batch), false);
  int64_t filled = 0;
  if (o_.reproducible) {  // what came early for this rollout
    auto it = early_.find(rollout_);
    if (it != early_.end()) {
      for (auto& [env, u] : it->second) place(*batch, have, *u, 0, &filled);
      early_.erase(it);
    }
  }
  while (filled < o_.batch) {
    if (stop()) return nullptr;
    // In arrival order the batch is sampled into as it is; the
    // reproducible order goes through `got`, to be placed by env.
    std::optional<Unrolls> staging;
    if (o_.reproducible) staging.emplace(o_.batch - filled, steps, obs_size_, actions_, byte_observations(o_));
    Unrolls& got = o_.reproducible ? *staging : *batch;
    int64_t first = o_.reproducible ? 0 : filled;
    std::vector<void*> bufs = got.buffers(first);
    uint32_t n = 0;
    try {
      n = t_.sample(api::sample_options(static_cast<uint32_t>(o_.batch - filled), static_cast<uint32_t>(steps), 200),
                    bufs);
    } catch (const api::Error& e) {
      if (e.code() == ENGRAM_E_TIMEOUT) continue;  // actors have not caught up: look at stop() again
      throw;
    }
    for (int64_t i = first; i < first + n; ++i) {
      if (!got.whole(i))
        throw std::runtime_error("unroll of env " + std::to_string(got.env_of(i)) + " is not one env's " +
                                 std::to_string(o_.unroll + 1) + " consecutive steps");
      if (!o_.reproducible) {
        ++filled;
      } else if (got.rollout_of(i) == rollout_) {
        place(*batch, have, got, i, &filled);
      } else if (got.rollout_of(i) == rollout_ + 1) {
        auto u = std::make_unique<Unrolls>(1, steps, obs_size_, actions_, byte_observations(o_));
        u->copy_item(got, i, 0);
        early_[rollout_ + 1][got.env_of(i)] = std::move(u);
      } else {
        throw std::runtime_error("rollout " + std::to_string(got.rollout_of(i)) + " of env " +
                                 std::to_string(got.env_of(i)) + " while learning from rollout " +
                                 std::to_string(rollout_));
      }
    }
  }
  ++rollout_;
  return batch;
}

void UnrollSource::place(Unrolls& batch, std::vector<bool>& have, const Unrolls& from, int64_t i, int64_t* filled) {
  int32_t env = from.env_of(i);
  if (env < 0 || env >= o_.envs || have[static_cast<size_t>(env)])
    throw std::runtime_error("env " + std::to_string(env) + " twice or out of range in rollout " +
                             std::to_string(rollout_));
  batch.copy_item(from, i, env);
  have[static_cast<size_t>(env)] = true;
  ++*filled;
}

}  // namespace engram::agents::impala
