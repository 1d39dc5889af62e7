#include "agents/common/nets/nets.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <mutex>

#include <malloc.h>

#include <cstring>
#include <stdexcept>

namespace engram::agents {

Torso::Torso(torch::nn::Module& owner, const std::string& env, const std::vector<int64_t>& obs_shape) {
  if (env == "breakout") {
    conv_ = true;
    conv = owner.register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(obs_shape[0], 16, 3).stride(1)));
    int64_t side = obs_shape[1] - 2;
    fc1 = owner.register_module("fc1", torch::nn::Linear(16 * side * side, kFeatures));
  } else {
    int64_t in = 1;
    for (int64_t d : obs_shape) in *= d;
    fc1 = owner.register_module("fc1", torch::nn::Linear(in, kFeatures));
    fc2 = owner.register_module("fc2", torch::nn::Linear(kFeatures, kFeatures));
  }
}

torch::Tensor Torso::forward(torch::Tensor x) {
  if (conv_) return torch::relu(fc1(torch::relu(conv(x)).flatten(1)));
  return torch::relu(fc2(torch::relu(fc1(x))));
}

DuelingQImpl::DuelingQImpl(const std::string& env, const std::vector<int64_t>& obs_shape, int64_t actions)
    : torso_(*this, env, obs_shape) {
  value = register_module("value", torch::nn::Linear(Torso::kFeatures, 1));
  advantage = register_module("advantage", torch::nn::Linear(Torso::kFeatures, actions));
}

torch::Tensor DuelingQImpl::forward(torch::Tensor obs) {
  torch::Tensor x = torso_.forward(obs);
  torch::Tensor a = advantage(x);
  return value(x) + a - a.mean(1, /*keepdim=*/true);
}

PolicyValueImpl::PolicyValueImpl(const std::string& env, const std::vector<int64_t>& obs_shape, int64_t actions)
    : torso_(*this, env, obs_shape) {
  policy = register_module("policy", torch::nn::Linear(Torso::kFeatures, actions));
  value = register_module("value", torch::nn::Linear(Torso::kFeatures, 1));
}

std::pair<torch::Tensor, torch::Tensor> PolicyValueImpl::forward(torch::Tensor obs) {
  torch::Tensor x = torso_.forward(obs);
  return {policy(x), value(x).squeeze(1)};
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

void setup_process() {
  torch::set_num_threads(1);
  torch::set_num_interop_threads(1);
  // Large enough for any agent's tensors; mallopt's int caps it below 2 GiB.
  constexpr int kKeep = 1 << 30;
  (void)mallopt(M_TRIM_THRESHOLD, kKeep);
  (void)mallopt(M_MMAP_THRESHOLD, kKeep);
}

EnvShape start_learner(const std::string& env, uint64_t seed) {
  setup_process();
  torch::manual_seed(seed);
  return env_shape(env);
}

std::vector<uint8_t> torch_rng_state() {
  torch::Tensor t = at::detail::getDefaultCPUGenerator().get_state();
  const uint8_t* p = t.data_ptr<uint8_t>();
  return std::vector<uint8_t>(p, p + t.numel());
}

void set_torch_rng_state(const std::vector<uint8_t>& state) {
  torch::Tensor t = torch::empty({static_cast<int64_t>(state.size())}, torch::kUInt8);
  std::copy(state.begin(), state.end(), t.data_ptr<uint8_t>());
  at::Generator g = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_state(t);  // throws (naming what is wrong) on a state of the wrong size
}

}  // namespace engram::agents
