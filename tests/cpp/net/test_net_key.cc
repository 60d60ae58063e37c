// The job's network key (net_key.h): a key file is used only when it is the user's own regular
// file, readable by nobody else, of a sane length, with an error naming the file and the fault
// otherwise; with XCCL_NET_KEY_FILE set the key never goes through the store.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>

#include "common/sha256.h"
#include "fifo_reader.h"
#include "harness.h"
#include "net/rendezvous/net_key.h"

namespace xccl::net {
namespace {

using testing::invalidArgumentMessage;

class KeyFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/xccl-key-test-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    for (const std::string& p : made_) ::unlink(p.c_str());
    ::rmdir(dir_.c_str());
  }
  std::string write(const std::string& name, const std::string& bytes, mode_t mode) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    ::chmod(path.c_str(), mode);
    made_.push_back(path);
    return path;
  }
  std::string dir_;
  std::vector<std::string> made_;
};

TEST_F(KeyFiles, TheKeyIsTheHashOfTheFile) {
  const std::string secret(32, 'k');
  const NetKey key = readKeyFile(write("good", secret, 0600));
  EXPECT_EQ(key, crypto::sha256(secret.data(), secret.size()));
  EXPECT_EQ(readKeyFile(write("owner-only", secret, 0400)), key);
}

TEST_F(KeyFiles, UnsafeOrOddFilesAreRefusedNamingTheFault) {
  const std::string secret(32, 'k');
  std::string path = write("shared", secret, 0640);
  std::string why = invalidArgumentMessage([&] { readKeyFile(path); });
  EXPECT_NE(why.find(path), std::string::npos) << why;
  EXPECT_NE(why.find("mode 640"), std::string::npos) << why;
  path = write("world", secret, 0604);
  EXPECT_NE(invalidArgumentMessage([&] { readKeyFile(path); }).find("mode 604"), std::string::npos);
  path = write("short", std::string(31, 'k'), 0600);
  EXPECT_NE(invalidArgumentMessage([&] { readKeyFile(path); }).find("holds 31 bytes"),
            std::string::npos);
  path = write("long", std::string(kMaxKeyFileBytes + 1, 'k'), 0600);
  EXPECT_NE(invalidArgumentMessage([&] { readKeyFile(path); }).find("65537 bytes"),
            std::string::npos);
  EXPECT_NE(invalidArgumentMessage([&] { readKeyFile(dir_); }).find("not a regular file (a dir"),
            std::string::npos);
  EXPECT_NE(invalidArgumentMessage([&] { readKeyFile(dir_ + "/missing"); }).find("cannot open"),
            std::string::npos);
  // A link is not followed: what was checked must be the file itself.
  const std::string target = write("target", secret, 0600);
  const std::string link = dir_ + "/link";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  made_.push_back(link);
  why = invalidArgumentMessage([&] { readKeyFile(link); });
  EXPECT_NE(why.find("XCCL_NET_KEY_FILE=" + link + ": not a regular file (a symbolic link"),
            std::string::npos)
      << why;
  if (::geteuid() == 0) {  // only root can give a file away
    path = write("theirs", secret, 0600);
    ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0);
    EXPECT_NE(invalidArgumentMessage([&] { readKeyFile(path); }).find("owned by uid 65534"),
              std::string::npos);
  }
}

// A FIFO (of the right owner and mode) would block open() until someone writes to it: refused
// at once, never opened.
TEST_F(KeyFiles, AFifoIsRefusedWithoutWaiting) {
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  made_.push_back(fifo);
  std::string why;
  const double seconds = testing::secondsReadingFifo(fifo, [&] {
    why = invalidArgumentMessage([&] { readKeyFile(fifo); });
  });
  EXPECT_LT(seconds, 2.0) << "reading the key file waited on the FIFO";
  EXPECT_NE(why.find("XCCL_NET_KEY_FILE=" + fifo + ": not a regular file (a FIFO)"),
            std::string::npos)
      << why;
}

// With XCCL_NET_KEY_FILE (read once per process: a fresh one), both ranks hold the file's key
// and the store holds none.
TEST(NetKey, KeyFileIsUsedAndKeptOutOfTheStore) {
  if (!testing::isFreshProcess()) {
    const std::string path = "/tmp/xccl-key-test-" + std::to_string(::getpid());
    std::ofstream(path, std::ios::binary) << std::string(40, 's');
    ::chmod(path.c_str(), 0600);
    testing::inFreshProcess({{"XCCL_NET_KEY_FILE", path.c_str()}});
    ::unlink(path.c_str());
    return;
  }
  const std::string secret(40, 's');
  const crypto::Digest expected = crypto::sha256(secret.data(), secret.size());
  MemoryStore store;
  testing::runThreads(2, [&](int rank) {
    tcp::TcpTransport t(store, rank, 2, testing::loopbackOptions("keyfile"));
    EXPECT_EQ(std::memcmp(t.handshakeTerms().key, expected.data(), expected.size()), 0);
  });
  EXPECT_THROW(store.get("keyfile/key", std::chrono::milliseconds(1)), Error);
}

TEST(NetKey, DefaultKeyIsDrawnPerGroupAndShared) {
  MemoryStore store;
  NetKey keys[2][2];
  for (int group = 0; group < 2; ++group) {
    testing::runThreads(2, [&](int rank) {
      tcp::TcpTransport t(store, rank, 2, testing::loopbackOptions("g" + std::to_string(group)));
      std::memcpy(keys[group][rank].data(), t.handshakeTerms().key, tcp::kNetKeyBytes);
    });
  }
  EXPECT_EQ(keys[0][0], keys[0][1]);
  EXPECT_EQ(keys[1][0], keys[1][1]);
  EXPECT_NE(keys[0][0], keys[1][0]);
}

}  // namespace
}  // namespace xccl::net
