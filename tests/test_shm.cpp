#include "core/shm.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

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

// Resident bytes of this process's mapping that starts at `addr`, from
// /proc/self/smaps: the pages its page tables map, not the segment's.
size_t mapped_bytes(const void* addr) {
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool in_entry = false;
  while (std::getline(in, line)) {
    uintptr_t start = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> start >> dash >> end && dash == '-') {
      in_entry = start == reinterpret_cast<uintptr_t>(addr);
      continue;
    }
    size_t kb = 0;
    if (in_entry && std::sscanf(line.c_str(), "Rss: %zu kB", &kb) == 1) return kb * 1024;
  }
  return 0;
}

// Every page of a mapping is mapped when create or open returns, so that no
// process pays a fault per page on its first pass over an arena.
TEST(ShmSegment, MappingsArePopulatedUpFront) {
  const std::string name = "engram-test-populate-" + std::to_string(getpid());
  ShmSegment::remove(name);
  constexpr size_t kSize = size_t{8} << 20;
  auto seg = ShmSegment::create(name, kSize, 0600);
  ASSERT_TRUE(seg.ok()) << seg.status().to_string();
  EXPECT_EQ(mapped_bytes(seg->data()), kSize);
  auto rw = ShmSegment::open(name, ShmSegment::Access::read_write);
  ASSERT_TRUE(rw.ok());
  EXPECT_EQ(mapped_bytes(rw->data()), kSize) << "a second mapping, never touched";
  auto ro = ShmSegment::open(name, ShmSegment::Access::read_only);
  ASSERT_TRUE(ro.ok());
  EXPECT_EQ(mapped_bytes(ro->data()), kSize) << "read-only";
  ShmSegment::remove(name);
}

// load_pages maps every page that a range reaches, and no other, in this
// process (an anonymous segment is not populated, so it starts unmapped).
TEST(ShmSegment, LoadPagesMapsEveryPageOfTheRangeAndNoOther) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto seg = ShmSegment::anonymous(64 * page);
  ASSERT_TRUE(seg.ok()) << seg.status().to_string();
  char* base = static_cast<char*>(seg->data());
  ASSERT_EQ(mapped_bytes(base), 0u) << "an anonymous segment should start unmapped";
  load_pages(base, 0);
  EXPECT_EQ(mapped_bytes(base), 0u) << "an empty range";
  load_pages(base + 8 * page + 100, 16 * page);  // starts mid-page: reaches pages 8 to 24
  EXPECT_EQ(mapped_bytes(base), 17 * page);
  load_pages(base + 40 * page + page - 1, 2);  // the last byte of page 40 and the first of 41
  EXPECT_EQ(mapped_bytes(base), 19 * page);
  load_pages(base, 64 * page);
  EXPECT_EQ(mapped_bytes(base), 64 * page);
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
