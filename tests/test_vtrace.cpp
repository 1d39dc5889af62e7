// V-trace and IMPALA's loss (agents/impala/vtrace.hpp): the golden vector
// of the agents' specification, the unclipped case, and the scan against
// the definition itself (a sum over s, not a recursion) on random inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "agents/impala/vtrace.hpp"

namespace engram::agents::impala {
namespace {

torch::Tensor column(std::vector<float> v) {  // [T] -> [T, 1]
  return torch::tensor(v).unsqueeze(1);
}

void expect_near(const torch::Tensor& got, std::vector<float> want, double tol) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
  torch::Tensor g = got.flatten().contiguous();
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(g[static_cast<int64_t>(i)].item<float>(), want[i], tol) << "at " << i;
}

struct GoldenA {
  torch::Tensor log_rhos = column({std::log(2.0f), std::log(0.5f), 0.0f, std::log(1.5f)});
  torch::Tensor discounts = column({0.9f, 0.0f, 0.9f, 0.9f});
  torch::Tensor rewards = column({1.0f, 2.0f, -1.0f, 0.5f});
  torch::Tensor values = column({0.5f, 1.0f, 0.2f, -0.3f});
  torch::Tensor bootstrap = torch::tensor({0.7f});
};

TEST(VTrace, GoldenVectorA) {
  GoldenA g;
  VTrace r = vtrace(g.log_rhos, g.discounts, g.rewards, g.values, g.bootstrap);
  expect_near(r.vs, {2.35f, 1.5f, 0.017f, 1.13f}, 1e-5);
  expect_near(r.pg_advantages, {1.85f, 0.5f, -0.183f, 1.43f}, 1e-5);
}

TEST(VTrace, GoldenVectorAUnclipped) {
  GoldenA g;
  // rho_bar only: c_bar stays 1 (with c_bar infinite too, vs_0 is 4.2).
  const double inf = std::numeric_limits<double>::infinity();
  VTrace r = vtrace(g.log_rhos, g.discounts, g.rewards, g.values, g.bootstrap, inf, 1.0, 1.0);
  expect_near(r.vs, {3.75f, 1.5f, 0.6605f, 1.845f}, 1e-5);
}

TEST(VTrace, GoldenVectorALosses) {
  GoldenA g;
  VTrace r = vtrace(g.log_rhos, g.discounts, g.rewards, g.values, g.bootstrap);
  torch::Tensor logits = torch::tensor({1.0f, 0.0f, 0.0f, 0.0f, 0.5f, -0.5f, 2.0f, 1.0f}).reshape({4, 1, 2});
  torch::Tensor actions = torch::tensor({0, 1, 0, 1}).reshape({4, 1});
  Loss l = impala_loss(logits, actions, g.values, r);
  EXPECT_NEAR(l.policy_gradient.item<float>(), 2.746745, 1e-5);
  EXPECT_NEAR(l.baseline.item<float>(), 2.875444, 1e-5);
  EXPECT_NEAR(l.entropy.item<float>(), -2.439757, 1e-5);
  EXPECT_NEAR(l.total.item<float>(), 4.16007, 1e-5);
}

TEST(VTrace, GradientsReachLogitsAndValuesNotTargets) {
  GoldenA g;
  torch::Tensor values = g.values.clone().requires_grad_(true);
  torch::Tensor logits = torch::zeros({4, 1, 2}).requires_grad_(true);
  VTrace r = vtrace(g.log_rhos, g.discounts, g.rewards, values, g.bootstrap);
  EXPECT_FALSE(r.vs.requires_grad());
  Loss l = impala_loss(logits, torch::tensor({0, 1, 0, 1}).reshape({4, 1}), values, r);
  l.total.backward();
  // d baseline / d V_t = -(vs_t - V_t), times the baseline cost 0.5.
  torch::Tensor want = -0.5 * (r.vs - g.values);
  EXPECT_TRUE(torch::allclose(values.grad(), want, 1e-5, 1e-6)) << values.grad() << want;
  EXPECT_GT(logits.grad().abs().sum().item<float>(), 0.0f);
}

// vs_s = V(x_s) + sum_{t>=s} (prod_{i=s}^{t-1} gamma_i c_i) delta_t, written
// out for one batch column, in double.
std::vector<double> brute_force_vs(const std::vector<double>& rho, const std::vector<double>& gamma,
                                   const std::vector<double>& r, const std::vector<double>& v, double boot,
                                   double rho_bar, double c_bar) {
  size_t T = rho.size();
  auto value = [&](size_t t) { return t == T ? boot : v[t]; };
  std::vector<double> vs(T);
  for (size_t s = 0; s < T; ++s) {
    double sum = 0;
    for (size_t t = s; t < T; ++t) {
      double prod = 1;
      for (size_t i = s; i < t; ++i) prod *= gamma[i] * std::min(c_bar, rho[i]);
      double delta = std::min(rho_bar, rho[t]) * (r[t] + gamma[t] * value(t + 1) - v[t]);
      sum += prod * delta;
    }
    vs[s] = v[s] + sum;
  }
  return vs;
}

TEST(VTrace, AgreesWithTheDefinitionOnRandomInputs) {
  torch::manual_seed(7);
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    int64_t T, B;
    double rho_bar, c_bar, rho_pg_bar;
  };
  for (Case c : {Case{1, 1, 1, 1, 1}, Case{5, 3, 1, 1, 1}, Case{20, 8, 1, 1, 1}, Case{7, 4, 0.5, 0.9, 2},
                 Case{12, 2, inf, inf, inf}, Case{9, 5, 2, 0.3, 1}}) {
    torch::Tensor log_rhos = torch::randn({c.T, c.B}, torch::kDouble);
    // Discounts of 0 (episode ends) and 0.99 mixed.
    torch::Tensor discounts = torch::where(torch::rand({c.T, c.B}, torch::kDouble) < 0.2,
                                           torch::zeros({c.T, c.B}, torch::kDouble),
                                           torch::full({c.T, c.B}, 0.99, torch::kDouble));
    torch::Tensor rewards = torch::randn({c.T, c.B}, torch::kDouble);
    torch::Tensor values = torch::randn({c.T, c.B}, torch::kDouble);
    torch::Tensor boot = torch::randn({c.B}, torch::kDouble);
    VTrace got = vtrace(log_rhos, discounts, rewards, values, boot, c.rho_bar, c.c_bar, c.rho_pg_bar);
    for (int64_t b = 0; b < c.B; ++b) {
      std::vector<double> rho, gamma, r, v;
      for (int64_t t = 0; t < c.T; ++t) {
        rho.push_back(std::exp(log_rhos[t][b].item<double>()));
        gamma.push_back(discounts[t][b].item<double>());
        r.push_back(rewards[t][b].item<double>());
        v.push_back(values[t][b].item<double>());
      }
      double bv = boot[b].item<double>();
      std::vector<double> want = brute_force_vs(rho, gamma, r, v, bv, c.rho_bar, c.c_bar);
      for (int64_t t = 0; t < c.T; ++t) {
        EXPECT_NEAR(got.vs[t][b].item<double>(), want[static_cast<size_t>(t)], 1e-9)
            << "T " << c.T << " B " << c.B << " t " << t << " b " << b;
        double next_vs = t + 1 < c.T ? want[static_cast<size_t>(t + 1)] : bv;
        double adv = std::min(c.rho_pg_bar, rho[static_cast<size_t>(t)]) *
                     (r[static_cast<size_t>(t)] + gamma[static_cast<size_t>(t)] * next_vs - v[static_cast<size_t>(t)]);
        EXPECT_NEAR(got.pg_advantages[t][b].item<double>(), adv, 1e-9);
      }
    }
  }
}

TEST(VTrace, RefusesMismatchedShapes) {
  torch::Tensor x = torch::zeros({4, 2});
  EXPECT_THROW(vtrace(x, x, x, x, torch::zeros({3})), std::invalid_argument);
  EXPECT_THROW(vtrace(x, torch::zeros({4, 3}), x, x, torch::zeros({2})), std::invalid_argument);
  EXPECT_THROW(vtrace(x, x, x, x, torch::zeros({2}), -1), std::invalid_argument);
}

}  // namespace
}  // namespace engram::agents::impala
