// V-trace (Espeholt et al. 2018, section 4.1) and IMPALA's loss, on plain
// tensors so that they can be tested alone and reused by any learner.
//
// Shapes: time-major, [T, B] for per-step quantities, [B] for the value of
// the state after the last step, [T, B, A] for policy logits. With
// rho_t = pi(a_t|x_t) / mu(a_t|x_t) (log_rhos holds its logarithm):
//   delta_t        = min(rho_bar, rho_t) (r_t + gamma_t V(x_{t+1}) - V(x_t))
//   vs_t - V(x_t)  = delta_t + gamma_t min(c_bar, rho_t) (vs_{t+1} - V(x_{t+1}))
//   advantage_t    = min(rho_pg_bar, rho_t) (r_t + gamma_t vs_{t+1} - V(x_t))
// with vs_T = V(x_T) = bootstrap_value. gamma_t is the discount stored with
// step t: 0 after a terminal state, so nothing flows across episodes.
// Cost: one elementwise pass and a backward scan of T steps over [B].
#pragma once

#include <torch/torch.h>

#include <limits>

namespace engram::agents::impala {

struct VTrace {
  torch::Tensor vs;             // [T, B], the value targets
  torch::Tensor pg_advantages;  // [T, B], the policy gradient's advantages
};

// No gradient flows through the results. rho_bar, c_bar and rho_pg_bar may
// be infinite (no clipping); they must not be below 0.
VTrace vtrace(const torch::Tensor& log_rhos, const torch::Tensor& discounts, const torch::Tensor& rewards,
              const torch::Tensor& values, const torch::Tensor& bootstrap_value, double rho_bar = 1.0,
              double c_bar = 1.0, double rho_pg_bar = 1.0);

// IMPALA's three loss terms, each summed over [T, B]:
//   policy_gradient = -sum log pi(a_t|x_t) advantage_t
//   baseline        = 0.5 sum (vs_t - V(x_t))^2
//   entropy         = sum_t sum_a pi(a|x_t) log pi(a|x_t)   (the negative entropy)
//   total           = policy_gradient + baseline_cost * baseline + entropy_cost * entropy
// Gradients flow into logits and values, not through vs or the advantages.
struct Loss {
  torch::Tensor policy_gradient, baseline, entropy, total;
};
Loss impala_loss(const torch::Tensor& logits, const torch::Tensor& actions, const torch::Tensor& values,
                 const VTrace& targets, double baseline_cost = 0.5, double entropy_cost = 0.01);

}  // namespace engram::agents::impala
