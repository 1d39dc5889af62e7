// MinAtar Breakout (kenjyoung/MinAtar, breakout.py and environment.py): a
// 10x10 grid, a paddle on row 9, a ball that moves diagonally, three rows
// of bricks that come back when all are gone; +1 per brick, and the
// episode ends when the ball passes the paddle. Six actions (no-op, left,
// up, right, down, fire), of which only left and right move the paddle.
// Sticky actions: with probability 0.1 the previous action is repeated,
// and the previous action carries over between episodes, as in MinAtar.
// One random stream serves the sticky draws and each reset's start.
//
// The observation is 4 planes of 10x10 floats, 0 or 1, channel first
// (index c*100 + row*10 + column): paddle, ball, trail (the ball's
// previous cell), bricks.
#pragma once

#include <array>
#include <cstdint>

#include "agents/common/env/env.hpp"
#include "agents/common/env/rng.hpp"

namespace engram::agents {

class Breakout : public Env {
 public:
  static constexpr int kSize = 10;
  static constexpr int kChannels = 4;
  enum Action { kNoop = 0, kLeft = 1, kUp = 2, kRight = 3, kDown = 4, kFire = 5 };

  explicit Breakout(uint64_t seed = 0, double sticky = 0.1) : rng_(seed), sticky_(sticky) {}
  const char* name() const override { return "breakout"; }
  std::vector<int64_t> observation_shape() const override { return {kChannels, kSize, kSize}; }
  int num_actions() const override { return 6; }
  using Env::reset;
  void reset(float* obs) override;
  StepResult step(int action, float* obs) override;

  // For tests: starts an episode with the ball's start chosen (0: column 0
  // moving down-right, 1: column 9 moving down-left) instead of drawn.
  void reset_with_start(int start, float* obs);
  int ball_row() const { return ball_y_; }
  int ball_column() const { return ball_x_; }
  int paddle() const { return pos_; }

 protected:
  void seed_stream(uint64_t seed) override { rng_.reseed(seed); }

 private:
  void observe(float* obs) const;
  Rng rng_;
  double sticky_;
  int last_action_ = kNoop;  // carries over between episodes
  int ball_x_ = 0, ball_y_ = 0, dir_ = 0, pos_ = 0, last_x_ = 0, last_y_ = 0;
  bool strike_ = false, terminal_ = false;
  std::array<std::array<uint8_t, kSize>, kSize> bricks_{};  // [row][column]
};

}  // namespace engram::agents
