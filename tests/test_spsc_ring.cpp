#include "core/spsc_ring.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ctime>
#include <thread>

#include "core/shm.hpp"
#include "test_util.hpp"

namespace engram {
namespace {

struct Rec {
  uint32_t ring_seq_ = 0;  // the ring's (kRingSeqBytes)
  uint32_t pad0 = 0;
  uint64_t seq = 0;
  uint64_t check = 0;  // ~seq
  uint64_t pad1 = 0;
};
static_assert(sizeof(Rec) == 32);

Rec make_rec(uint64_t i) {
  Rec r;
  r.seq = i;
  r.check = ~i;
  return r;
}

SpscRing make_ring(void* mem, size_t size, uint32_t cap) {
  auto r = SpscRing::format(mem, size, cap, sizeof(Rec));
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.value();
}

// A deadline is never early: the coarse clock behind a long one lags the
// precise clock by up to two ticks, which its margin must cover; and it is
// late by at most that margin, three ticks.
TEST(Deadline, NeverEarlyAndLateByAtMostThreeCoarseTicks) {
  EXPECT_EQ(deadline_after_ms(-1), -1);
  struct timespec res;
  ASSERT_EQ(clock_getres(CLOCK_MONOTONIC_COARSE, &res), 0);
  int64_t margin = 3 * (int64_t{res.tv_sec} * 1000000000 + res.tv_nsec);
  for (int32_t ms : {0, 5, kCoarseDeadlineMs, 2000}) {
    int64_t slack = ms >= kCoarseDeadlineMs ? margin : 0;
    // Long enough to cross several ticks, where the coarse clock lags most.
    int64_t until = monotonic_ns() + 3 * margin;
    while (monotonic_ns() < until) {
      int64_t before = monotonic_ns();
      int64_t d = deadline_after_ms(ms);
      int64_t after = monotonic_ns();
      ASSERT_GE(d, before + int64_t{ms} * 1000000) << ms << " ms: early";
      ASSERT_LE(d, after + int64_t{ms} * 1000000 + slack) << ms << " ms: late";
    }
  }
}

TEST(SpscRing, FullEmptyAndWraparound) {
  test::AlignedBuffer buf(SpscRing::bytes_needed(8, sizeof(Rec)));
  SpscRing ring = make_ring(buf.data(), buf.size, 8);
  Rec r{};
  EXPECT_EQ(ring.try_pop(&r).code(), Errc::empty);
  uint64_t next_in = 0, next_out = 0;
  for (int round = 0; round < 100; ++round) {  // 100 laps of varying fill levels
    int fill = 1 + round % 8;
    for (int i = 0; i < fill; ++i) {
      Rec in = make_rec(next_in);
      ASSERT_TRUE(ring.try_push(&in).ok());
      ++next_in;
    }
    if (fill == 8) {
      Rec in{};
      EXPECT_EQ(ring.try_push(&in).code(), Errc::full);
    }
    EXPECT_TRUE(ring.has_data());
    EXPECT_EQ(ring.has_space(), fill < 8);
    for (int i = 0; i < fill; ++i) {
      ASSERT_TRUE(ring.try_pop(&r).ok());
      ASSERT_EQ(r.seq, next_out);
      ASSERT_EQ(r.check, ~next_out);
      ++next_out;
    }
    EXPECT_EQ(ring.try_pop(&r).code(), Errc::empty);
    EXPECT_FALSE(ring.has_data());
  }
}

// The first kRingSeqBytes of a slot are the ring's: a push ignores the
// caller's, a pop returns the ring's. A push of fewer bytes leaves the rest
// of the slot as it was.
TEST(SpscRing, LeadingWordIsTheRingsAndShortPushesKeepTheRest) {
  test::AlignedBuffer buf(SpscRing::bytes_needed(2, sizeof(Rec)));
  SpscRing ring = make_ring(buf.data(), buf.size, 2);
  Rec in = make_rec(7), out;
  in.ring_seq_ = 0xdeadbeef;
  ASSERT_TRUE(ring.try_push(&in).ok());
  ASSERT_TRUE(ring.try_pop(&out).ok());
  EXPECT_EQ(out.ring_seq_, 1u);
  EXPECT_EQ(out.seq, 7u);
  EXPECT_EQ(out.check, ~uint64_t{7});
  ASSERT_TRUE(ring.try_push(&in).ok());  // slot 1
  ASSERT_TRUE(ring.try_pop(&out).ok());
  Rec shorter = make_rec(9);
  ASSERT_TRUE(ring.try_push(&shorter, offsetof(Rec, check), true).ok());  // slot 0 again
  ASSERT_TRUE(ring.try_pop(&out).ok());
  EXPECT_EQ(out.ring_seq_, 3u);
  EXPECT_EQ(out.seq, 9u);
  EXPECT_EQ(out.check, ~uint64_t{7}) << "bytes past the pushed ones are the older record's";
}

// Either side can attach to a ring in use: the consumer resumes at the next
// record to pop, the producer after the last record published.
TEST(SpscRing, AttachResumesBothSides) {
  test::AlignedBuffer buf(SpscRing::bytes_needed(8, sizeof(Rec)));
  SpscRing first = make_ring(buf.data(), buf.size, 8);
  Rec r;
  for (uint64_t i = 0; i < 13; ++i) {  // past one lap
    ASSERT_TRUE(first.try_push(&(r = make_rec(i))).ok());
    if (i < 10) {
      ASSERT_TRUE(first.try_pop(&r).ok());
    }
  }
  SpscRing producer = *SpscRing::attach(buf.data(), buf.size);
  SpscRing consumer = *SpscRing::attach(buf.data(), buf.size);
  for (uint64_t i = 13; i < 18; ++i) ASSERT_TRUE(producer.try_push(&(r = make_rec(i))).ok()) << i;
  EXPECT_EQ(producer.try_push(&r).code(), Errc::full);
  for (uint64_t i = 10; i < 18; ++i) {
    ASSERT_TRUE(consumer.try_pop(&r).ok()) << i;
    EXPECT_EQ(r.seq, i);
    EXPECT_EQ(r.check, ~i);
  }
  EXPECT_EQ(consumer.try_pop(&r).code(), Errc::empty);
}

TEST(SpscRing, TimeoutsAndValidation) {
  test::AlignedBuffer buf(SpscRing::bytes_needed(4, sizeof(Rec)));
  EXPECT_EQ(SpscRing::format(buf.data(), buf.size, 3, sizeof(Rec)).status().code(), Errc::invalid_capacity);
  EXPECT_EQ(SpscRing::format(buf.data(), buf.size, 4, 12).status().code(), Errc::invalid_argument);
  SpscRing ring = make_ring(buf.data(), buf.size, 4);
  Rec r{};
  EXPECT_EQ(ring.pop(&r, 20'000'000).code(), Errc::timeout);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(ring.push(&r, 0).ok());
  EXPECT_EQ(ring.push(&r, 20'000'000).code(), Errc::timeout);
  EXPECT_TRUE(SpscRing::attach(buf.data(), buf.size).ok());
  auto* h = static_cast<RingHeader*>(buf.data());
  h->capacity = 5;
  EXPECT_EQ(SpscRing::attach(buf.data(), buf.size).status().code(), Errc::corrupt);
  h->segment.layout_hash ^= 1;
  Status s = SpscRing::attach(buf.data(), buf.size).status();
  EXPECT_EQ(s.code(), Errc::layout_mismatch);
  EXPECT_NE(s.message().find("version"), std::string::npos);
}

// The producer can write any byte of the ring. What it scribbles can only
// make records look unpublished (the consumer waits) or full records of
// garbage (which the caller validates); never a read out of order or out of
// bounds, and the consumer's own position is not taken back from memory.
TEST(SpscRing, ScribbledSequenceWordsAndHeadNeverMisleadTheConsumer) {
  test::AlignedBuffer buf(SpscRing::bytes_needed(4, sizeof(Rec)));
  SpscRing ring = make_ring(buf.data(), buf.size, 4);
  auto* h = static_cast<RingHeader*>(buf.data());
  auto* slots = reinterpret_cast<Rec*>(static_cast<char*>(buf.data()) + sizeof(RingHeader));
  Rec r = make_rec(0);
  ASSERT_TRUE(ring.try_push(&r).ok());
  ASSERT_TRUE(ring.try_pop(&r).ok());  // head 1
  slots[2] = make_rec(2);
  slots[2].ring_seq_ = 3;  // record 2 "published" before record 1
  slots[1].ring_seq_ = 5;  // record 1's slot says record 4
  EXPECT_EQ(ring.try_pop(&r).code(), Errc::empty);
  EXPECT_FALSE(ring.has_data());
  h->head.store(1'000'000);  // the producer moves the consumer's position
  EXPECT_EQ(ring.try_pop(&r).code(), Errc::empty);
  slots[1] = make_rec(1);
  slots[1].ring_seq_ = 2;  // now record 1 is there, and then record 2
  for (uint64_t i = 1; i <= 2; ++i) {
    ASSERT_TRUE(ring.try_pop(&r).ok()) << i;
    EXPECT_EQ(r.seq, i);
  }
  EXPECT_EQ(h->head.load(), 3u) << "the consumer stores its own position";
}

// Producer and consumer threads; the consumer often sleeps on the futex.
TEST(SpscRing, ThreadsPassEveryRecordInOrder) {
  test::AlignedBuffer buf(SpscRing::bytes_needed(64, sizeof(Rec)));
  SpscRing ring = make_ring(buf.data(), buf.size, 64);
  const uint64_t n = test::scaled(2'000'000);
  std::thread producer([&] {
    for (uint64_t i = 0; i < n; ++i) {
      Rec r = make_rec(i);
      ASSERT_TRUE(ring.push(&r, 5'000'000'000).ok());
      if (i % 100000 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // make the consumer sleep
    }
  });
  Rec r{};
  for (uint64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(ring.pop(&r, 5'000'000'000).ok());
    ASSERT_EQ(r.seq, i);
    ASSERT_EQ(r.check, ~i);
  }
  producer.join();
  EXPECT_EQ(ring.try_pop(&r).code(), Errc::empty);
}

// The same across processes through a named POSIX shm segment: the child
// attaches by name and produces; the parent consumes.
TEST(SpscRing, ProcessesPassEveryRecordInOrder) {
  const std::string name = "engram-test-ring-" + std::to_string(getpid());
  ShmSegment::remove(name);
  const size_t size = SpscRing::bytes_needed(128, sizeof(Rec));
  auto seg = ShmSegment::create(name, size, 0600);
  ASSERT_TRUE(seg.ok()) << seg.status().to_string();
  SpscRing ring = make_ring(seg->data(), seg->size(), 128);
  const uint64_t n = test::scaled(2'000'000);
  pid_t pid = fork();
  if (pid == 0) {
    auto mine = ShmSegment::open(name, ShmSegment::Access::read_write);
    if (!mine.ok()) _exit(2);
    auto r = SpscRing::attach(mine->data(), mine->size());
    if (!r.ok()) _exit(3);
    for (uint64_t i = 0; i < n; ++i) {
      Rec rec = make_rec(i);
      if (!r->push(&rec, 5'000'000'000).ok()) _exit(4);
    }
    _exit(0);
  }
  Rec r{};
  for (uint64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(ring.pop(&r, 5'000'000'000).ok()) << "at record " << i;
    ASSERT_EQ(r.seq, i);
    ASSERT_EQ(r.check, ~i);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ShmSegment::remove(name);
}

// A producer killed mid-stream leaves a ring the consumer can still drain:
// every record it sees is whole (published only after it was written).
TEST(SpscRing, ProducerKilledLeavesOnlyWholeRecords) {
  for (int round = 0; round < static_cast<int>(test::scaled(20, 4)); ++round) {
    auto seg = ShmSegment::anonymous(SpscRing::bytes_needed(1024, sizeof(Rec)));
    ASSERT_TRUE(seg.ok());
    SpscRing ring = make_ring(seg->data(), seg->size(), 1024);
    pid_t pid = fork();
    if (pid == 0) {
      for (uint64_t i = 0;; ++i) {
        Rec rec = make_rec(i);
        ring.push(&rec, -1);
      }
    }
    // Wait for the producer's first record (a fork under ASan on a fresh
    // machine can take longer than the whole window below), so that the kill
    // lands mid-stream and not before the first push.
    Rec r{};
    if (!ring.pop(&r, 10'000'000'000).ok()) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      FAIL() << "the producer pushed nothing in 10 s";
    }
    ASSERT_EQ(r.seq, 0u);
    ASSERT_EQ(r.check, ~uint64_t{0});
    uint64_t i = 1;
    // Consume concurrently for a while, then kill the producer mid-stream.
    int64_t until = monotonic_ns() + 2'000'000 + round * 500'000;
    while (monotonic_ns() < until) {
      if (!ring.pop(&r, 1'000'000).ok()) continue;
      ASSERT_EQ(r.seq, i);
      ASSERT_EQ(r.check, ~i);
      ++i;
    }
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    while (ring.try_pop(&r).ok()) {
      ASSERT_EQ(r.seq, i);
      ASSERT_EQ(r.check, ~i);
      ++i;
    }
  }
}

}  // namespace
}  // namespace engram
