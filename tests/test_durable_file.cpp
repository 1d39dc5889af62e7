// core/durable_file: a file appears whole at its name or not at all, the
// old one stays until commit(), and the temporary never outlives the
// DurableFile that wrote it.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "core/durable_file.hpp"

namespace engram {
namespace {

class DurableFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char t[] = "/tmp/engram-durable-XXXXXX";
    ASSERT_NE(::mkdtemp(t), nullptr);
    dir_ = t;
  }
  void TearDown() override { (void)std::system(("rm -rf " + dir_).c_str()); }
  std::string file(const char* name) const { return dir_ + "/" + name; }
  static bool exists(const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0;
  }
  static std::string read(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  static void put(const std::string& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }
  std::string dir_;
};

TEST_F(DurableFileTest, CommitReplacesTheFileWithTheWholeNewOne) {
  put(file("a"), "old");
  DurableFile f;
  ASSERT_TRUE(f.create(file("a"), ".tmp").ok());
  EXPECT_EQ(f.tmp_path(), file("a.tmp"));
  ASSERT_TRUE(f.write("hello, ", 7).ok());
  ASSERT_TRUE(f.write("world", 5).ok());
  ASSERT_TRUE(f.write_at("H", 1, 0).ok());  // a header patched at the end
  EXPECT_EQ(read(file("a")), "old") << "the old file stays until commit()";
  ASSERT_TRUE(f.commit().ok());
  EXPECT_EQ(read(file("a")), "Hello, world");
  EXPECT_FALSE(exists(file("a.tmp")));
}

TEST_F(DurableFileTest, AbandonedOrDestroyedBeforeCommitLeavesTheOldFileAndNoTemporary) {
  put(file("a"), "old");
  {
    DurableFile f;
    ASSERT_TRUE(f.create(file("a"), ".partial").ok());
    ASSERT_TRUE(f.write("new", 3).ok());
    EXPECT_TRUE(exists(file("a.partial")));
  }
  EXPECT_FALSE(exists(file("a.partial")));
  DurableFile g;
  ASSERT_TRUE(g.create(file("b"), ".partial").ok());
  g.abandon();
  EXPECT_FALSE(exists(file("b.partial")));
  EXPECT_FALSE(exists(file("b")));
  EXPECT_EQ(read(file("a")), "old");
}

TEST_F(DurableFileTest, ErrorsNameTheFileAndWhy) {
  DurableFile f;
  Status s = f.create(file("no/such/dir"), ".tmp");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot create " + file("no/such/dir.tmp")), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("No such file or directory"), std::string::npos) << s.message();
  EXPECT_FALSE(fsync_dir(file("none")).ok());
  EXPECT_TRUE(fsync_dir(dir_).ok());
}

}  // namespace
}  // namespace engram
