// Ape-X's arithmetic that needs no network (Horgan et al. 2018): the
// actors' epsilons, n-step transitions with the
// discount each one really had, and the learner's importance weights.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

namespace engram::agents::apex {

// Env i of n in all (i = 0..n-1) explores with 0.4^(1 + 7 i / (n - 1)):
// from 0.4 down to 0.4^8 (about 0.00066). One env gets 0.4.
inline double epsilon(size_t i, size_t n) {
  if (n <= 1) return 0.4;
  return std::pow(0.4, 1.0 + 7.0 * static_cast<double>(i) / static_cast<double>(n - 1));
}

// One n-step transition: from the observation at step t, the action taken
// there, the discounted rewards of the steps that followed (up to n), the
// discount of the bootstrap (gamma^m for the m steps taken, 0 if the
// episode terminated within them), and the observation to bootstrap from.
struct Transition {
  std::vector<float> obs;
  int32_t action = 0;
  float reward = 0;    // sum_{k<m} gamma^k r_{t+k}
  float discount = 0;  // gamma^m, or 0 after a terminal state
  std::vector<float> next_obs;
  float q = 0;         // the actor's Q(obs, action) when it acted, for the initial priority
};

// Per env: collects steps and gives out each transition once its n steps
// (or its episode's end) are known. On termination the remaining
// transitions get discount 0; on truncation they bootstrap from the last
// observation with gamma^m, m the steps each one really took.
class NStep {
 public:
  NStep(size_t n, float gamma) : n_(n), gamma_(gamma) {}

  // The agent saw `obs`, estimated q = Q(obs, action), took `action`, got
  // `reward`, and the env now shows `next_obs` (terminated / truncated as
  // the step said). Completed transitions are appended to *out.
  void add(const float* obs, size_t obs_size, int32_t action, float q, float reward, const float* next_obs,
           bool terminated, bool truncated, std::vector<Transition>* out) {
    Pending p;
    p.t.obs.assign(obs, obs + obs_size);
    p.t.action = action;
    p.t.q = q;
    pending_.push_back(std::move(p));
    // Every pending transition gains this reward at its own distance.
    for (Pending& q_ : pending_) {
      q_.t.reward += q_.scale * reward;
      q_.scale *= gamma_;
      ++q_.steps;
    }
    bool end = terminated || truncated;
    while (!pending_.empty() && (pending_.front().steps == n_ || end)) {
      Pending& f = pending_.front();
      f.t.discount = terminated ? 0.0f : f.scale;  // gamma^steps
      f.t.next_obs.assign(next_obs, next_obs + obs_size);
      out->push_back(std::move(f.t));
      pending_.pop_front();
    }
  }
  size_t pending() const { return pending_.size(); }

 private:
  struct Pending {
    Transition t;
    float scale = 1;  // gamma^steps so far
    size_t steps = 0;
  };
  size_t n_;
  float gamma_;
  std::deque<Pending> pending_;
};

// Importance weights of a prioritized batch: w_i = (N P(i))^-beta, divided
// by the batch's largest, so that they only scale updates down. N is the
// table's size when each item was drawn, P(i) its probability then.
inline std::vector<float> importance_weights(const std::vector<double>& probability, const std::vector<uint32_t>& size,
                                             double beta) {
  std::vector<float> w(probability.size());
  double max = 0;
  std::vector<double> raw(probability.size());
  for (size_t i = 0; i < probability.size(); ++i) {
    double np = static_cast<double>(size[i]) * probability[i];
    raw[i] = np > 0 ? std::pow(np, -beta) : 0.0;
    if (raw[i] > max) max = raw[i];
  }
  for (size_t i = 0; i < raw.size(); ++i) w[i] = max > 0 ? static_cast<float>(raw[i] / max) : 1.0f;
  return w;
}

}  // namespace engram::agents::apex
