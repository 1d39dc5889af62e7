// A training run's progress as the user sees it: the trailing-100 means
// of finished episodes (Curve), a line a second and OUT/curve.csv beside
// it (Progress), and the curve's plot.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

namespace engram::agents {

// Trailing-100 means of finished episodes: of all envs and of those whose
// epsilon is at most 0.01 (the greedy end of Ape-X's spread; every env of
// an agent that does not explore by epsilon).
struct Curve {
  std::deque<float> all, low;
  uint64_t episodes = 0;
  void add(float ret, float eps) {
    ++episodes;
    all.push_back(ret);
    if (all.size() > 100) all.pop_front();
    if (eps <= 0.01f) {
      low.push_back(ret);
      if (low.size() > 100) low.pop_front();
    }
  }
  static double mean(const std::deque<float>& d) {
    return d.empty() ? 0.0 : std::accumulate(d.begin(), d.end(), 0.0) / static_cast<double>(d.size());
  }
};

// OUT/curve.png from OUT/curve.csv (columns: wall_s, env_steps, updates,
// episodes, mean100_low, mean100_all) with gnuplot; says so if it cannot.
// `low_title` names the low-epsilon curve; nullptr: an agent without
// epsilons, whose two means are one, draws only "all actors".
inline void plot_curve(const std::string& out, const char* program, const char* low_title) {
  std::ofstream gp(out + "/curve.gp");
  gp << "set terminal png size 900,500\nset output '" << out << "/curve.png'\n"
     << "set datafile separator ','\nset key bottom right\nset xlabel 'env steps'\n"
     << "set ylabel 'trailing-100 mean return'\nset grid\nplot ";
  if (low_title) gp << "'" << out << "/curve.csv' every ::1 using 2:5 with lines lw 2 title '" << low_title << "', ";
  gp << "'" << out << "/curve.csv' every ::1 using 2:6 with lines title 'all actors'\n";
  gp.close();
  if (std::system(("gnuplot " + out + "/curve.gp 2>/dev/null").c_str()) != 0)
    std::fprintf(stderr, "%s: gnuplot failed or is missing; the curve is in %s/curve.csv\n", program, out.c_str());
}

// The last line of a training run: where its outputs are.
inline void say_outputs(const char* program, const std::string& out) {
  std::printf("%s: curve %s/curve.csv, plot %s/curve.png, model %s/model.pt\n", program, out.c_str(), out.c_str(),
              out.c_str());
}

// Where a resumed run's curve goes on from (--resume): the saved state's
// wall seconds, env steps and updates.
struct CurveResume {
  double wall_s = 0;
  int64_t steps = 0;
  uint64_t updates = 0;
};

// The progress line, once a second, and OUT/curve.csv beside it: wall
// seconds, env steps, updates, episodes, the trailing-100 means (the
// line shows the low-epsilon one only with a `low_label`, see plot_curve)
// and `resumed`, 1 on the first row after a resume. A resumed run keeps
// the rows up to its saved state (a killed run wrote more, which it
// repeats) and goes on from there: wall seconds and env steps never go back.
// A learner looks at its episodes ten times a second (due), so that the
// step at which its goal is met is known to a tenth of a second's steps,
// not a second's (about 11k of Ape-X CartPole's), and passes each look to
// report, which prints a line and writes a row once a second and for the
// last look.
class Progress {
 public:
  static constexpr double kLookEvery = 0.1, kLineEvery = 1.0;  // seconds
  // t0: the run's start, wall_s() at it; a resumed run's lies `from`'s
  // wall seconds back.
  Progress(const std::string& out, double t0, const char* low_label, const CurveResume* from = nullptr)
      : t0_(t0), last_(t0), last_look_(t0), low_label_(low_label) {
    const std::string path = out + "/curve.csv";
    std::vector<std::string> kept;
    if (from) {
      std::ifstream old(path);
      std::string row;
      std::getline(old, row);  // the header
      while (std::getline(old, row)) {
        double w = 0;
        long long steps = 0;
        if (std::sscanf(row.c_str(), "%lf,%lld", &w, &steps) != 2 || w > from->wall_s + 1e-6 || steps > from->steps)
          continue;
        if (std::count(row.begin(), row.end(), ',') == 5) row += ",0";  // a row of before the column
        kept.push_back(row);
      }
      last_ = last_look_ = t0 + from->wall_s;
      last_steps_ = from->steps;
      last_updates_ = from->updates;
      resumed_ = true;
    }
    csv_.open(path, std::ios::trunc);
    csv_ << "wall_s,env_steps,updates,episodes,mean100_low_epsilon,mean100_all,resumed\n";
    for (const std::string& r : kept) csv_ << r << '\n';
  }
  bool due(double now) const { return now - last_look_ >= kLookEvery; }
  // `queued`: the items the learner has not consumed (a replay's size, a
  // queue's length), named by `what`; `last`: training stops after this look.
  void report(double now, int64_t steps, uint64_t updates, const Curve& c, uint64_t queued, const char* what,
              bool last) {
    last_look_ = now;
    if (!last && now - last_ < kLineEvery) return;
    double dt = std::max(1e-9, now - last_);
    double low = Curve::mean(c.low), all = Curve::mean(c.all);
    std::printf("%7.1f s  steps %9lld  %7.0f steps/s  %6.0f updates/s  episodes %6llu  mean100", now - t0_,
                static_cast<long long>(steps), static_cast<double>(steps - last_steps_) / dt,
                static_cast<double>(updates - last_updates_) / dt, static_cast<unsigned long long>(c.episodes));
    if (low_label_) std::printf(" %6.1f (%s)", low, low_label_);
    std::printf(" %6.1f (all)  %s %llu\n", all, what, static_cast<unsigned long long>(queued));
    std::fflush(stdout);
    csv_ << now - t0_ << ',' << steps << ',' << updates << ',' << c.episodes << ',' << low << ',' << all << ','
         << (resumed_ ? 1 : 0) << '\n';
    resumed_ = false;
    csv_.flush();
    last_ = now;
    last_updates_ = updates;
    last_steps_ = steps;
  }
  void close() { csv_.close(); }

 private:
  std::ofstream csv_;
  double t0_, last_, last_look_;
  const char* low_label_;
  uint64_t last_updates_ = 0;
  int64_t last_steps_ = 0;
  bool resumed_ = false;  // the next row is the first after a resume
};

}  // namespace engram::agents
