// Time spent inside engram calls, wall and CPU (this thread's), against
// the thread's whole: how much of an actor's or a learner's time engram
// costs. CPU time is what the target counts (README, "Reference agents"):
// a call that waits for the rate limiter sleeps, which is the limiter
// doing its work, not engram's cost; its wall time is reported beside.
#pragma once

#include <time.h>

#include <utility>

namespace engram::agents {

inline double thread_cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
inline double wall_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

class CallClock {
 public:
  template <typename F>
  decltype(auto) operator()(F&& f) {
    Scope s(this);
    return std::forward<F>(f)();
  }
  double wall() const { return wall_; }
  double cpu() const { return cpu_; }

 private:
  // A call timed inside another (a wait whose callback reports progress,
  // which reads the tables) counts once, in the outer call.
  struct Scope {
    explicit Scope(CallClock* c) : c_(c), outer_(c->depth_++ == 0) {
      if (outer_) {
        w0_ = wall_s();
        c0_ = thread_cpu_s();
      }
    }
    ~Scope() {
      --c_->depth_;
      if (!outer_) return;
      c_->wall_ += wall_s() - w0_;
      c_->cpu_ += thread_cpu_s() - c0_;
    }
    CallClock* c_;
    bool outer_;
    double w0_ = 0, c0_ = 0;
  };
  double wall_ = 0, cpu_ = 0;
  int depth_ = 0;
};

}  // namespace engram::agents
