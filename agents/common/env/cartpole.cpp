#include "agents/common/env/cartpole.hpp"

#include <cmath>

namespace engram::agents {

namespace {
constexpr double kGravity = 9.8;
constexpr double kCartMass = 1.0;
constexpr double kPoleMass = 0.1;
constexpr double kTotalMass = kCartMass + kPoleMass;
constexpr double kHalfLength = 0.5;
constexpr double kPoleMassLength = kPoleMass * kHalfLength;
constexpr double kForce = 10.0;
constexpr double kTau = 0.02;
constexpr double kThetaLimit = 12 * 2 * M_PI / 360;
constexpr double kXLimit = 2.4;
}  // namespace

void CartPole::observe(float* obs) const {
  for (int i = 0; i < 4; ++i) obs[i] = static_cast<float>(s_[i]);
}

void CartPole::reset(float* obs) {
  for (double& v : s_) v = rng_.uniform(-0.05, 0.05);
  steps_ = 0;
  observe(obs);
}

StepResult CartPole::step(int action, float* obs) {
  auto& [x, x_dot, theta, theta_dot] = s_;
  double force = action == 1 ? kForce : -kForce;
  double cos_t = std::cos(theta), sin_t = std::sin(theta);
  double temp = (force + kPoleMassLength * theta_dot * theta_dot * sin_t) / kTotalMass;
  double theta_acc = (kGravity * sin_t - cos_t * temp) / (kHalfLength * (4.0 / 3.0 - kPoleMass * cos_t * cos_t / kTotalMass));
  double x_acc = temp - kPoleMassLength * theta_acc * cos_t / kTotalMass;
  x += kTau * x_dot;
  x_dot += kTau * x_acc;
  theta += kTau * theta_dot;
  theta_dot += kTau * theta_acc;
  ++steps_;
  observe(obs);
  StepResult r;
  r.reward = 1.0f;
  r.terminated = x < -kXLimit || x > kXLimit || theta < -kThetaLimit || theta > kThetaLimit;
  r.truncated = !r.terminated && steps_ >= kMaxSteps;
  return r;
}

}  // namespace engram::agents
