// Fifo (capi/fifo.hpp) against std::deque under random pushes and pops,
// and its storage: kept across uses, bounded when the queue never empties.
#include <gtest/gtest.h>

#include <deque>
#include <random>

#include "capi/fifo.hpp"

using engram::Fifo;

TEST(Fifo, MatchesADequeUnderRandomOperations) {
  Fifo<int> f;
  std::deque<int> ref;
  std::mt19937 rng(7);
  int next = 0;
  for (int step = 0; step < 200000; ++step) {
    switch (rng() % 4) {
      case 0:
      case 1:
        f.push_back(next);
        ref.push_back(next++);
        break;
      case 2: {
        int v[3] = {next, next + 1, next + 2};
        f.append(v, v + 3);
        ref.insert(ref.end(), v, v + 3);
        next += 3;
        break;
      }
      case 3:
        for (unsigned k = rng() % 5; k > 0 && !ref.empty(); --k) {
          ASSERT_EQ(f.front(), ref.front()) << "step " << step;
          f.pop_front();
          ref.pop_front();
        }
        break;
    }
    ASSERT_EQ(f.size(), ref.size()) << "step " << step;
    ASSERT_EQ(f.empty(), ref.empty());
    if (!ref.empty()) {
      size_t i = rng() % ref.size();
      ASSERT_EQ(f[i], ref[i]) << "step " << step;
    }
  }
  ASSERT_TRUE(std::equal(f.begin(), f.end(), ref.begin(), ref.end()));
}

TEST(Fifo, NeverEmptiedItStaysWithinTwiceItsLength) {
  Fifo<int> f;
  for (int i = 0; i < 10; ++i) f.push_back(i);
  for (int i = 10; i < 100000; ++i) {
    f.push_back(i);
    f.pop_front();
    ASSERT_EQ(f.front(), i - 9);
  }
  // The dead prefix is dropped once it outweighs the ten live entries, so
  // the storage is reused rather than grown: at most 21 entries, which a
  // vector doubling from 1 keeps in 32.
  EXPECT_LE(f.capacity(), 32u);
}

TEST(Fifo, EmptiedItKeepsItsStorage) {
  Fifo<int> f;
  for (int i = 0; i < 100; ++i) f.push_back(i);
  size_t cap = f.capacity();
  for (int round = 0; round < 100; ++round) {
    while (!f.empty()) f.pop_front();
    for (int i = 0; i < 100; ++i) f.push_back(i);
  }
  EXPECT_EQ(f.capacity(), cap);
}
