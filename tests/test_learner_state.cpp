// A learner's state files (agents/common/host/learner_state.hpp) and the
// curve of a resumed run (progress.hpp): what comes back is what went in;
// a damaged, truncated, foreign or mismatched file is refused with a
// message that names it and what is wrong, and the one before it is used.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "agents/common/host/learner_state.hpp"
#include "agents/common/host/progress.hpp"

namespace engram::agents {
namespace {

namespace fs = std::filesystem;

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

void spit(const std::string& p, const std::string& b) { std::ofstream(p, std::ios::binary | std::ios::trunc) << b; }

class LearnerStateFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    out_ = ::testing::TempDir() + "learner-state-" + std::to_string(::getpid());
    fs::remove_all(out_);
    fs::create_directories(out_);
    o_.out = out_;
    o_.env = "cartpole";
    o_.seed = 7;
  }
  void TearDown() override { fs::remove_all(out_); }
  // A state of `updates` updates whose "x" section holds `updates`.
  std::string save(LearnerStates& st, uint64_t updates) {
    StateOut s;
    RunState r;
    r.updates = updates;
    r.steps = static_cast<int64_t>(updates) * 10;
    r.wall_s = 1.5;
    r.version = 3;
    r.curve.add(10, 0.0f);
    r.curve.add(20, 0.5f);
    r.save(&s, "engram-test", o_, 42);
    s.put("x", std::vector<double>{static_cast<double>(updates), -1.0});
    return st.save(s, updates);
  }
  // Loads the newest good state of the run; its updates, and stderr.
  uint64_t load(LearnerStates& st, std::string* err, std::string* path, const std::string& where = "") {
    ::testing::internal::CaptureStderr();
    uint64_t u = 0;
    try {
      StateIn in = st.load(where.empty() ? out_ : where,
                           [&](const StateIn& s) { RunState::load(s, "engram-test", o_, 42); }, path);
      u = RunState::load(in, "engram-test", o_, 42).updates;
      EXPECT_EQ(in.get<double>("x", 2)[0], static_cast<double>(u));
    } catch (...) {
      *err = ::testing::internal::GetCapturedStderr();
      throw;
    }
    *err = ::testing::internal::GetCapturedStderr();
    return u;
  }
  std::string out_;
  RunOptions o_{100, "out"};
};

TEST_F(LearnerStateFiles, WhatIsSavedComesBackAndOnlyTheLastFewAreKept) {
  LearnerStates st("engram-test", o_);
  for (uint64_t u : {5, 10, 15, 20}) save(st, u);
  size_t files = 0;
  for (auto& e : fs::directory_iterator(out_ + "/checkpoints")) files += e.path().extension() == ".state";
  EXPECT_EQ(files, kKeptStates);
  std::string err, path;
  EXPECT_EQ(load(st, &err, &path), 20u);
  EXPECT_EQ(err, "");
  EXPECT_NE(path.find("learner-000000000020.state"), std::string::npos) << path;
  StateIn in = StateIn::parse(slurp(path));
  RunState r = RunState::load(in, "engram-test", o_, 42);
  EXPECT_EQ(r.steps, 200);
  EXPECT_EQ(r.version, 3);
  EXPECT_EQ(r.curve.episodes, 2u);
  EXPECT_EQ(r.curve.all.size(), 2u);
  EXPECT_EQ(r.curve.low.size(), 1u);
  EXPECT_EQ(r.curve.low[0], 10.0f);
  EXPECT_EQ(LearnerStates::run_dir(path), out_);
  EXPECT_EQ(LearnerStates::run_dir(out_ + "/checkpoints/"), out_);
  EXPECT_EQ(LearnerStates::run_dir(out_), out_);
}

