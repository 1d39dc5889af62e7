#include "core/shm.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "core/segment_header.hpp"

namespace engram {
namespace {

TEST(ShmSegment, CreateOpenRemove) {
  const std::string name = "engram-test-shm-" + std::to_string(getpid());
  ShmSegment::remove(name);
  auto seg = ShmSegment::create(name, 1 << 20, 0640);
  ASSERT_TRUE(seg.ok()) << seg.status().to_string();
  EXPECT_EQ(seg->size(), size_t{1} << 20);
  struct stat st;
  ASSERT_EQ(stat(("/dev/shm/" + name).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_GE(static_cast<size_t>(st.st_blocks) * 512, size_t{1} << 20) << "pages reserved up front";
  std::memcpy(seg->data(), "hello", 6);
  auto again = ShmSegment::create(name, 4096);
  EXPECT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("already exists"), std::string::npos) << again.status().message();
  auto ro = ShmSegment::open(name, ShmSegment::Access::read_only);
  ASSERT_TRUE(ro.ok());
  EXPECT_STREQ(static_cast<const char*>(ro->data()), "hello");
  EXPECT_TRUE(ShmSegment::remove(name));
  EXPECT_FALSE(ShmSegment::open(name, ShmSegment::Access::read_only).ok());
}

TEST(ShmSegment, BadNamesAndSizes) {
  EXPECT_EQ(ShmSegment::create("a/b", 4096).status().code(), Errc::invalid_argument);
  EXPECT_EQ(ShmSegment::create("", 4096).status().code(), Errc::invalid_argument);
  EXPECT_EQ(ShmSegment::create("engram-zero", 0).status().code(), Errc::invalid_argument);
}

TEST(SegmentHeader, VersionWrittenLastAndMismatchNamesBothVersions) {
  alignas(64) SegmentHeader h{};
  segment_begin_format(&h, SegmentKind::demo, 42, sizeof(h));
  EXPECT_EQ(segment_check(&h, SegmentKind::demo, 42, sizeof(h)).code(), Errc::corrupt) << "not yet published";
  segment_publish(&h);
  EXPECT_TRUE(segment_check(&h, SegmentKind::demo, 42, sizeof(h)).ok());
  EXPECT_EQ(segment_check(&h, SegmentKind::arena, 42, sizeof(h)).code(), Errc::corrupt);
  EXPECT_EQ(segment_check(&h, SegmentKind::demo, 42, 8).code(), Errc::corrupt);
  h.version.store(kLayoutVersion + 1);
  Status s = segment_check(&h, SegmentKind::demo, 42, sizeof(h));
  EXPECT_EQ(s.code(), Errc::layout_mismatch);
  EXPECT_NE(s.message().find("version " + std::to_string(kLayoutVersion + 1)), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("version " + std::to_string(kLayoutVersion)), std::string::npos) << s.message();
  h.version.store(kLayoutVersion);
  h.magic = 0;
  EXPECT_EQ(segment_check(&h, SegmentKind::demo, 42, sizeof(h)).code(), Errc::corrupt);
}

}  // namespace
}  // namespace engram
