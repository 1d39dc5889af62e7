// CartPole-v1 as Gymnasium's classic_control/cartpole.py defines it (the
// constants, Euler integration, termination at |x| > 2.4 or |theta| > 12
// degrees, reward 1 per step including the last, truncation at 500 steps,
// reset uniform in [-0.05, 0.05]). The state is double, the observation
// float32 (x, x_dot, theta, theta_dot). Action 0 pushes left, 1 right.
#pragma once

#include <array>

#include "agents/common/env/env.hpp"
#include "agents/common/env/rng.hpp"

namespace engram::agents {

class CartPole : public Env {
 public:
  static constexpr int kMaxSteps = 500;

  explicit CartPole(uint64_t seed = 0) : rng_(seed) {}
  const char* name() const override { return "cartpole"; }
  std::vector<int64_t> observation_shape() const override { return {4}; }
  int num_actions() const override { return 2; }
  using Env::reset;
  void reset(float* obs) override;
  StepResult step(int action, float* obs) override;

  // For tests: the state as it stands, and a state to start from.
  const std::array<double, 4>& state() const { return s_; }
  void set_state(const std::array<double, 4>& s) {
    s_ = s;
    steps_ = 0;
  }

 protected:
  void seed_stream(uint64_t seed) override { rng_.reseed(seed); }

 private:
  void observe(float* obs) const;
  Rng rng_;
  std::array<double, 4> s_{};
  int steps_ = 0;
};

}  // namespace engram::agents
