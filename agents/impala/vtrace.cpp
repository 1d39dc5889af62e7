#include "agents/impala/vtrace.hpp"

#include <stdexcept>
#include <string>

namespace engram::agents::impala {

namespace {
void expect(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("vtrace: " + what);
}
}  // namespace

VTrace vtrace(const torch::Tensor& log_rhos, const torch::Tensor& discounts, const torch::Tensor& rewards,
              const torch::Tensor& values, const torch::Tensor& bootstrap_value, double rho_bar, double c_bar,
              double rho_pg_bar) {
  expect(log_rhos.dim() == 2, "log_rhos must be [T, B]");
  expect(discounts.sizes() == log_rhos.sizes() && rewards.sizes() == log_rhos.sizes() &&
             values.sizes() == log_rhos.sizes(),
         "discounts, rewards and values must be [T, B] like log_rhos");
  expect(bootstrap_value.dim() == 1 && bootstrap_value.size(0) == log_rhos.size(1), "bootstrap_value must be [B]");
  expect(rho_bar >= 0 && c_bar >= 0 && rho_pg_bar >= 0, "clipping thresholds must be >= 0");
  torch::NoGradGuard no_grad;
  torch::Tensor v = values.detach();
  torch::Tensor rhos = log_rhos.detach().exp();
  torch::Tensor clipped = rhos.clamp_max(rho_bar);
  torch::Tensor cs = rhos.clamp_max(c_bar);
  torch::Tensor next_values = torch::cat({v.slice(0, 1), bootstrap_value.detach().unsqueeze(0)}, 0);
  torch::Tensor deltas = clipped * (rewards + discounts * next_values - v);
  // The backward scan: vs_t - V(x_t) = delta_t + gamma_t c_t (vs_{t+1} - V(x_{t+1})).
  const int64_t T = log_rhos.size(0);
  torch::Tensor decay = discounts * cs;
  torch::Tensor diff = torch::empty_like(v);
  torch::Tensor acc = torch::zeros_like(bootstrap_value);
  for (int64_t t = T - 1; t >= 0; --t) {
    acc = deltas[t] + decay[t] * acc;
    diff[t] = acc;
  }
  torch::Tensor vs = diff + v;
  torch::Tensor next_vs = torch::cat({vs.slice(0, 1), bootstrap_value.detach().unsqueeze(0)}, 0);
  torch::Tensor adv = rhos.clamp_max(rho_pg_bar) * (rewards + discounts * next_vs - v);
  return {vs, adv};
}

Loss impala_loss(const torch::Tensor& logits, const torch::Tensor& actions, const torch::Tensor& values,
                 const VTrace& targets, double baseline_cost, double entropy_cost) {
  expect(logits.dim() == 3 && logits.size(0) == values.size(0) && logits.size(1) == values.size(1),
         "logits must be [T, B, A] beside values [T, B]");
  expect(actions.sizes() == values.sizes(), "actions must be [T, B]");
  torch::Tensor log_pi = torch::log_softmax(logits, -1);
  torch::Tensor log_pi_a = log_pi.gather(-1, actions.to(torch::kLong).unsqueeze(-1)).squeeze(-1);
  Loss l;
  l.policy_gradient = -(log_pi_a * targets.pg_advantages.detach()).sum();
  l.baseline = 0.5 * (targets.vs.detach() - values).pow(2).sum();
  l.entropy = (log_pi.exp() * log_pi).sum();
  l.total = l.policy_gradient + baseline_cost * l.baseline + entropy_cost * l.entropy;
  return l;
}

}  // namespace engram::agents::impala
