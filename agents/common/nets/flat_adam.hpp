// Adam with gradient-norm clipping over a module's parameters moved into
// one flat tensor: the same arithmetic as torch::optim::Adam (no weight
// decay, no AMSGrad) after torch::nn::utils::clip_grad_norm_ (norm 2), in
// a handful of tensor operations per step instead of a dozen per parameter
// tensor. For the small networks of CartPole the per-operation overhead
// was the step: Adam and the clipping took a fifth of the Ape-X learner's
// main thread (bench/NOTES.md, "Ape-X CartPole's learner").
//
// How: the module's parameters become views of one tensor, and their
// gradients views of another. Backward accumulates into a gradient that
// is defined in place (autograd's AccumulateGrad, when the backward pass
// itself builds no graph), so the views stay views; zero_grad zeroes the
// flat gradient in place. Caveats: the module must not replace a
// parameter's tensor or gradient afterwards (set_data, a fresh grad, an
// optimizer's zero_grad(set_to_none)), and backward must not be called
// with create_graph; step() checks that the views still hold (a few
// pointer comparisons) and throws if not, rather than train nothing.
#pragma once

#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace engram::agents {

class FlatAdam {
 public:
  FlatAdam(torch::nn::Module& m, double lr, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8)
      : params_(m.parameters()), lr_(lr), beta1_(beta1), beta2_(beta2), eps_(eps) {
    int64_t total = 0;
    for (const auto& p : params_) total += p.numel();
    torch::NoGradGuard no_grad;
    param_ = torch::empty({total});
    grad_ = torch::zeros({total});
    m_ = torch::zeros({total});
    v_ = torch::zeros({total});
    int64_t off = 0;
    for (auto& p : params_) {
      if (p.scalar_type() != torch::kFloat32 || !p.is_contiguous())
        throw std::runtime_error("FlatAdam: parameters must be contiguous float32");
      torch::Tensor slot = param_.narrow(0, off, p.numel()).view(p.sizes());
      slot.copy_(p);
      p.set_data(slot);
      p.mutable_grad() = grad_.narrow(0, off, p.numel()).view(p.sizes());
      off += p.numel();
    }
  }

  void zero_grad() { grad_.zero_(); }

  // Scales the gradient by min(1, max_norm / (norm + 1e-6)), as
  // clip_grad_norm_ does, then takes one Adam step. Returns the norm
  // before clipping.
  double step(double max_norm) {
    if (!check()) throw std::runtime_error("the network's parameters left the optimizer's flat tensor");
    torch::NoGradGuard no_grad;
    double norm = grad_.norm().item<double>();
    // clip_grad_norm_ would scale by NaN here and poison every parameter.
    if (!std::isfinite(norm))
      throw std::runtime_error("the gradient's norm is " + std::to_string(norm) +
                               ": the loss diverged (try a lower learning rate, --lr)");
    double coef = max_norm / (norm + 1e-6);
    if (coef < 1.0) grad_.mul_(coef);
    ++steps_;
    double bias1 = 1.0 - std::pow(beta1_, static_cast<double>(steps_));
    double bias2 = 1.0 - std::pow(beta2_, static_cast<double>(steps_));
    m_.mul_(beta1_).add_(grad_, 1.0 - beta1_);
    v_.mul_(beta2_).addcmul_(grad_, grad_, 1.0 - beta2_);
    torch::Tensor denom = (v_.sqrt() / std::sqrt(bias2)).add_(eps_);
    param_.addcdiv_(m_, denom, -lr_ / bias1);
    return norm;
  }

  // The optimiser's state, for a learner's checkpoint (learner_state.hpp):
  // the first moments, then the second, and the steps taken. With the
  // module's parameters they are all an update depends on, so a restored
  // optimiser steps bit for bit as the saved one would have.
  std::vector<float> moments() const {
    std::vector<float> out(static_cast<size_t>(2 * m_.numel()));
    std::memcpy(out.data(), m_.data_ptr<float>(), static_cast<size_t>(m_.numel()) * sizeof(float));
    std::memcpy(out.data() + m_.numel(), v_.data_ptr<float>(), static_cast<size_t>(v_.numel()) * sizeof(float));
    return out;
  }
  int64_t steps() const { return steps_; }
  void restore(const std::vector<float>& moments, int64_t steps) {
    if (moments.size() != static_cast<size_t>(2 * m_.numel()))
      throw std::runtime_error("the optimiser's state holds " + std::to_string(moments.size()) + " moments; want " +
                               std::to_string(2 * m_.numel()));
    std::memcpy(m_.data_ptr<float>(), moments.data(), static_cast<size_t>(m_.numel()) * sizeof(float));
    std::memcpy(v_.data_ptr<float>(), moments.data() + m_.numel(), static_cast<size_t>(v_.numel()) * sizeof(float));
    steps_ = steps;
  }

  // Do the parameters and their gradients still share the flat tensors?
  bool check() const {
    for (const auto& p : params_)
      if (!p.is_alias_of(param_) || !p.grad().defined() || !p.grad().is_alias_of(grad_)) return false;
    return true;
  }

 private:
  std::vector<torch::Tensor> params_;
  torch::Tensor param_, grad_, m_, v_;
  double lr_, beta1_, beta2_, eps_;
  int64_t steps_ = 0;
};

}  // namespace engram::agents
