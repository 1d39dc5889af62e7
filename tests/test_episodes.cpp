// The learning curve's bookkeeping (agents/common/tables/episodes.hpp): how often
// a learner looks at its episodes, and which looks become rows of
// curve.csv. A clock is passed in, so the test sets the times.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "agents/common/tables/episodes.hpp"

namespace engram::agents {
namespace {

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST(Progress, LooksTenTimesASecondWritesARowOnceASecondAndForTheLastLook) {
  char dir[] = "/tmp/engram-progress-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  Curve curve;
  curve.add(20.0f, 0.001f);
  {
    Progress p(dir, 0.0, "low");
    EXPECT_FALSE(p.due(0.05));
    for (int k = 1; k <= 8; ++k) {  // 0.12 s apart: every one is due, none is a row
      double now = 0.12 * k;
      EXPECT_TRUE(p.due(now)) << now;
      p.report(now, 1000 * k, k, curve, 5, "replay", false);
      EXPECT_FALSE(p.due(now + 0.05)) << "a look was just taken at " << now;
    }
    p.report(1.08, 9000, 9, curve, 5, "replay", false);  // a second since the start: a row
    p.report(1.20, 10000, 10, curve, 5, "replay", false);
    p.report(1.50, 12500, 12, curve, 5, "replay", true);  // the last look: a row at once
    p.close();
  }
  std::vector<std::string> rows = lines_of(std::string(dir) + "/curve.csv");
  ASSERT_EQ(rows.size(), 3u) << "a header and two rows";
  EXPECT_EQ(rows[0], "wall_s,env_steps,updates,episodes,mean100_low_epsilon,mean100_all,resumed");
  EXPECT_EQ(rows[1], "1.08,9000,9,1,20,20,0");
  EXPECT_EQ(rows[2], "1.5,12500,12,1,20,20,0") << "the last look's steps, not the last second's";
  std::system((std::string("rm -rf ") + dir).c_str());
}

}  // namespace
}  // namespace engram::agents
