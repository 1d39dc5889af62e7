// The Q-networks of the reference agents (LibTorch), and their parameters
// as one flat float32 vector: the layout the parameter table carries
// (engram_params(7)... see params.hpp): every parameter tensor in
// named_parameters() order, each flattened row-major, concatenated.
#pragma once

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "agents/common/env/env.hpp"

namespace engram::agents {

// The torso both networks share, 128 features out. CartPole: an MLP of
// two 128-unit layers. Breakout: MinAtar's small network, one 3x3
// convolution of 16 channels and a 128-unit layer. Its parameters come
// first in named_parameters() order, as the parameter table carries them.
class Torso {
 public:
  static constexpr int64_t kFeatures = 128;
  Torso(torch::nn::Module& owner, const std::string& env, const std::vector<int64_t>& obs_shape);
  torch::Tensor forward(torch::Tensor obs);

 private:
  bool conv_ = false;
  torch::nn::Conv2d conv{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

// A dueling Q-network (Wang et al. 2016): the torso, then a value head and
// an advantage head, Q = V + A - mean(A).
class DuelingQImpl : public torch::nn::Module {
 public:
  DuelingQImpl(const std::string& env, const std::vector<int64_t>& obs_shape, int64_t actions);
  torch::Tensor forward(torch::Tensor obs);

 private:
  Torso torso_;
  torch::nn::Linear value{nullptr}, advantage{nullptr};
};
TORCH_MODULE(DuelingQ);

// An actor-critic network (IMPALA): the torso, then a policy head (logits
// over actions) and a value head.
class PolicyValueImpl : public torch::nn::Module {
 public:
  PolicyValueImpl(const std::string& env, const std::vector<int64_t>& obs_shape, int64_t actions);
  // obs [N, ...] -> logits [N, A] and values [N].
  std::pair<torch::Tensor, torch::Tensor> forward(torch::Tensor obs);

 private:
  Torso torso_;
  torch::nn::Linear policy{nullptr}, value{nullptr};
};
TORCH_MODULE(PolicyValue);

// The parameters as one flat vector, and back (sizes must match).
std::vector<float> flatten_parameters(torch::nn::Module& m);
void load_parameters(torch::nn::Module& m, const float* data, size_t n);
size_t parameter_count(torch::nn::Module& m);
// Copies every parameter of `from` into `to` (the target network).
void copy_parameters(torch::nn::Module& from, torch::nn::Module& to);

// Sets up an agent's process for LibTorch; call first thing in main.
// - One thread per process, for LibTorch and OpenBLAS alike: the agents run
//   several processes on few cores, and a second thread per process only
//   competes with them (updates were 1.6-4.8x slower with two threads each
//   on two cores). OpenBLAS sizes its pool when it loads, before main, so
//   OPENBLAS_NUM_THREADS must already be set then (blas_setup.hpp,
//   restart_with_blas_settings).
// - A heap that keeps what it got: every update frees and allocates the
//   same large tensors, and glibc gave the main thread's freed top back to
//   the kernel (trim) or mapped large blocks afresh, so each update
//   faulted its pages in and OpenBLAS zeroed them again: a third of
//   IMPALA's learner in perf, 117k against 181k CartPole frames/s.
void setup_process();
// A learner's first step: setup_process, LibTorch's generator seeded with
// `seed`; returns env `env`'s sizes.
EnvShape start_learner(const std::string& env, uint64_t seed);
// LibTorch's CPU generator, for a learner's state (learner_state.hpp):
// what it draws after a resume is what it would have drawn. The agents'
// learners draw from it only to initialise their networks today; saved
// so that one that draws later (dropout, noise) resumes all the same.
std::vector<uint8_t> torch_rng_state();
void set_torch_rng_state(const std::vector<uint8_t>& state);

}  // namespace engram::agents