TEST_F(LearnerStateFiles, ADamagedOrForeignNewestFileIsRefusedByNameAndTheOneBeforeItUsed) {
  LearnerStates st("engram-test", o_);
  save(st, 1);
  struct Damage {
    const char* what;
    std::string (*apply)(const std::string&);
    const char* said;
  };
  const Damage damages[] = {
      {"a flipped byte", [](const std::string& b) { std::string c = b; c[c.size() / 2] ^= 0x20; return c; },
       "checksum"},
      {"truncated", [](const std::string& b) { return b.substr(0, b.size() - 9); }, "checksum"},
      {"empty", [](const std::string&) { return std::string(); }, "not a learner state file"},
      {"a foreign file", [](const std::string&) { return std::string("engram-apex model, not a state\n"); },
       "not a learner state file"},
  };
  for (const Damage& d : damages) {
    std::string newest = save(st, 2);
    spit(newest, d.apply(slurp(newest)));
    std::string err, path;
    EXPECT_EQ(load(st, &err, &path), 1u) << d.what;
    EXPECT_NE(err.find("refusing " + newest), std::string::npos) << d.what << ": " << err;
    EXPECT_NE(err.find(d.said), std::string::npos) << d.what << ": " << err;
    EXPECT_NE(err.find("trying the one before it"), std::string::npos) << err;
    // Named as the one file to resume from, it is an error, not a fallback.
    try {
      load(st, &err, &path, newest);
      ADD_FAILURE() << d.what << ": resumed from a damaged file";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("refusing " + newest), std::string::npos) << e.what();
    }
    fs::remove(newest);
  }
}

TEST_F(LearnerStateFiles, AStateOfAnotherRunIsRefusedSayingWhose) {
  LearnerStates st("engram-test", o_);
  save(st, 1);
  o_.seed = 8;  // the run resuming has another seed
  std::string err, path;
  try {
    load(st, &err, &path);
    ADD_FAILURE() << "a state of --seed 7 resumed a run of --seed 8";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no good learner state"), std::string::npos) << e.what();
  }
  EXPECT_NE(err.find("--seed 7; this run is engram-test --env cartpole --seed 8"), std::string::npos) << err;
  o_.seed = 7;
  EXPECT_THROW(RunState::load(StateIn::parse(slurp(save(st, 2))), "engram-test", o_, 43), std::runtime_error)
      << "another network's parameter count";
  EXPECT_THROW(StateIn::parse(slurp(save(st, 3))).get<double>("missing"), std::runtime_error);
}

TEST_F(LearnerStateFiles, NoStateIsAnErrorThatSaysHowToGetOne) {
  LearnerStates st("engram-test", o_);
  std::string err, path;
  try {
    load(st, &err, &path);
    ADD_FAILURE();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("--checkpoint-every"), std::string::npos) << e.what();
  }
}

// A resumed run's curve keeps the rows up to its state, marks the first
// row after it, and its wall seconds and env steps never go back.
TEST_F(LearnerStateFiles, AResumedCurveGoesOnFromTheStateAndMarksTheResume) {
  {
    Progress p(out_, 100.0, nullptr);
    Curve c;
    for (int i = 1; i <= 5; ++i) p.report(100.0 + i, i * 1000, static_cast<uint64_t>(i), c, 0, "q", false);
  }
  CurveResume from{3.0, 3000, 3};  // the killed run wrote rows 4 and 5 after its state
  {
    Progress p(out_, 200.0 - 3.0, nullptr, &from);
    Curve c;
    p.report(200.0 + 1.0, 3500, 4, c, 0, "q", false);
    p.report(200.0 + 2.0, 4500, 5, c, 0, "q", true);
  }
  std::ifstream f(out_ + "/curve.csv");
  std::string header;
  std::getline(f, header);
  EXPECT_EQ(header, "wall_s,env_steps,updates,episodes,mean100_low_epsilon,mean100_all,resumed");
  std::vector<std::pair<double, long long>> rows;
  std::vector<int> resumed;
  for (std::string row; std::getline(f, row);) {
    double w = 0;
    long long s = 0;
    ASSERT_EQ(std::sscanf(row.c_str(), "%lf,%lld", &w, &s), 2) << row;
    rows.emplace_back(w, s);
    resumed.push_back(row.back() - '0');
  }
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[2].second, 3000);
  EXPECT_EQ(rows[3].second, 3500);
  EXPECT_DOUBLE_EQ(rows[3].first, 4.0);
  EXPECT_EQ(resumed, (std::vector<int>{0, 0, 0, 1, 0}));
  for (size_t i = 1; i < rows.size(); ++i) {
    EXPECT_GT(rows[i].first, rows[i - 1].first);
    EXPECT_GT(rows[i].second, rows[i - 1].second);
  }
}

}  // namespace
}  // namespace engram::agents
