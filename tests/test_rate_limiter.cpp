#include "core/rate_limiter.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace engram {
namespace {

// One row: a limiter config, counters, and what CanInsert(n) / CanSample(n)
// must answer, each derived by hand from the semantics stated in core/rate_limiter.hpp.
struct Case {
  const char* what;
  RateLimiterConfig config;
  RateLimiterCounters counters;
  int64_t n;
  bool can_insert, can_sample;
};

RateLimiterConfig stir(double spi, int64_t min_size, double buf) {
  return RateLimiterConfig::sample_to_insert_ratio(spi, min_size, buf).value();
}

TEST(RateLimiter, SemanticsTable) {
  const RateLimiterConfig min3 = RateLimiterConfig::min_size(3).value();
  const RateLimiterConfig q2 = RateLimiterConfig::queue(2).value();
  const RateLimiterConfig r = stir(2.0, 10, 4.0);  // min_diff 16, max_diff 24
  const Case cases[] = {
      {"min_size: empty table cannot sample", min3, {0, 0, 0}, 1, true, false},
      {"min_size: below min size cannot sample", min3, {2, 0, 0}, 1, true, false},
      {"min_size: at min size samples", min3, {3, 0, 0}, 1, true, true},
      {"min_size: many samples still allowed", min3, {3, 1000000, 0}, 1, true, true},
      {"min_size: deletes re-block sampling", min3, {5, 0, 3}, 1, true, false},
      {"queue: empty cannot sample", q2, {0, 0, 0}, 1, true, false},
      {"queue: one waiting item can be sampled", q2, {1, 0, 0}, 1, true, true},
      {"queue: batch of 2 needs 2 waiting; 2 more inserts overflow", q2, {1, 0, 0}, 2, false, false},
      {"queue: full queue blocks inserts", q2, {2, 0, 0}, 1, false, true},
      {"queue: consumed item frees a place", q2, {2, 1, 1}, 1, true, true},
      {"queue: all consumed, sampling blocks", q2, {2, 2, 2}, 1, true, false},
      {"ratio: inserts free below min_size", r, {0, 0, 0}, 1, true, false},
      {"ratio: insert reaching min_size is free", r, {9, 0, 0}, 1, true, false},
      {"ratio: at min_size, cursor 20 >= 16+1", r, {10, 0, 0}, 1, true, true},
      {"ratio: insert pushes cursor to 22 <= 24", r, {10, 0, 0}, 1, true, true},
      {"ratio: insert to cursor 26 > 24 blocks", r, {12, 0, 0}, 1, false, true},
      {"ratio: samples unblock inserts", r, {12, 4, 0}, 1, true, true},
      {"ratio: cursor 20 - 4 = 16 allows batch of 4; 4 inserts reach 28 > 24", r, {10, 0, 0}, 4, false, true},
      {"ratio: batch of 5 would pass min_diff", r, {10, 0, 0}, 5, false, false},
      {"ratio: sampled down to min_diff blocks", r, {10, 4, 0}, 1, true, false},
      {"ratio: deletes below min_size block sampling, free inserts", r, {12, 0, 3}, 1, true, false},
      {"ratio: deletes keep cursor, insert n=3 still free", r, {12, 0, 5}, 3, true, false},
  };
  for (const Case& c : cases) {
    RateLimiter rl(c.config);
    rl.restore(c.counters);
    EXPECT_EQ(rl.can_insert(c.n), c.can_insert) << c.what;
    EXPECT_EQ(rl.can_sample(c.n), c.can_sample) << c.what;
  }
}

TEST(RateLimiter, CountersAndCursor) {
  RateLimiter rl(stir(0.5, 1, 10.0));
  rl.on_insert(4);
  rl.on_sample(1);
  rl.on_delete(1);
  EXPECT_EQ(rl.size(), 3);
  EXPECT_DOUBLE_EQ(rl.cursor(), 4 * 0.5 - 1);
  rl.reset();
  EXPECT_EQ(rl.size(), 0);
}

// samples_allowed(n) is the largest m <= n that can_sample(m) allows,
// checked by trying every m, over queues and ratios at many counters.
TEST(RateLimiter, SamplesAllowedIsTheMostCanSampleAllows) {
  for (RateLimiterConfig c : {RateLimiterConfig::queue(100).value(), stir(0.5, 3, 10.0), stir(4.0, 1, 20.0),
                              RateLimiterConfig::min_size(5).value()}) {
    RateLimiter rl(c);
    for (int step = 0; step < 200; ++step) {
      if (step % 3 != 2) rl.on_insert(1 + step % 4);
      if (step % 5 == 0 && rl.can_sample(1)) rl.on_sample(1);
      for (int64_t n : {1, 7, 64, 1024}) {
        int64_t want = 0;
        for (int64_t m = 1; m <= n; ++m)
          if (rl.can_sample(m)) want = m;
        ASSERT_EQ(rl.samples_allowed(n), want) << "step " << step << " n " << n;
      }
    }
  }
}

TEST(RateLimiter, PresetsThatMustBeRefused) {
  EXPECT_EQ(RateLimiterConfig::min_size(0).status().code(), Errc::invalid_rate_limiter);
  EXPECT_EQ(RateLimiterConfig::queue(0).status().code(), Errc::invalid_rate_limiter);
  // Window 2*error_buffer must be >= 2*max(1, spi).
  EXPECT_EQ(RateLimiterConfig::sample_to_insert_ratio(1.0, 10, 0.5).status().code(), Errc::invalid_rate_limiter);
  EXPECT_EQ(RateLimiterConfig::sample_to_insert_ratio(4.0, 10, 3.9).status().code(), Errc::invalid_rate_limiter);
  EXPECT_TRUE(RateLimiterConfig::sample_to_insert_ratio(4.0, 10, 4.0).ok());
  EXPECT_TRUE(RateLimiterConfig::sample_to_insert_ratio(0.25, 10, 1.0).ok());
  EXPECT_EQ(RateLimiterConfig::sample_to_insert_ratio(0.0, 10, 5.0).status().code(), Errc::invalid_rate_limiter);
  EXPECT_EQ(RateLimiterConfig::sample_to_insert_ratio(NAN, 10, 5.0).status().code(), Errc::invalid_rate_limiter);
  EXPECT_EQ(RateLimiterConfig::sample_to_insert_ratio(1.0, 0, 5.0).status().code(), Errc::invalid_rate_limiter);
  EXPECT_EQ(RateLimiterConfig::sample_to_insert_ratio(1.0, 10, -1.0).status().code(), Errc::invalid_rate_limiter);
  RateLimiterConfig c;
  c.min_diff = 5;
  c.max_diff = 4;
  EXPECT_EQ(c.validate().code(), Errc::invalid_rate_limiter);
  c.max_diff = NAN;
  EXPECT_EQ(c.validate().code(), Errc::invalid_rate_limiter);
  auto s = RateLimiterConfig::sample_to_insert_ratio(1.0, 10, 0.5).status();
  EXPECT_NE(s.message().find("error_buffer"), std::string::npos) << "message should say what to change: " << s.message();
}

TEST(RateLimiter, ReconfigureKeepsCounters) {
  RateLimiter rl(RateLimiterConfig::queue(1).value());
  rl.on_insert(1);
  EXPECT_FALSE(rl.can_insert(1));
  ASSERT_TRUE(rl.reconfigure(RateLimiterConfig::queue(5).value()).ok());
  EXPECT_TRUE(rl.can_insert(1));
  EXPECT_EQ(rl.counters().inserts, 1);
  RateLimiterConfig bad;
  bad.samples_per_insert = -1;
  EXPECT_EQ(rl.reconfigure(bad).code(), Errc::invalid_rate_limiter);
  EXPECT_EQ(rl.config().max_diff, 5.0);
}

}  // namespace
}  // namespace engram
