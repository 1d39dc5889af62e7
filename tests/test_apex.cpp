// Ape-X's bookkeeping (agents/apex/bookkeeping.hpp) against values worked
// out by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "agents/apex/bookkeeping.hpp"

namespace engram::agents::apex {
namespace {

TEST(Apex, EpsilonsSpanPointFourToPointFourToTheEighth) {
  EXPECT_DOUBLE_EQ(epsilon(0, 16), 0.4);
  EXPECT_NEAR(epsilon(15, 16), std::pow(0.4, 8), 1e-15);
  EXPECT_NEAR(epsilon(5, 8), std::pow(0.4, 6), 1e-15);  // 1 + 7*5/7
  for (size_t i = 1; i < 16; ++i) EXPECT_LT(epsilon(i, 16), epsilon(i - 1, 16));
  EXPECT_DOUBLE_EQ(epsilon(0, 1), 0.4) << "a single env";
  // Of 16 envs, those of epsilon <= 0.01 are the last seven (i >= 9).
  int low = 0;
  for (size_t i = 0; i < 16; ++i) low += epsilon(i, 16) <= 0.01;
  EXPECT_EQ(low, 7);
}

// Steps with observation k (one float), reward r_k.
struct Episode {
  NStep nstep{3, 0.9f};
  std::vector<Transition> out;
  void step(float k, float reward, bool terminated = false, bool truncated = false) {
    float obs = k, next = k + 1;
    nstep.add(&obs, 1, static_cast<int32_t>(k), 0.f, reward, &next, terminated, truncated, &out);
  }
};

TEST(Apex, NStepReturnsCarryTheirRealDiscount) {
  Episode r;
  r.step(0, 1);
  r.step(1, 2);
  EXPECT_TRUE(r.out.empty()) << "nothing completes before n steps";
  r.step(2, 3);
  ASSERT_EQ(r.out.size(), 1u);
  EXPECT_FLOAT_EQ(r.out[0].reward, 1 + 0.9f * 2 + 0.81f * 3);
  EXPECT_FLOAT_EQ(r.out[0].discount, 0.729f);
  EXPECT_EQ(r.out[0].obs[0], 0.f);
  EXPECT_EQ(r.out[0].next_obs[0], 3.f) << "bootstraps from the observation n steps on";
  EXPECT_EQ(r.out[0].action, 0);
  r.step(3, 4);
  ASSERT_EQ(r.out.size(), 2u);
  EXPECT_FLOAT_EQ(r.out[1].reward, 2 + 0.9f * 3 + 0.81f * 4);
  EXPECT_EQ(r.out[1].next_obs[0], 4.f);
}

TEST(Apex, ATerminalStateEndsEveryPendingTransitionWithoutBootstrap) {
  Episode r;
  r.step(0, 1);
  r.step(1, 2, /*terminated=*/true);
  ASSERT_EQ(r.out.size(), 2u);
  EXPECT_FLOAT_EQ(r.out[0].reward, 1 + 0.9f * 2);
  EXPECT_EQ(r.out[0].discount, 0.f);
  EXPECT_FLOAT_EQ(r.out[1].reward, 2);
  EXPECT_EQ(r.out[1].discount, 0.f);
  EXPECT_EQ(r.nstep.pending(), 0u);
  // The next episode starts clean.
  r.step(10, 5);
  r.step(11, 5);
  r.step(12, 5);
  ASSERT_EQ(r.out.size(), 3u);
  EXPECT_FLOAT_EQ(r.out[2].reward, 5 * (1 + 0.9f + 0.81f));
}

TEST(Apex, ATruncatedEpisodeBootstrapsWithTheStepsEachTransitionTook) {
  Episode r;
  r.step(0, 1);
  r.step(1, 1);
  r.step(2, 1);  // the first transition completes: 3 steps
  r.step(3, 1, false, /*truncated=*/true);
  ASSERT_EQ(r.out.size(), 4u);
  EXPECT_FLOAT_EQ(r.out[1].discount, 0.729f) << "steps 1..3: three steps";
  EXPECT_FLOAT_EQ(r.out[2].discount, 0.81f) << "steps 2..3: two";
  EXPECT_FLOAT_EQ(r.out[3].discount, 0.9f) << "step 3 alone: one";
  EXPECT_FLOAT_EQ(r.out[2].reward, 1 + 0.9f);
  for (size_t i = 1; i < 4; ++i) EXPECT_EQ(r.out[i].next_obs[0], 4.f);
}

TEST(Apex, ImportanceWeightsByHand) {
  // N P = 1, 2, 4: weights 1, 2^-0.4, 4^-0.4, the largest 1.
  auto w = importance_weights({0.1, 0.2, 0.4}, {10, 10, 10}, 0.4);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_FLOAT_EQ(w[0], 1.0f);
  EXPECT_NEAR(w[1], 0.757858, 1e-6);
  EXPECT_NEAR(w[2], 0.574349, 1e-6);
  // Divided by the batch's largest, whichever it is; the table's size when
  // each item was drawn counts.
  auto v = importance_weights({0.5, 0.25}, {2, 8}, 1.0);  // N P = 1, 2
  EXPECT_FLOAT_EQ(v[0], 1.0f);
  EXPECT_FLOAT_EQ(v[1], 0.5f);
}

}  // namespace
}  // namespace engram::agents::apex
