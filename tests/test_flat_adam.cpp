// FlatAdam (agents/common/nets/flat_adam.hpp) against what it replaces:
// torch::optim::Adam after clip_grad_norm_, step by step on twin networks,
// with gradients large enough to be clipped and small enough not to be.
#include <gtest/gtest.h>

#include "agents/common/nets/flat_adam.hpp"
#include "agents/common/nets/nets.hpp"

namespace engram::agents {
namespace {

double max_difference(torch::nn::Module& a, torch::nn::Module& b) {
  double d = 0;
  auto pa = a.parameters(), pb = b.parameters();
  for (size_t i = 0; i < pa.size(); ++i) d = std::max(d, (pa[i] - pb[i]).abs().max().item<double>());
  return d;
}

TEST(FlatAdam, TakesTheStepsOfTorchAdamAfterClipping) {
  torch::manual_seed(7);
  const std::vector<int64_t> shape{4};
  DuelingQ flat(std::string("cartpole"), shape, 2), reference(std::string("cartpole"), shape, 2);
  copy_parameters(*flat, *reference);
  FlatAdam fa(*flat, 1e-3);
  torch::optim::Adam adam(reference->parameters(), torch::optim::AdamOptions(1e-3));
  ASSERT_EQ(max_difference(*flat, *reference), 0.0) << "moving the parameters must not change them";
  bool clipped = false, unclipped = false;
  for (int step = 0; step < 50; ++step) {
    torch::Tensor x = torch::randn({32, 4});
    // Targets far off at first (norms well above 10: clipped), then near.
    torch::Tensor y = torch::randn({32, 2}) * (step < 25 ? 100.0 : 0.01);
    fa.zero_grad();
    torch::nn::functional::mse_loss(flat->forward(x), y).backward();
    double norm = fa.step(10.0);
    adam.zero_grad();
    torch::nn::functional::mse_loss(reference->forward(x), y).backward();
    double ref_norm = torch::nn::utils::clip_grad_norm_(reference->parameters(), 10.0);
    adam.step();
    EXPECT_NEAR(norm, ref_norm, 1e-4 * std::max(1.0, ref_norm)) << "step " << step;
    (norm > 10 ? clipped : unclipped) = true;
    ASSERT_LT(max_difference(*flat, *reference), 1e-5) << "step " << step;
    ASSERT_TRUE(fa.check()) << "step " << step;
  }
  EXPECT_TRUE(clipped && unclipped) << "both paths of the clipping were taken";
}

TEST(FlatAdam, ASavedNetworkLoadsIntoAFreshOne) {
  DuelingQ net(std::string("cartpole"), std::vector<int64_t>{4}, 2);
  FlatAdam fa(*net, 1e-3);
  fa.zero_grad();
  net->forward(torch::randn({8, 4})).sum().backward();
  fa.step(10.0);
  std::string path = ::testing::TempDir() + "flat_adam_model.pt";
  torch::save(net, path);
  DuelingQ fresh(std::string("cartpole"), std::vector<int64_t>{4}, 2);
  torch::load(fresh, path);
  EXPECT_EQ(max_difference(*net, *fresh), 0.0);
  EXPECT_EQ(flatten_parameters(*net), flatten_parameters(*fresh));
}

// A learner's checkpoint: parameters and optimiser state restored into a
// fresh network and optimiser step bit for bit as the saved ones do.
TEST(FlatAdam, ARestoredOptimiserStepsAsTheSavedOne) {
  torch::manual_seed(3);
  auto train = [](DuelingQ& net, FlatAdam& fa, int from, int to) {
    for (int step = from; step < to; ++step) {
      torch::manual_seed(static_cast<uint64_t>(100 + step));
      torch::Tensor x = torch::randn({16, 4}), y = torch::randn({16, 2});
      fa.zero_grad();
      torch::nn::functional::mse_loss(net->forward(x), y).backward();
      fa.step(10.0);
    }
  };
  DuelingQ a(std::string("cartpole"), std::vector<int64_t>{4}, 2);
  FlatAdam fa(*a, 1e-3);
  train(a, fa, 0, 10);
  std::vector<float> params = flatten_parameters(*a), moments = fa.moments();
  int64_t steps = fa.steps();
  train(a, fa, 10, 20);

  DuelingQ b(std::string("cartpole"), std::vector<int64_t>{4}, 2);
  FlatAdam fb(*b, 1e-3);
  load_parameters(*b, params.data(), params.size());
  fb.restore(moments, steps);
  train(b, fb, 10, 20);
  EXPECT_EQ(flatten_parameters(*a), flatten_parameters(*b));
  EXPECT_THROW(fb.restore(std::vector<float>(3), 1), std::runtime_error);
}

// A learner's state holds LibTorch's generator: restored, it draws again
// what it drew after it was saved.
TEST(TorchRng, ARestoredGeneratorDrawsWhatTheSavedOneDrew) {
  torch::manual_seed(11);
  (void)torch::randn({5});
  std::vector<uint8_t> state = torch_rng_state();
  torch::Tensor first = torch::randn({64});
  (void)torch::randn({7});
  set_torch_rng_state(state);
  EXPECT_TRUE(torch::equal(first, torch::randn({64})));
  EXPECT_ANY_THROW(set_torch_rng_state(std::vector<uint8_t>(3)));
}

}  // namespace
}  // namespace engram::agents
