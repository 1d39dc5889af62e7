#include "agents/common/env/breakout.hpp"

#include <algorithm>

namespace engram::agents {

namespace {
// Directions: 0 up-left, 1 up-right, 2 down-right, 3 down-left (rows grow downwards).
constexpr int kDx[4] = {-1, 1, 1, -1};
constexpr int kDy[4] = {-1, -1, 1, 1};
constexpr int kFlipX[4] = {1, 0, 3, 2};  // off a side wall
constexpr int kFlipY[4] = {3, 2, 1, 0};  // off the ceiling, a brick, the paddle's centre
constexpr int kBack[4] = {2, 3, 0, 1};   // off the paddle's edge: straight back
}  // namespace

void Breakout::reset_with_start(int start, float* obs) {
  ball_y_ = 3;
  ball_x_ = start == 0 ? 0 : 9;
  dir_ = start == 0 ? 2 : 3;
  pos_ = 4;
  for (auto& row : bricks_) row.fill(0);
  for (int y = 1; y <= 3; ++y) bricks_[y].fill(1);
  strike_ = false;
  terminal_ = false;
  last_x_ = ball_x_;
  last_y_ = ball_y_;
  observe(obs);
}

void Breakout::reset(float* obs) { reset_with_start(static_cast<int>(rng_.below(2)), obs); }

StepResult Breakout::step(int action, float* obs) {
  StepResult r;
  // The draw is made whatever the probability, as MinAtar does: the
  // stream then stands at the same place for every setting.
  if (rng_.uniform() < sticky_) action = last_action_;
  last_action_ = action;
  if (action == kLeft) pos_ = std::max(0, pos_ - 1);
  else if (action == kRight) pos_ = std::min(kSize - 1, pos_ + 1);

  last_x_ = ball_x_;
  last_y_ = ball_y_;
  int new_x = ball_x_ + kDx[dir_], new_y = ball_y_ + kDy[dir_];
  if (new_x < 0 || new_x > kSize - 1) {
    new_x = std::clamp(new_x, 0, kSize - 1);
    dir_ = kFlipX[dir_];
  }
  bool struck = false;
  if (new_y < 0) {
    new_y = 0;
    dir_ = kFlipY[dir_];
  } else if (bricks_[new_y][new_x]) {
    struck = true;
    if (!strike_) {
      r.reward += 1;
      strike_ = true;
      bricks_[new_y][new_x] = 0;
      new_y = last_y_;
      dir_ = kFlipY[dir_];
    }
  } else if (new_y == kSize - 1) {
    bool any = false;
    for (const auto& row : bricks_)
      for (uint8_t b : row) any = any || b;
    if (!any)
      for (int y = 1; y <= 3; ++y) bricks_[y].fill(1);
    if (ball_x_ == pos_) {
      dir_ = kFlipY[dir_];
      new_y = last_y_;
    } else if (new_x == pos_) {
      dir_ = kBack[dir_];
      new_y = last_y_;
    } else {
      terminal_ = true;
    }
  }
  if (!struck) strike_ = false;
  ball_x_ = new_x;
  ball_y_ = new_y;
  r.terminated = terminal_;
  observe(obs);
  return r;
}

void Breakout::observe(float* obs) const {
  std::fill(obs, obs + kChannels * kSize * kSize, 0.0f);
  auto at = [&](int c, int y, int x) -> float& { return obs[c * kSize * kSize + y * kSize + x]; };
  at(0, kSize - 1, pos_) = 1;
  at(1, ball_y_, ball_x_) = 1;
  at(2, last_y_, last_x_) = 1;
  for (int y = 0; y < kSize; ++y)
    for (int x = 0; x < kSize; ++x)
      if (bricks_[y][x]) at(3, y, x) = 1;
}

}  // namespace engram::agents
