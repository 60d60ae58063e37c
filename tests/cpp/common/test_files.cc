// Files a user or peer names (common/files.h): only a regular file is read, never through a
// link, never blocked by a FIFO, never past its cap; and the test of a default folder's safety.
#include "common/files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "fifo_reader.h"
#include "threads.h"

namespace xccl::files {
namespace {

using testing::invalidArgumentMessage;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class Files : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/xccl-files-test-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    for (auto it = made_.rbegin(); it != made_.rend(); ++it) {
      if (::unlink(it->c_str()) != 0) ::rmdir(it->c_str());
    }
    ::rmdir(dir_.c_str());
  }
  std::string file(const std::string& name, const std::string& bytes) {
    const std::string path = at(name);
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  std::string at(const std::string& name) {
    made_.push_back(dir_ + "/" + name);
    return made_.back();
  }
  std::string dir_;
  std::vector<std::string> made_;
};

TEST_F(Files, ReadsARegularFileUpToItsCap) {
  const std::string path = file("f", std::string(100, 'x'));
  EXPECT_EQ(readRegularFile(path, 100, "the file"), std::string(100, 'x'));
  EXPECT_EQ(readRegularFile(file("empty", ""), 100, "the file"), "");
  const std::string why =
      invalidArgumentMessage([&] { readRegularFile(path, 99, "the f " + path); });
  EXPECT_TRUE(contains(why, "the f " + path + ": over 99 bytes")) << why;
  EXPECT_TRUE(contains(invalidArgumentMessage([&] { readRegularFile(at("none"), 9, "x"); }),
                       "x: cannot open it: No such file"));
}

TEST_F(Files, AFifoIsRefusedWithoutWaiting) {
  const std::string fifo = at("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string why;
  const double seconds = testing::secondsReadingFifo(fifo, [&] {
    why = invalidArgumentMessage([&] { readRegularFile(fifo, 100, fifo); });
  });
  EXPECT_LT(seconds, 2.0) << "the read waited on the FIFO";
  EXPECT_TRUE(contains(why, fifo + ": not a regular file (a FIFO)")) << why;
}

TEST_F(Files, ALinkADirectoryOrADeviceIsRefusedNamingWhatItIs) {
  const std::string target = file("target", "secret");
  const std::string link = at("link");
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  EXPECT_TRUE(contains(invalidArgumentMessage([&] { readRegularFile(link, 100, "L"); }),
                       "L: not a regular file (a symbolic link, which is not followed)"));
  EXPECT_TRUE(contains(invalidArgumentMessage([&] { readRegularFile(dir_, 100, "D"); }),
                       "D: not a regular file (a directory)"));
  EXPECT_TRUE(contains(invalidArgumentMessage([&] { readRegularFile("/dev/null", 100, "N"); }),
                       "N: not a regular file (a character device)"));
}

TEST_F(Files, TheCheckSeesTheOpenedFileBeforeAnyRead) {
  const std::string path = file("checked", "abc");
  int calls = 0;
  EXPECT_TRUE(contains(invalidArgumentMessage([&] {
                         readRegularFile(path, 100, "C", [&](const struct stat& st) {
                           ++calls;
                           XCCL_CHECK_ARG(st.st_size == 0, "C: refused at ", st.st_size, " bytes");
                         });
                       }),
                       "C: refused at 3 bytes"));
  EXPECT_EQ(calls, 1);
}

TEST_F(Files, AWriteNeverFollowsALinkNorOpensAFifo) {
  const std::string path = file("out", std::string(100, 'o'));
  writeRegularFile(path, "new", "W");
  EXPECT_EQ(readRegularFile(path, 100, "W"), "new");  // replaced, not overwritten in part
  const std::string victim = file("victim", "keep me");
  const std::string link = at("planted");
  ASSERT_EQ(::symlink(victim.c_str(), link.c_str()), 0);
  EXPECT_TRUE(contains(invalidArgumentMessage([&] { writeRegularFile(link, "x", "W"); }),
                       "(a symbolic link, which is not followed)"));
  EXPECT_EQ(readRegularFile(victim, 100, "V"), "keep me");
  const std::string fifo = at("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const double seconds = testing::secondsReadingFifo(fifo, [&] {
    EXPECT_EQ(testing::errorKindOf([&] { writeRegularFile(fifo, "x", "W"); }),
              ErrorKind::kInvalidArgument);
  });
  EXPECT_LT(seconds, 2.0);
}

TEST_F(Files, AFolderMustBeTheUsersAlone) {
  EXPECT_EQ(folderProblem(dir_), "");
  EXPECT_EQ(folderProblem(dir_ + "/not-yet"), "");  // made later by its user
  EXPECT_EQ(folderProblem("relative"), "is not an absolute path");
  const std::string open = at("open");
  ASSERT_EQ(::mkdir(open.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(open.c_str(), 0777), 0);
  EXPECT_EQ(folderProblem(open), "is writable by its group or others (mode 0777)");
  EXPECT_TRUE(contains(folderProblem(open + "/inside"), "which its group or others may write"));
  const std::string link = at("link");
  ASSERT_EQ(::symlink(dir_.c_str(), link.c_str()), 0);
  EXPECT_EQ(folderProblem(link), "is a symbolic link");
  EXPECT_EQ(folderProblem(file("plain", "")), "is not a folder but a regular file");
  EXPECT_EQ(folderProblem("/tmp/xccl-files-test-none"), "");  // in /tmp: sticky, root's
  if (::geteuid() == 0) {  // only root can give a folder away
    const std::string theirs = at("theirs");
    ASSERT_EQ(::mkdir(theirs.c_str(), 0700), 0);
    ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
    EXPECT_TRUE(contains(folderProblem(theirs), "is owned by uid 65534")) << folderProblem(theirs);
    EXPECT_TRUE(contains(folderProblem(theirs + "/inside"), "owned by uid 65534"));
  }
}

TEST(PrivateFolder, IsFreshAndTheUsersAlone) {
  std::string why;
  const std::string folder = makePrivateFolder("xccl-files-test-", &why);
  ASSERT_FALSE(folder.empty()) << why;
  struct stat st{};
  ASSERT_EQ(::lstat(folder.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(folderProblem(folder), "");
  const std::string another = makePrivateFolder("xccl-files-test-", &why);
  EXPECT_NE(another, folder);
  ::rmdir(folder.c_str());
  ::rmdir(another.c_str());
}

}  // namespace
}  // namespace xccl::files
