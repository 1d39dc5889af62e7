#include "agents/common/nets.hpp"

#include <cstring>
#include <stdexcept>

namespace engram::agents {

DuelingQImpl::DuelingQImpl(const std::string& env, const std::vector<int64_t>& obs_shape, int64_t actions) {
  int64_t hidden = 128;
  if (env == "breakout") {
    conv_ = true;
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(obs_shape[0], 16, 3).stride(1)));
    int64_t side = obs_shape[1] - 2;
    fc1 = register_module("fc1", torch::nn::Linear(16 * side * side, hidden));
  } else {
    int64_t in = 1;
    for (int64_t d : obs_shape) in *= d;
    fc1 = register_module("fc1", torch::nn::Linear(in, hidden));
    fc2 = register_module("fc2", torch::nn::Linear(hidden, hidden));
  }
  value = register_module("value", torch::nn::Linear(hidden, 1));
  advantage = register_module("advantage", torch::nn::Linear(hidden, actions));
}

torch::Tensor DuelingQImpl::forward(torch::Tensor x) {
  if (conv_) {
    x = torch::relu(conv(x)).flatten(1);
    x = torch::relu(fc1(x));
  } else {
    x = torch::relu(fc1(x));
    x = torch::relu(fc2(x));
  }
  torch::Tensor a = advantage(x);
  return value(x) + a - a.mean(1, /*keepdim=*/true);
}

size_t parameter_count(torch::nn::Module& m) {
  size_t n = 0;
  for (const auto& p : m.parameters()) n += static_cast<size_t>(p.numel());
  return n;
}

std::vector<float> flatten_parameters(torch::nn::Module& m) {
  std::vector<float> flat;
  flat.reserve(parameter_count(m));
  for (const auto& p : m.parameters()) {
    torch::Tensor c = p.detach().contiguous().to(torch::kFloat32);
    const float* d = c.data_ptr<float>();
    flat.insert(flat.end(), d, d + c.numel());
  }
  return flat;
}

void load_parameters(torch::nn::Module& m, const float* data, size_t n) {
  if (n != parameter_count(m))
    throw std::runtime_error("parameters: " + std::to_string(n) + " floats for a network of " +
                             std::to_string(parameter_count(m)));
  torch::NoGradGuard no_grad;
  size_t off = 0;
  for (auto& p : m.parameters()) {
    std::memcpy(p.data_ptr<float>(), data + off, sizeof(float) * static_cast<size_t>(p.numel()));
    off += static_cast<size_t>(p.numel());
  }
}

void copy_parameters(torch::nn::Module& from, torch::nn::Module& to) {
  torch::NoGradGuard no_grad;
  auto src = from.parameters();
  auto dst = to.parameters();
  for (size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
}

void single_threaded() {
  torch::set_num_threads(1);
  torch::set_num_interop_threads(1);
}

}  // namespace engram::agents
