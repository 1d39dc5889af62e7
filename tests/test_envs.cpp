// The environments against their sources: CartPole-v1's golden vectors
// (Gymnasium's classic_control/cartpole.py dynamics) and MinAtar
// Breakout's golden traces (kenjyoung/MinAtar's breakout.py), and seeding:
// one seed, one trajectory.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "agents/common/env/breakout.hpp"
#include "agents/common/env/cartpole.hpp"
#include "agents/common/env/rng.hpp"

namespace engram::agents {
namespace {

void expect_state(const CartPole& e, std::array<double, 4> want, const char* where) {
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(e.state()[i], want[i], 5e-9) << where << ", state variable " << i;
}

TEST(CartPole, GoldenVectors) {
  CartPole e;
  float obs[4];
  e.set_state({0, 0, 0, 0});
  StepResult r = e.step(1, obs);
  expect_state(e, {0, 0.195121951, 0, -0.292682927}, "one push right from rest");
  EXPECT_EQ(r.reward, 1.0f);
  EXPECT_FALSE(r.terminated);
  EXPECT_FLOAT_EQ(obs[1], 0.195121951f) << "the observation is the state, as float32";

  e.set_state({0.01, -0.02, 0.03, -0.04});
  int actions[5] = {1, 0, 0, 1, 1};
  for (int i = 0; i < 5; ++i) {
    e.step(actions[i], obs);
    if (i == 0) expect_state(e, {0.0096, 0.174679196, 0.0292, -0.323068718}, "first step");
  }
  expect_state(e, {0.007921128, 0.173221231, 0.027738818, -0.290872952}, "fifth step");

  e.set_state({0, 0, 0, 0});
  int steps = 0;
  for (;;) {
    r = e.step(1, obs);
    ++steps;
    EXPECT_EQ(r.reward, 1.0f) << "the terminating step is rewarded too";
    if (r.terminated || steps > 20) break;
  }
  EXPECT_EQ(steps, 9) << "pushing right from rest terminates after exactly 9 steps";
  EXPECT_TRUE(r.terminated);
  EXPECT_FALSE(r.truncated);
}

// An episode that stays up is cut at 500 steps: truncated, not terminated.
// A linear controller on the state keeps the pole up and the cart near 0.
TEST(CartPole, TruncatesAt500Steps) {
  CartPole e;
  float obs[4];
  e.reset(1, obs);
  StepResult r;
  int steps = 0;
  do {
    const auto& s = e.state();
    r = e.step(s[2] * 10 + s[3] * 2 + s[0] * 0.5 + s[1] * 1 > 0 ? 1 : 0, obs);
    ++steps;
  } while (!r.truncated && !r.terminated);
  EXPECT_EQ(steps, CartPole::kMaxSteps);
  EXPECT_TRUE(r.truncated);
  EXPECT_FALSE(r.terminated);
}

TEST(CartPole, ResetIsUniformWithinFiveHundredthsAndSeeded) {
  CartPole a, b, c;
  float oa[4], ob[4], oc[4];
  a.reset(42, oa);
  b.reset(42, ob);
  c.reset(43, oc);
  bool differs = false;
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(oa[i], ob[i]);
    EXPECT_LE(std::abs(oa[i]), 0.05f);
    differs = differs || oa[i] != oc[i];
  }
  EXPECT_TRUE(differs) << "another seed, another start";
  for (int k = 0; k < 1000; ++k) {
    a.reset(oa);
    for (float v : oa) ASSERT_LE(std::abs(v), 0.05f);
  }
}

TEST(Breakout, GoldenTraceNoOpFromColumnZero) {
  Breakout e(0, /*sticky=*/0.0);
  std::vector<float> obs(400);
  e.reset_with_start(0, obs.data());
  const int want[6][2] = {{4, 1}, {5, 2}, {6, 3}, {7, 4}, {8, 5}, {9, 6}};
  float ret = 0;
  for (int i = 0; i < 6; ++i) {
    StepResult r = e.step(Breakout::kNoop, obs.data());
    ret += r.reward;
    EXPECT_EQ(e.ball_row(), want[i][0]) << "step " << i + 1;
    EXPECT_EQ(e.ball_column(), want[i][1]) << "step " << i + 1;
    EXPECT_EQ(r.terminated, i == 5) << "step " << i + 1;
  }
  EXPECT_EQ(ret, 0.0f);
  // The planes: paddle at (9, 4), ball at (9, 6), its trail at (8, 5),
  // and the 30 bricks.
  auto at = [&](int c, int y, int x) { return obs[c * 100 + y * 10 + x]; };
  EXPECT_EQ(at(0, 9, 4), 1.0f);
  EXPECT_EQ(at(1, 9, 6), 1.0f);
  EXPECT_EQ(at(2, 8, 5), 1.0f);
  float bricks = 0, all = 0;
  for (int i = 0; i < 100; ++i) bricks += obs[300 + i];
  for (float v : obs) all += v;
  EXPECT_EQ(bricks, 30.0f);
  EXPECT_EQ(all, 33.0f);
}

TEST(Breakout, GoldenTraceWithABrick) {
  Breakout e(0, /*sticky=*/0.0);
  std::vector<float> obs(400);
  e.reset_with_start(1, obs.data());
  const int actions[16] = {5, 2, 4, 2, 1, 3, 2, 3, 1, 1, 0, 1, 1, 0, 0, 1};
  float ret = 0;
  for (int i = 0; i < 16; ++i) {
    StepResult r = e.step(actions[i], obs.data());
    ret += r.reward;
    if (r.reward > 0) {
      EXPECT_EQ(i + 1, 11) << "the brick is hit on the 11th step";
    }
    EXPECT_EQ(r.terminated, i == 15) << "step " << i + 1;
  }
  EXPECT_EQ(ret, 1.0f);
}

// The paddle returns the ball two ways: a ball that was above the paddle
// before the step bounces off its top (up, same sideways direction); one
// that arrives at the paddle's cell diagonally goes back the way it came. From start 0 the ball reaches
// row 9 at column 6 on the 6th step, having been at column 5.
TEST(Breakout, ThePaddleBouncesTheBallFromAboveAndFromTheSide) {
  std::vector<float> obs(400);
  auto run = [&](int rights, int* row7, int* col7) {
    Breakout e(0, 0.0);
    e.reset_with_start(0, obs.data());
    bool ended = false;
    for (int t = 0; t < 7; ++t) ended = e.step(t < rights ? Breakout::kRight : Breakout::kNoop, obs.data()).terminated || ended;
    *row7 = e.ball_row();
    *col7 = e.ball_column();
    return ended;
  };
  int row, col;
  EXPECT_FALSE(run(1, &row, &col)) << "paddle under column 5, the ball's column before it lands";
  EXPECT_EQ(row, 7);
  EXPECT_EQ(col, 7) << "from above: up, still moving right";
  EXPECT_FALSE(run(2, &row, &col)) << "paddle at column 6, where the ball lands";
  EXPECT_EQ(row, 7);
  EXPECT_EQ(col, 5) << "from the side: back up to the left, the way it came";
  EXPECT_TRUE(run(0, &row, &col)) << "paddle at 4: missed";
}

// Sticky actions repeat the previous action one time in ten; the draws
// and the starts come from the env's one stream, so a seed fixes both.
TEST(Breakout, SeededEpisodesRepeatAndStickyActionsStickAboutOneInTen) {
  auto play = [](uint64_t seed, std::vector<int>* paddle) {
    Breakout e(0);
    std::vector<float> obs(400);
    Rng policy(7);
    e.reset(seed, obs.data());
    float ret = 0;
    for (int t = 0; t < 2000; ++t) {
      StepResult r = e.step(static_cast<int>(policy.below(6)), obs.data());
      ret += r.reward;
      paddle->push_back(e.paddle() * 100 + e.ball_row() * 10 + e.ball_column());
      if (r.terminated) e.reset(obs.data());
    }
    return ret;
  };
  std::vector<int> a, b, c;
  float ra = play(5, &a), rb = play(5, &b);
  play(6, &c);
  EXPECT_EQ(a, b) << "one seed, one trajectory";
  EXPECT_EQ(ra, rb);
  EXPECT_NE(a, c) << "another seed, another trajectory";

  // Alternate left and right: a sticky step repeats the previous action,
  // so the paddle moves against the one chosen, about one step in ten.
  Breakout e(11);
  std::vector<float> obs(400);
  e.reset(obs.data());
  int sticky = 0, n = 0;
  for (int t = 0; t < 20000; ++t) {
    int before = e.paddle();
    int action = t % 2 ? Breakout::kRight : Breakout::kLeft;
    StepResult r = e.step(action, obs.data());
    if (before > 0 && before < 9) {
      ++n;
      int moved = e.paddle() - before;
      if (moved == (action == Breakout::kRight ? -1 : 1)) ++sticky;
    }
    if (r.terminated) e.reset(obs.data());
  }
  double p = double(sticky) / n;
  EXPECT_NEAR(p, 0.1, 0.015) << sticky << " of " << n << " steps repeated the previous action";
}

TEST(Breakout, RandomPlayScoresAboutHalfABrick) {
  Breakout e(3);
  Rng policy(9);
  std::vector<float> obs(400);
  e.reset(obs.data());
  double total = 0;
  int episodes = 0;
  float ret = 0;
  while (episodes < 2000) {
    StepResult r = e.step(static_cast<int>(policy.below(6)), obs.data());
    ret += r.reward;
    if (r.terminated) {
      total += ret;
      ret = 0;
      ++episodes;
      e.reset(obs.data());
    }
  }
  EXPECT_NEAR(total / episodes, 0.5, 0.25) << "MinAtar: random play scores about 0.5";
}

TEST(Rng, UniformAndBelowStayInRange) {
  Rng r(1);
  double sum = 0;
  uint32_t counts[6] = {};
  for (int i = 0; i < 60000; ++i) {
    double u = r.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    ++counts[r.below(6)];
  }
  EXPECT_NEAR(sum / 60000, 0.5, 0.01);
  for (uint32_t c : counts) EXPECT_NEAR(c, 10000, 400);
  EXPECT_NE(Rng::derive(1, 0), Rng::derive(1, 1));
  EXPECT_NE(Rng::derive(1, 0), Rng::derive(2, 0));
}

// A run's start keeps its seed; actors started later (a resumed run) draw
// their envs' streams from seeds none of the start's streams share.
TEST(Rng, ActorsStartedLaterPlayOtherEpisodes) {
  EXPECT_EQ(actor_seed(7, 1), 7u);
  EXPECT_EQ(actor_seed(7, 0), 7u) << "no parameters yet counts as the start";
  std::set<uint64_t> start;
  for (uint64_t i = 0; i < 4096; ++i) start.insert(Rng::derive(actor_seed(7, 1), i));
  std::set<uint64_t> seeds;
  for (int64_t v = 2; v < 200; ++v) {
    ASSERT_TRUE(seeds.insert(actor_seed(7, v)).second) << "version " << v << "'s seed repeats another's";
    for (uint64_t i = 0; i < 4096; i += 97) ASSERT_FALSE(start.count(Rng::derive(actor_seed(7, v), i))) << v << " " << i;
  }
  EXPECT_NE(actor_seed(7, 5), actor_seed(8, 5));
}

}  // namespace
}  // namespace engram::agents
